"""Bad ``--impl`` keys and other hostile arguments: one line on stderr and exit status 2, never a traceback.

The fuzz at the end runs ``info``, ``verify`` and ``dag`` in-process with hostile values; nothing is
compiled or lowered there (verification, lowering and extraction are replaced by stubs), because the
subject is what the sub-commands do with their arguments before that work.
"""

import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dcaccel.cli.dag
import dcaccel.cli.info
import dcaccel.cli.models
import dcaccel.cli.verify
from dcaccel.cli import main
from dcaccel.cli.models import check_choice_keys, implementation_choices
from dcaccel.dag.taskdag import NodeKind, TaskDAG
from dcaccel.errors import DcaccelError
from dcaccel.frontend import Workload
from dcaccel.verification import OutputCheck, VerifyReport


@pytest.mark.parametrize("keys", [[], ["Conv"], ["conv1"], ["Conv", "Gemm", "fc3", "Softmax"]])
def test_known_choice_keys(lenet, keys):
    check_choice_keys(lenet, keys)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["conv"], "--impl conv: no node or op type 'conv' in lenet (did you mean 'Conv'?)"),
        (["Conv", "fc4"], "--impl fc4: no node or op type 'fc4' in lenet (did you mean 'fc3'?)"),
        (["Attention"], "--impl Attention: no node or op type 'Attention' in lenet"),
        (["MatMul"], "--impl MatMul: no node or op type 'MatMul' in lenet"),
    ],
)
def test_unknown_choice_keys(lenet, keys, message):
    with pytest.raises(DcaccelError) as error:
        check_choice_keys(lenet, keys)
    assert str(error.value) == message


def test_matmul_is_the_op_type_of_a_dace_matrix_product(mmm):
    check_choice_keys(mmm, ["MatMul", "_MatMult_"])


@pytest.mark.parametrize(
    ("pairs", "choices"),
    [
        ([], {}),
        ([("Conv", ("op",))], {"Conv": "op"}),
        ([("Conv", ("op",)), ("Conv", ("op",)), ("conv1", ("lmv",))], {"Conv": "op", "conv1": "lmv"}),
    ],
)
def test_implementation_choices(pairs, choices):
    assert implementation_choices(pairs) == choices


def test_conflicting_repeat_is_an_error():
    with pytest.raises(DcaccelError, match=r"^--impl Conv: given twice, as 'op' and 'mv' \(choose one\)$"):
        implementation_choices([("Conv", ("op",)), ("Gemm", ("mv",)), ("Conv", ("mv",))])


def test_several_implementations_of_a_key_are_refused_where_the_model_is_lowered_once():
    with pytest.raises(DcaccelError, match=r"^--impl Conv=op,mv: this command lowers the model once"):
        implementation_choices([("Conv", ("op", "mv"))])


@pytest.mark.parametrize("command", ["verify", "dag"])
@pytest.mark.parametrize(
    ("impl", "message"),
    [
        (["conv=lmv"], "--impl conv: no node or op type 'conv' in conv-seed (did you mean 'Conv'?)"),
        (["Conv=lmv", "Conv=op"], "--impl Conv: given twice, as 'lmv' and 'op' (choose one)"),
        (["Conv=lmv,op"], "--impl Conv=lmv,op: this command lowers the model once: one implementation per key"),
    ],
)
def test_bad_impl_keys_at_the_cli(capsys, command, impl, message):
    assert main([command, "conv-seed", *(arg for pair in impl for arg in ("--impl", pair))]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"dcaccel {command}: error: {message}\n"


def _dag_file(folder) -> str:
    path = folder / "dag.json"
    path.write_text('{"name": "seed", "nodes": [], "edges": []}')
    return str(path)


def _broken_python(folder) -> str:
    path = folder / "model.py"
    path.write_text("def model(:\n")
    return f"{path}:model"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["info", _dag_file], 'is not an ONNX model: Message type "onnx.ModelProto" has no field named "name"'),
        (["verify", _dag_file], 'is not an ONNX model: Message type "onnx.ModelProto" has no field named "name"'),
        (["verify", "x.json"], "unknown model 'x.json'"),
        (["info", _broken_python], "line 1: SyntaxError: invalid syntax"),
        (["verify", "conv-seed", "--seed", "-5"], "argument --seed: expected an integer of at least 0, got -5"),
        (["verify", "conv-seed", "--rtol", "-1"], "argument --rtol: expected a finite number of at least 0, got -1"),
        (["verify", "conv-seed", "--atol", "inf"], "argument --atol: expected a finite number of at least 0, got inf"),
        (["dag", "conv-seed", "--out", "/nonexistent/x.json"], "--out /nonexistent/x.json: no such folder"),
    ],
)
def test_one_line_errors(capsys, tmp_path, argv, error):
    argv = [arg(tmp_path) if callable(arg) else arg for arg in argv]
    try:
        status = main(argv)
    except SystemExit as exit_info:  # argparse refuses a flag's value
        status = exit_info.code
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    last = captured.err.splitlines()[-1]
    assert last.startswith(f"dcaccel {argv[0]}: error: ") and error in last
    assert "Traceback" not in captured.err


#: Text without control characters (a newline inside an argument would be echoed inside the error line).
TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=12)

