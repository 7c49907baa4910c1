"""``dcaccel schedule``: summary, JSON, on-chip memory, Gantt output and errors."""

from __future__ import annotations

import json

import pytest

from dcaccel.cli import main
from dcaccel.dag import generators as gen
from tests.scheduler.conftest import VECTORS, load_vector

SEED = VECTORS / "seedconv_mv_noxycolbuf.json"


@pytest.mark.parametrize(("pes", "partitioning"), [(16, "relaxed"), (128, "strict"), (4, "relaxed")])
def test_json_output_matches_the_reference(capsys, pes, partitioning):
    data, _ = load_vector(SEED.stem)
    expected = next(r for r in data["results"] if r["pes"] == pes and r["partitioning"] == partitioning)
    status = main(["schedule", str(SEED), "--pes", str(pes), "--partitioning", partitioning, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0
    assert out["makespan"] == expected["streaming_makespan"]
    assert out["num_blocks"] == expected["num_blocks"]
    assert (out["work"], out["depth"], out["io_volume"]) == (expected["work"], expected["depth"], expected["io_buffer"])
    assert out["lower_bound"] == -(-expected["work"] // pes)


def test_list_scheduler_and_onchip_memory(capsys):
    data, _ = load_vector(SEED.stem)
    expected = next(r for r in data["results"] if r["pes"] == 16 and r["partitioning"] == "relaxed")
    main(["schedule", str(SEED), "--pes", "16", "--scheduler", "list", "--json"])
    assert json.loads(capsys.readouterr().out)["makespan"] == expected["eft_makespan"]
    main(["schedule", str(SEED), "--pes", "16", "--onchip", "4096", "--json"])  # elements, as explore --onchip
    io = json.loads(capsys.readouterr().out)["io"]
    assert io["onchip_capacity"] == 4096
    assert [io["off_chip"], io["on_chip"], io["streamed"]] == expected["io_global"]["4096"]


def test_onchip_is_in_elements_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["schedule", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--onchip ELEMENTS on-chip memory per block (0: the architecture's on-" in out
    assert "capacity); unit: elements (default: 0)" in out
    assert "--element-bytes" not in out


def test_readable_summary_and_gantt(tmp_path, capsys):
    path = tmp_path / "fj.json"
    path.write_text(json.dumps(gen.fork_join(4, 2, 16).to_json()))
    chart = tmp_path / "fj.png"
    assert main(["schedule", str(path), "--pes", "4", "--gantt", str(chart)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "forkjoin_4_2: streaming schedule on 4 PEs (relaxed partitioning)"
    assert "makespan" in out and "blocks" in out
    assert chart.read_bytes().startswith(b"\x89PNG")


def _run(argv: list[str]) -> int:
    """``main(argv)``, with argparse's exit (a refused flag value) as the status."""
    try:
        return main(argv)
    except SystemExit as exit_info:
        return exit_info.code


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.json", "--pes", "4"], "cannot read DAG file"),
        (["{good}", "--pes", "0"], "argument --pes: pes must be integers of at least 1, got 0"),
        (["{good}", "--pes", "-3"], "argument --pes: pes must be integers of at least 1, got -3"),
        (["{good}", "--pes", "many"], "argument --pes: expected an integer, got 'many'"),
        (
            ["{good}", "--pes", "2", "--onchip", "-1"],
            "argument --onchip: onchip_memory must be integers of at least 0, got -1",
        ),
        (["{good}", "--pes", "2", "--element-bytes", "4"], "unrecognized arguments: --element-bytes 4"),
        (["{good}", "--pes", "2", "--gantt", "chart.gif"], "--gantt {tmp}/chart.gif: unknown format '.gif'"),
        (["{good}", "--pes", "2", "--gantt", "no/such/chart.png"], "--gantt {tmp}/no/such/chart.png: no such folder"),
        (["{good}", "--pes", "2", "--gantt", "."], "--gantt {tmp}: unknown format ''"),
        (["{empty}", "--pes", "2"], "cannot read DAG file '{tmp}/empty.json': Expecting value"),
        (["{model}", "--pes", "2"], "cannot read DAG file '{tmp}/model.onnx'"),
        (["{list}", "--pes", "2"], "is not a DAG in the vectors' format: expected a JSON object, got a list"),
        (["{folder}", "--pes", "2"], "cannot read DAG file '{tmp}/folder'"),
        (["{symbolic}", "--pes", "2"], "has symbolic volumes (N)"),
    ],
    ids=lambda value: None if isinstance(value, str) else "",
)
def test_errors_are_one_line(tmp_path, capsys, args, message):
    files = {
        "good": ("good.json", json.dumps(gen.chain([2, 2]).to_json())),
        "empty": ("empty.json", ""),
        "model": ("model.onnx", b"\x08\x07\x12\x07pytorch\x1a\x032.1:\xff\xfe"),
        "list": ("list.json", "[1, 2]"),
        "symbolic": ("symbolic.json", json.dumps({**gen.chain([2, 2]).to_json(), "edges": [
            {"src": 0, "dst": 1, "volume": "N"}, {"src": 1, "dst": 2, "volume": "N"}]})),
    }  # fmt: skip
    for name, content in files.values():
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    (tmp_path / "folder").mkdir()
    paths = {key: str(tmp_path / name) for key, (name, _) in files.items()} | {"folder": str(tmp_path / "folder")}
    args = [paths[a[1:-1]] if a[1:-1] in paths else str(tmp_path / a) if a.endswith(("json", "png", "gif")) or a == "."
            else a for a in args]  # fmt: skip
    before = sorted(tmp_path.iterdir())
    assert _run(["schedule", *args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and "Traceback" not in captured.err
    assert lines[-1].startswith(("dcaccel schedule: error: ", "dcaccel: error: "))  # the latter: unknown flags
    assert message.format(tmp=tmp_path) in lines[-1]
    assert all(line.startswith(("usage: ", " ")) for line in lines[:-1])
    assert sorted(tmp_path.iterdir()) == before


def test_invalid_dag_is_reported(tmp_path, capsys):
    dag = gen.chain([2, 2]).to_json()
    dag["edges"].append({"src": 1, "dst": 1, "volume": 2})
    path = tmp_path / "cyclic.json"
    path.write_text(json.dumps(dag))
    assert main(["schedule", str(path), "--pes", "2"]) == 2
    assert "has a cycle: 1 'T0' -> 1 'T0'" in capsys.readouterr().err
