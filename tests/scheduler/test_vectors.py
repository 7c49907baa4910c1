"""The schedulers against the reference vectors (``tests/data/vectors``): exact outputs of the HPDC'23
reference implementation (streamingsched ``asa-dse`` 85968db, networkx 2.5) for every vector ×
P ∈ {2, 4, 8, 16, 128} × {relaxed, strict}. Every number must match to the cycle."""

from __future__ import annotations

import pytest

from dcaccel.scheduler import schedule
from dcaccel.scheduler.graph import CanonicalGraph
from dcaccel.scheduler.streaming import streaming_schedule
from tests.scheduler.conftest import VECTOR_NAMES, VECTORS, load_detail, load_vector, vector_rows

ROWS = vector_rows()


def test_every_vector_is_read():
    """The data folder holds exactly the listed vectors, each with its detail file and its 10 rows."""
    assert sorted(path.stem for path in VECTORS.glob("*.json")) == sorted(VECTOR_NAMES)
    assert sorted(path.name for path in (VECTORS / "detail").glob("*.json")) == sorted(
        f"{name}.detail.json" for name in VECTOR_NAMES
    )
    assert len(ROWS) == 160
    for name in VECTOR_NAMES:
        rows = {(row["pes"], row["partitioning"]) for row in load_vector(name)[0]["results"]}
        assert rows == {(pes, part) for pes in (2, 4, 8, 16, 128) for part in ("relaxed", "strict")}, name
        assert set(load_detail(name)) == {f"{pes}_{part}" for pes, part in rows}, name


def _row(name: str, pes: int, partitioning: str) -> dict:
    data, _ = load_vector(name)
    return next(r for r in data["results"] if r["pes"] == pes and r["partitioning"] == partitioning)


@pytest.mark.parametrize(("name", "pes", "partitioning"), ROWS)
def test_streaming_schedule_matches_reference(name, pes, partitioning):
    _, dag = load_vector(name)
    expected = _row(name, pes, partitioning)
    result = schedule(dag, pes, "streaming", partitioning)
    assert result.detail.makespan_before_refinement == expected["streaming_makespan_before_refinement"]
    assert result.makespan == expected["streaming_makespan"]
    assert result.num_blocks == expected["num_blocks"]
    assert result.detail.refinement_iterations == expected["refinement_iterations"]
    assert result.detail.buffer_space_deadlock == expected["buffer_space_deadlock"]
    for capacity, (off, on, streamed) in expected["io_global"].items():
        io = result.io_at(int(capacity))
        assert (io.off_chip, io.on_chip, io.streamed) == (off, on, streamed), f"on-chip capacity {capacity}"
    assert result.io_volume == expected["io_buffer"]
    assert result.work == expected["work"]
    assert result.depth == expected["depth"]
    assert float(result.streaming_depth) == pytest.approx(expected["streaming_depth"], abs=1e-9)


@pytest.mark.parametrize(("name", "pes", "partitioning"), ROWS)
def test_list_schedule_matches_reference_eft(name, pes, partitioning):
    _, dag = load_vector(name)
    assert schedule(dag, pes, "list").makespan == _row(name, pes, partitioning)["eft_makespan"]


@pytest.mark.parametrize(("name", "pes", "partitioning"), ROWS)
def test_every_step_matches_reference_detail(name, pes, partitioning):
    """Blocks, stream flags, buffer space and both schedules, node by node (the detail files use the
    file's node ids; the DAG numbers nodes by their position in the file)."""
    data, dag = load_vector(name)
    detail = load_detail(name)[f"{pes}_{partitioning}"]
    position = {entry["id"]: i for i, entry in enumerate(data["nodes"])}
    file_id = {i: node_id for node_id, i in position.items()}
    g = CanonicalGraph.from_dag(dag)
    result = streaming_schedule(g, pes, strict=partitioning == "strict")

    assert [[file_id[v] for v in block] for block in result.blocks] == detail["blocks"]

    def flagged(flags):
        return sorted([file_id[g.src[e]], file_id[g.dst[e]]] for e in range(g.m) if flags[e])

    assert flagged(result.initial_streaming) == sorted(detail["initial_stream_edges"])
    assert flagged(result.streaming) == sorted(detail["final_stream_edges"])
    initial_caps = sorted([file_id[g.src[e]], file_id[g.dst[e]], c] for e, c in result.initial_capacities.items())
    assert initial_caps == sorted(detail["initial_caps"])
    final_caps = sorted(
        [file_id[g.src[e]], file_id[g.dst[e]], result.capacities.get(e, 1)] for e in range(g.m) if result.streaming[e]
    )
    assert final_caps == sorted(detail["final_caps"])

    timing = result.timing
    for node, pe, start, end, first in detail["schedule"]:
        v = position[node]
        assert (timing.pe[v], timing.start[v], timing.end[v], timing.first_output[v]) == (pe, start, end, first), node

    eft = schedule(dag, pes, "list").timing
    for node, pe, start, end in detail["eft_schedule"]:
        v = position[node]
        assert (eft.pe[v], eft.start[v], eft.end[v]) == (pe, start, end), node


@pytest.mark.parametrize(
    ("name", "mv_16", "mv_128", "io"),
    [
        ("seedconv_mv_noxycolbuf", 145_730, 35_138, 129_474),
        ("seedconv_op_noxcolbuf", 194_113, 107_713, 222_936),
        ("seedconv_lmv", 35_715, 35_715, 150_936),
    ],
    ids=["mv", "op", "lmv"],
)
def test_seed_table(name, mv_16, mv_128, io):
    """The seed slide's table: makespans at 16 and 128 PEs and the I/O volume of the three MMM shapes."""
    _, dag = load_vector(name)
    assert schedule(dag, 16).makespan == mv_16
    assert schedule(dag, 128).makespan == mv_128
    assert schedule(dag, 16).io_volume == io
