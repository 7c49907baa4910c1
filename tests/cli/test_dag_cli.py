"""``dcaccel dag MODEL``: summary, written DAGs and bad arguments (nothing is compiled)."""

import json

import pytest

from dcaccel.cli import main
from dcaccel.dag import metrics
from dcaccel.dag.taskdag import TaskDAG

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


@pytest.mark.parametrize("shape", ["mv", "op", "lmv"])
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


def test_summary_of_coarse_reference_dag(capsys):
    with pytest.warns(UserWarning, match="_a_stream"):
        status, out, _ = run(capsys, "conv-seed", "--granularity", "coarse", "--edge-volume", "reference")
    assert status == 0
    assert out.splitlines()[0] == "DAG conv-seed: 7 tasks, 8 buffers, 17 edges"
    assert out.splitlines()[-1] == "(granularity coarse, edge volume reference)"


@pytest.mark.parametrize("suffix", [".json", ".dot"])
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


def test_bad_out_suffix(capsys, tmp_path):
    status, out, err = run(capsys, "conv-seed", "--out", str(tmp_path / "dag.txt"))
    assert status == 2 and out == ""
    assert err.strip() == f"dcaccel dag: error: --out file '{tmp_path / 'dag.txt'}' must end in .json or .dot"


@pytest.mark.parametrize("argv", [["--granularity", "tiles=0"], ["--granularity", "fine"], ["--edge-volume", "max"]])
def test_bad_options(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        main(["dag", "conv-seed", *argv])
    assert exit_info.value.code == 2
    assert "dcaccel dag: error: argument" in capsys.readouterr().err


def test_unknown_model(capsys):
    status, _, err = run(capsys, "no-such-model")
    assert status == 2 and "unknown model 'no-such-model'" in err
