"""Bad ``--impl`` keys and other hostile arguments: one line on stderr and exit status 2, never a traceback."""

import pytest

from dcaccel.cli import main
from dcaccel.cli.models import check_choice_keys, implementation_choices
from dcaccel.errors import DcaccelError


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
        ([("Conv", "op")], {"Conv": "op"}),
        ([("Conv", "op"), ("Conv", "op"), ("conv1", "lmv")], {"Conv": "op", "conv1": "lmv"}),
    ],
)
def test_implementation_choices(pairs, choices):
    assert implementation_choices(pairs) == choices


def test_conflicting_repeat_is_an_error():
    with pytest.raises(DcaccelError, match=r"^--impl Conv: given twice, as 'op' and 'mv' \(choose one\)$"):
        implementation_choices([("Conv", "op"), ("Gemm", "mv"), ("Conv", "mv")])


@pytest.mark.parametrize("command", ["verify", "dag"])
@pytest.mark.parametrize(
    ("impl", "message"),
    [
        (["conv=lmv"], "--impl conv: no node or op type 'conv' in conv-seed (did you mean 'Conv'?)"),
        (["Conv=lmv", "Conv=op"], "--impl Conv: given twice, as 'lmv' and 'op' (choose one)"),
    ],
)
def test_bad_impl_keys_at_the_cli(capsys, command, impl, message):
    assert main([command, "conv-seed", "--impl", *impl]) == 2
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
