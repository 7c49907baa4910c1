"""dcaccel.dag.placement.place on hand-built DAGs (no DaCe): units on tasks and buffers, a transfer task
on an edge crossing between host and accelerator, a landing buffer when the consumer re-reads; a
transfer's elements are not MACs, and every task keeps its own arithmetic."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from dcaccel.architecture.links import TRANSFER
from dcaccel.dag.arithmetic import task_arithmetic
from dcaccel.dag.placement import place, transfer_tasks
from dcaccel.dag.task import Role, TaskInfo
from dcaccel.dag.taskdag import NodeKind, TaskDAG

LINKS = {("cpu", "npu"): "cpu_npu_link"}


def _chain(read: int) -> TaskDAG:
    """source → X (program input) → a → B → b → Y: a writes 10 elements into B, b reads ``read`` of them
    (more than 10: re-reads) and writes 5 into Y."""
    dag = TaskDAG("chain")
    source = dag.add_node(NodeKind.SOURCE, "source")
    x = dag.add_node(NodeKind.BUFFER, "X")
    a = dag.add_node(NodeKind.TASK, "a", TaskInfo(role=Role.OPAQUE, node="a", macs=40, ops=10))
    b_buffer = dag.add_node(NodeKind.BUFFER, "B")
    b = dag.add_node(NodeKind.TASK, "b", TaskInfo(node="b"))
    y = dag.add_node(NodeKind.BUFFER, "Y")
    for src, dst, volume in [(source, x, 10), (x, a, 10), (a, b_buffer, 10), (b_buffer, b, read), (b, y, 5)]:
        dag.add_edge(src, dst, volume)
    return dag


def _by_label(dag: TaskDAG) -> dict[str, int]:
    return {dag.label(v): v for v in range(dag.num_nodes)}


@pytest.mark.parametrize(("read", "landing"), [(10, False), (30, True)])
def test_transfer_on_the_crossing_edge(read, landing):
    placed = place(_chain(read), {"a": "cpu", "b": "npu"}, "cpu", LINKS)
    nodes = _by_label(placed)
    units = {label: placed.node(v).info.unit for label, v in nodes.items()}
    assert {label: units[label] for label in ("source", "X", "a", "B", "b", "Y")} == {
        "source": None,
        "X": None,  # a program input: written by nothing, on no side
        "a": "cpu",
        "B": "cpu",  # the side of its first writer
        "b": "npu",
        "Y": "npu",
    }
    (transfer,) = transfer_tasks(placed)
    info = placed.info(transfer)
    assert (info.role, info.op, info.transfer, info.unit, info.elements) == (
        Role.TRANSFER,
        TRANSFER,
        "to-accelerator",
        "cpu_npu_link",
        10,
    )
    assert info.macs is None and task_arithmetic(info, 10) == (0, 10)  # moved, not computed
    edges = {(placed.label(src), placed.label(dst)): volume for src, dst, volume in placed.edges}
    label = placed.label(transfer)
    assert edges[("B", label)] == 10  # the link carries what B received, once
    if landing:
        assert (edges[(label, "B@npu")], edges[("B@npu", "b")]) == (10, read)
        assert placed.node(nodes["B@npu"]).info.unit == "npu"
    else:
        assert edges[(label, "b")] == read and "B@npu" not in nodes
    assert ("B", "b") not in edges


@pytest.mark.parametrize("target", [{"a": "cpu", "b": "cpu"}, {"a": "npu", "b": "npu"}])
def test_same_side_moves_nothing_and_tasks_keep_their_arithmetic(target):
    dag = _chain(30)
    placed = place(dag, target, "cpu", LINKS)
    assert transfer_tasks(placed) == [] and list(placed.edges) == list(dag.edges)
    assert placed.node(_by_label(placed)["a"]).info == replace(dag.node(_by_label(dag)["a"]).info, unit=target["a"])


def test_placement_does_not_import_dace():
    code = "import sys, dcaccel.dag.placement; sys.exit('dace' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
