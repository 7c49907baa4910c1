"""Shared inputs of the scheduler tests: the reference vectors and a hypothesis strategy for random
canonical DAGs."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from hypothesis import strategies as st

from dcaccel.dag import NodeKind, TaskDAG

#: The reference vectors: exact outputs of the HPDC'23 reference implementation (provenance and format in
#: ``tests/data/vectors/README.md``).
VECTORS = Path(__file__).resolve().parents[1] / "data" / "vectors"

#: The vectors the data folder holds; a missing one fails the tests instead of shrinking their parameters.
VECTOR_NAMES = (
    "chain_elw_6",
    "chain_rand_10",
    "chain_rand_12_buf",
    "chol_rand_6",
    "fft_elw_4",
    "fft_rand_8",
    "fft_rand_8_buf",
    "forkjoin_4_6",
    "gauss_elw_4",
    "gauss_rand_8",
    "mmm_2_3_2",
    "seedconv_lmv",
    "seedconv_mv",
    "seedconv_mv_noxycolbuf",
    "seedconv_op",
    "seedconv_op_noxcolbuf",
)


def _data_file(path: Path) -> Path:
    """``path`` itself; a missing reference file is an error, never a reason to skip."""
    if not path.is_file():
        raise FileNotFoundError(f"reference vector file missing: {path}")
    return path


def vector_files() -> list[Path]:
    """The JSON file of every vector of ``VECTOR_NAMES`` (FileNotFoundError when one is missing)."""
    return [_data_file(VECTORS / f"{name}.json") for name in VECTOR_NAMES]


@functools.cache
def load_vector(name: str) -> tuple[dict, TaskDAG]:
    """The raw JSON of vector ``name`` and its DAG (parsed once per session)."""
    path = _data_file(VECTORS / f"{name}.json")
    return json.loads(path.read_text()), TaskDAG.from_json(path)


@functools.cache
def load_detail(name: str) -> dict:
    """The step-by-step detail of vector ``name``: per ``"<P>_<partitioning>"``, blocks, flags and schedules."""
    return json.loads(_data_file(VECTORS / "detail" / f"{name}.detail.json").read_text())


def vector_rows() -> list:
    """One pytest param per (vector, P, partitioning), with ids like ``fft_rand_8-P16-strict``."""
    params = []
    for path in vector_files():
        for row in json.loads(path.read_text())["results"]:
            params.append(
                pytest.param(
                    path.stem, row["pes"], row["partitioning"], id=f"{path.stem}-P{row['pes']}-{row['partitioning']}"
                )
            )
    return params


@st.composite
def canonical_dags(draw, max_tasks: int = 12) -> TaskDAG:
    """A random DAG that satisfies the canonical contract.

    Tasks get random input and output volumes; an edge whose producer writes another volume than
    its consumer reads goes through a buffer node (buffers may send other volumes than they
    receive), as does a random share of the others. The exit is a pseudo sink, a task or a buffer.
    """
    tasks = draw(st.integers(1, max_tasks))
    volume = st.sampled_from([1, 2, 3, 4, 8, 12, 16])
    reads = [draw(volume) for _ in range(tasks)]
    writes = [draw(volume) for _ in range(tasks)]
    density = draw(st.sampled_from([0.0, 0.2, 0.5, 0.9]))
    edges = [(u, v) for v in range(tasks) for u in range(v) if draw(st.floats(0, 1)) < density]
    buffered = {edge for edge in edges if draw(st.booleans()) and draw(st.booleans())}
    exit_kind = draw(st.sampled_from(["sink", "task", "buffer"]))

    dag = TaskDAG("hypothesis")
    source = dag.add_node(NodeKind.SOURCE, "source")
    ids = [dag.add_node(NodeKind.TASK, f"T{i}") for i in range(tasks)]
    has_pred = [False] * tasks
    has_succ = [False] * tasks
    for u, v in edges:
        has_pred[v] = has_succ[u] = True
        if writes[u] == reads[v] and (u, v) not in buffered:
            dag.add_edge(ids[u], ids[v], reads[v])
        else:
            buffer = dag.add_node(NodeKind.BUFFER, f"B{u}_{v}")
            dag.add_edge(ids[u], buffer, writes[u])
            dag.add_edge(buffer, ids[v], reads[v])
    for i in range(tasks):
        if not has_pred[i]:
            dag.add_edge(source, ids[i], reads[i])
    last = [i for i in range(tasks) if not has_succ[i]]
    if exit_kind == "sink":
        exit_node = dag.add_node(NodeKind.SINK, "sink")
        for i in last:
            dag.add_edge(ids[i], exit_node, writes[i])
    elif exit_kind == "buffer":
        exit_node = dag.add_node(NodeKind.BUFFER, "out")
        for i in last:  # a buffer receives one volume on all in-edges: adapt the others through a task
            if writes[i] == writes[last[0]]:
                dag.add_edge(ids[i], exit_node, writes[i])
            else:
                _via_task(dag, ids[i], exit_node, writes[i], writes[last[0]])
    else:
        exit_node = dag.add_node(NodeKind.TASK, "exit")
        for i in last:
            if writes[i] == reads[0]:
                dag.add_edge(ids[i], exit_node, reads[0])
            else:
                buffer = dag.add_node(NodeKind.BUFFER, f"B{i}_exit")
                dag.add_edge(ids[i], buffer, writes[i])
                dag.add_edge(buffer, exit_node, reads[0])
    dag.validate()
    return dag


def _via_task(dag: TaskDAG, producer: int, target: int, written: int, expected: int) -> None:
    """producer -> buffer -> adapter task -> target, so that ``target`` receives ``expected``."""
    buffer = dag.add_node(NodeKind.BUFFER, f"B{producer}_adapt")
    adapter = dag.add_node(NodeKind.TASK, f"A{producer}")
    dag.add_edge(producer, buffer, written)
    dag.add_edge(buffer, adapter, expected)
    dag.add_edge(adapter, target, expected)
