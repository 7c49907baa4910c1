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
    main(["schedule", str(SEED), "--pes", "16", "--onchip", "4096", "--element-bytes", "1", "--json"])
    io = json.loads(capsys.readouterr().out)["io"]
    assert [io["off_chip"], io["on_chip"], io["streamed"]] == expected["io_global"]["4096"]
    main(["schedule", str(SEED), "--pes", "16", "--onchip", "16384", "--json"])  # 4-byte elements
    assert json.loads(capsys.readouterr().out)["io"]["onchip_capacity"] == 4096


def test_readable_summary_and_gantt(tmp_path, capsys):
    path = tmp_path / "fj.json"
    path.write_text(json.dumps(gen.fork_join(4, 2, 16).to_json()))
    chart = tmp_path / "fj.png"
    assert main(["schedule", str(path), "--pes", "4", "--gantt", str(chart)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "forkjoin_4_2: streaming schedule on 4 PEs (relaxed partitioning)"
    assert "makespan" in out and "blocks" in out
    assert chart.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.json", "--pes", "4"], "cannot read DAG file"),
        (["{bad}", "--pes", "0"], "positive integer"),
        (["{bad}", "--pes", "2", "--element-bytes", "0"], "--element-bytes must be positive"),
    ],
    ids=["missing-file", "zero-pes", "zero-element-bytes"],
)
def test_errors_are_one_line(tmp_path, capsys, args, message):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(gen.chain([2, 2]).to_json()))
    args = [str(good) if a == "{bad}" else str(tmp_path / a) if a.endswith(".json") else a for a in args]
    assert main(["schedule", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dcaccel schedule: error: ") and message in err
    assert err.count("\n") == 1


def test_invalid_dag_is_reported(tmp_path, capsys):
    dag = gen.chain([2, 2]).to_json()
    dag["edges"].append({"src": 1, "dst": 1, "volume": 2})
    path = tmp_path / "cyclic.json"
    path.write_text(json.dumps(dag))
    assert main(["schedule", str(path), "--pes", "2"]) == 2
    assert "has a cycle: 1 'T0' -> 1 'T0'" in capsys.readouterr().err
