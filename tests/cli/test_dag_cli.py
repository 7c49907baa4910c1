"""``dcaccel dag MODEL``: summary, written DAGs and bad arguments (nothing is compiled)."""

import json

import pytest

import dcaccel.cli.dag
import dcaccel.cli.models
from dcaccel.cli import main
from dcaccel.dag import metrics
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.frontend import Workload

#: conv-seed per MMM shape: tasks, buffers, edges and I/O volume of the DAG (Contract 3, the vectors).
SEED = {
    "mv": (582, 7, 1741, "129,474"),
    "op": (30, 9, 89, "222,936"),
    "lmv": (12, 9, 33, "150,936"),
}


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main(["dag", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    "shape", ["mv", pytest.param("op", marks=pytest.mark.slow), pytest.param("lmv", marks=pytest.mark.slow)]
)
def test_summary(capsys, shape):
    status, out, _ = run(capsys, "conv-seed", "--impl", f"Conv={shape}")
    tasks, buffers, edges, io = SEED[shape]
    lines = out.splitlines()
    assert status == 0
    assert lines[0] == f"DAG conv-seed: {tasks} tasks, {buffers} buffers, {edges} edges"
    assert lines[1].endswith(f"I/O volume {io}")
    task_map = {"mv": "MV", "op": "OP", "lmv": "LMV"}[shape]
    count = {"mv": 576, "op": 25, "lmv": 6}[shape]
    assert lines[3].split() == ["label", "tasks", "work"]
    assert lines[4].split()[:2] == [task_map, str(count)]
    assert lines[-1] == "(granularity task, edge volume exact)"


@pytest.mark.slow
def test_summary_of_coarse_reference_dag(capsys):
    """The buffer node inserted for the re-read ``_a_stream`` is detail, shown with --verbose only."""
    argv = ["conv-seed", "--granularity", "coarse", "--edge-volume", "reference"]
    status, out, err = run(capsys, *argv)
    assert status == 0 and err == ""
    assert out.splitlines()[0] == "DAG conv-seed: 7 tasks, 8 buffers, 17 edges"
    assert out.splitlines()[-1] == "(granularity coarse, edge volume reference)"
    status, verbose_out, err = run(capsys, *argv, "--verbose")
    assert status == 0 and verbose_out == out
    assert "dcaccel dag: extract conv-seed: container '_a_stream' made a buffer node (a consumer re-reads" in err


@pytest.mark.parametrize("suffix", [".json", pytest.param(".dot", marks=pytest.mark.slow)])
def test_out_file(capsys, tmp_path, suffix):
    path = tmp_path / f"dag{suffix}"
    status, out, _ = run(capsys, "conv-seed", "--impl", "Conv=lmv", "--edge-volume", "reference", "--out", str(path))
    assert status == 0 and out.startswith("wrote TaskDAG('conv-seed', 22 nodes, 33 edges)")
    text = path.read_text()
    if suffix == ".json":
        dag = TaskDAG.from_json(json.loads(text))
        dag.validate()
        assert metrics.io_volume(dag) == 150_936
    else:
        assert text.startswith('digraph "conv-seed" {') and text.count(" -> ") == 33


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("dag.txt", "--out {path}: unknown format '.txt' (use one of .json, .dot)"),
        ("missing/dag.json", "--out {path}: no such folder '{folder}'"),
        ("", "--out {path}: unknown format '' (use one of .json, .dot)"),
    ],
)
def test_bad_out_is_refused_before_any_work(capsys, monkeypatch, tmp_path, out, message):
    def no_work(spec, symbols=()):
        raise AssertionError("the model was loaded before --out was checked")

    monkeypatch.setattr(dcaccel.cli.models, "resolve_model", no_work)
    path = tmp_path / out
    status, stdout, err = run(capsys, "conv-seed", "--out", str(path))
    assert status == 2 and stdout == ""
    assert err == f"dcaccel dag: error: {message.format(path=path, folder=path.parent)}\n"


@pytest.mark.parametrize("out", [None, "dag.json", "dag.dot"])
def test_an_invalid_dag_is_neither_written_nor_summarised(
    capsys, monkeypatch, tmp_path, conv_seed, two_task_chain, out
):
    """The DAG is validated before anything is written: a task with two different in-volumes fails."""
    invalid = two_task_chain
    invalid.add_edge(0, 2, 5)  # source → B: B reads 4 elements from A, 5 from the source
    monkeypatch.setattr(dcaccel.cli.models, "resolve_model", lambda spec, *_: conv_seed)
    monkeypatch.setattr(Workload, "lower", lambda self, choices: None)
    monkeypatch.setattr(dcaccel.cli.dag, "extract", lambda *args, **kwargs: invalid)
    argv = [] if out is None else ["--out", str(tmp_path / out)]
    status, stdout, err = run(capsys, "conv-seed", "--impl", "Conv=lmv", *argv)
    assert status == 2 and stdout == ""
    assert err == "dcaccel dag: error: task 2 'B' has in-edges with different volumes (4 and 5)\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["--granularity", "tiles=0"], ["--granularity", "fine"], ["--edge-volume", "max"]])
def test_bad_options(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        main(["dag", "conv-seed", *argv])
    assert exit_info.value.code == 2
    assert "dcaccel dag: error: argument" in capsys.readouterr().err


def test_unknown_model(capsys):
    status, _, err = run(capsys, "no-such-model")
    assert status == 2 and "unknown model 'no-such-model'" in err


@pytest.fixture(scope="module")
def opaque_onnx(tmp_path_factory):
    """An ONNX file of tests/dag/test_opaque.py's model (RandomUniformLike has no implementation: a host task)."""
    import onnx

    from tests.dag.test_opaque import opaque_model

    path = tmp_path_factory.mktemp("opaque") / "opaque.onnx"
    onnx.save(opaque_model(), path)
    return str(path)


@pytest.mark.slow
def test_summary_names_the_opaque_task_and_its_share_of_the_work(opaque_onnx, capsys):
    from tests.dag.test_opaque import ELEMENTS

    with pytest.warns(UserWarning, match=r"kept as opaque tasks: randomuniformlike \(RandomUniformLike\)"):
        status, out, _ = run(capsys, opaque_onnx, "--impl", "MatMul=lmv")
    lines = out.splitlines()
    work = int(lines[1].split(",")[0].removeprefix("work ").replace(",", ""))
    assert status == 0
    assert lines[2] == f"opaque tasks 1 ({ELEMENTS / work:.1%} of the work): randomuniformlike (RandomUniformLike)"
    assert any(line.split()[:3] == ["randomuniformlike", "1", str(ELEMENTS)] for line in lines[3:])


def test_strict_refuses_the_opaque_op_in_one_line(opaque_onnx, capsys):
    status, out, err = run(capsys, opaque_onnx, "--strict")
    assert (status, out) == (2, "")
    assert (
        err == "dcaccel dag: error: unsupported op RandomUniformLike (node 'randomuniformlike'): "
        "no dcaccel implementation\n"
    )


@pytest.mark.slow
def test_strict_accepts_a_model_that_has_every_implementation(capsys):
    status, out, _ = run(capsys, "conv-seed", "--impl", "Conv=lmv", "--strict")
    assert status == 0 and out.startswith("DAG conv-seed: 12 tasks") and "opaque" not in out