#: Hostile MODEL arguments (files are created in the test's folder before it runs; see ``prepared``).
MODELS = st.one_of(
    st.sampled_from(["conv-seed", "mmm"]),
    st.sampled_from(
        [
            "lenet5",
            "",
            "-",
            ".",
            "/",
            "x.json",
            "missing.onnx",
            "missing.py:model",
            "dag.json",
            "empty.onnx",
            "syntax.py:model",
            "raises.py:model",
            "fine.py:nothing",
            "fine.py:number",
            "fine.py:1bad",
        ]
    ),
    TEXT,
)

#: Values for flags: valid ones, hostile ones and any text.
NUMBERS = st.one_of(
    st.sampled_from(["0", "1", "1e-4", "2e3"]),
    st.sampled_from(["-5", "-0", "nan", "inf", "-inf", "1e309", "abc", "", "0x10"]),
    st.integers(-(2**70), 2**70).map(str),
    TEXT,
)
IMPLS = st.lists(
    st.one_of(
        st.sampled_from(["Conv=lmv", "Conv_0=op", "MatMul=mv"]),
        st.sampled_from(["conv=lmv", "Conv=", "=op", "Conv", "x=y=z", "-"]),
        TEXT,
    ),
    max_size=3,
)
OUTS = st.one_of(
    st.sampled_from(["dag.json", "dag.dot", "dag.JSON"]),
    st.sampled_from(["dag.txt", "", ".json", "sub/dag.json", "/", ".", "dag.json/", "dag.json/x.dot"]),
    TEXT,
)


def _argv(command: str, model: str, draw) -> list[str]:
    argv = [command, model]
    if command == "info":
        return argv
    impl = draw(IMPLS)
    for pair in impl:
        argv += ["--impl", pair]
    if command == "verify":
        for flag in ("--seed", "--rtol", "--atol"):
            if draw(st.booleans()):
                argv += [flag, draw(NUMBERS)]
        if draw(st.booleans()):
            argv.append("--lowered")
    else:
        for flag, values in (
            ("--granularity", st.one_of(st.sampled_from(["task", "coarse", "tiles=2", "tiles=0", "tiles=-1"]), TEXT)),
            ("--edge-volume", st.one_of(st.sampled_from(["exact", "reference"]), TEXT)),
            ("--sink", st.one_of(st.sampled_from(["auto", "always"]), TEXT)),
            ("--out", OUTS),
        ):
            if draw(st.booleans()):
                argv += [flag, draw(values)]
    return argv


@st.composite
def command_lines(draw):
    """A sub-command with a MODEL and hostile flag values."""
    return _argv(draw(st.sampled_from(["info", "verify", "dag"])), draw(MODELS), draw)


@pytest.fixture
def prepared(tmp_path, monkeypatch, conv_seed, mmm):
    """A folder holding hostile model files, made the working directory; built-in names resolve to the
    session's workloads, and verification, lowering and extraction are stubs."""
    (tmp_path / "dag.json").write_text('{"name": "seed", "nodes": [], "edges": []}')
    (tmp_path / "empty.onnx").write_bytes(b"")
    (tmp_path / "syntax.py").write_text("def model(:\n")
    (tmp_path / "raises.py").write_text("raise RuntimeError('at import')\n")
    (tmp_path / "fine.py").write_text("number = 42\n")
    monkeypatch.chdir(tmp_path)
    resolve = dcaccel.cli.models.resolve_model
    built = {"conv-seed": conv_seed, "mmm": mmm}
    for command in (dcaccel.cli.info, dcaccel.cli.models):  # verify and dag load through cli.models
        monkeypatch.setattr(
            command, "resolve_model", lambda spec, *rest: built[spec] if spec in built else resolve(spec, *rest)
        )
    passed = VerifyReport("w", "unlowered", "python", 1e-4, 1e-5, 0, (OutputCheck("y", (1,), 0.0, 0.0, True),))
    monkeypatch.setattr(dcaccel.cli.verify, "verify", lambda *args, **kwargs: passed)
    monkeypatch.setattr(Workload, "lower", lambda self, choices=None: None)
    dag = TaskDAG("stub")
    dag.add_edge(dag.add_node(NodeKind.SOURCE, "source"), dag.add_node(NodeKind.TASK, "task"), 3)
    monkeypatch.setattr(dcaccel.cli.dag, "extract", lambda *args, **kwargs: dag)
    return tmp_path


def _listing(folder) -> set[str]:
    return {
        os.path.relpath(os.path.join(root, name), folder)
        for root, dirs, files in os.walk(folder)
        for name in dirs + files
    }


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=command_lines())
def test_hostile_arguments(prepared, capsys, argv):
    before = _listing(prepared)
    try:
        status = main(argv)
    except SystemExit as exit_info:  # argparse refuses a flag's value
        status = exit_info.code
    captured = capsys.readouterr()
    after = _listing(prepared)
    event(f"{argv[0]} exit {status}")
    assert "Traceback" not in captured.err
    if status == 0:
        out = argv[argv.index("--out") + 1] if "--out" in argv else None
        assert after - before <= ({os.path.normpath(out)} if out else set())
        for created in after - before:
            os.remove(prepared / created)
        return
    assert status == 2 and after == before
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"dcaccel {argv[0]}: error: ")
