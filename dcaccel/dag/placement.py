"""Placing a partitioned program's TaskDAG on unit kinds: every task on its operator's unit kind, a
transfer task on every edge that crosses between the host and an accelerator kind.

:func:`place` is the dag stage of partitioning (``dcaccel.partition``): the lowering decided which
operators run on the host, the architecture (:mod:`dcaccel.architecture.links`) gives the link unit of
each host↔accelerator pair; here the extracted DAG's records (:class:`~dcaccel.dag.task.TaskInfo`)
get ``unit`` on every task and the transfers become tasks (role transfer, ``op`` ``"Transfer"``,
``transfer`` the direction, ``elements`` the elements moved, :mod:`dcaccel.dag.arithmetic`), so that any
scheduler that honours ``unit`` (``heft``) costs them on the link.
Importing this module does not import DaCe.
"""

from __future__ import annotations

from collections.abc import Mapping

from dcaccel.architecture.links import TRANSFER
from dcaccel.dag.task import Role, TaskInfo
from dcaccel.dag.taskdag import NodeKind, TaskDAG


def place(
    dag: TaskDAG,
    target: Mapping[str, str],
    host: str | None,
    links: Mapping[tuple[str, str], str],
) -> TaskDAG:
    """A copy of ``dag`` with ``unit`` in the record of every task (its operator's unit kind in ``target``) and a
    transfer task on every edge between the host and an accelerator kind (``links``: (host, kind) -> link
    unit). A buffer sits on the side of the task that writes it first; pseudo nodes and program buffers
    (written by nothing) are on no side. A transfer moves what the producer wrote (from a buffer: at most
    what the buffer received) into a landing buffer the consumer reads as before; without re-reads it
    feeds the consumer directly. Every task keeps its arithmetic (an opaque task on the host the one of its
    ONNX op, :func:`dcaccel.dag.arithmetic.opaque_arithmetic`), which its unit costs."""
    side: dict[int, str] = {}
    for node in dag.nodes:
        if node.kind == NodeKind.TASK and node.info.node in target:
            side[node.id] = target[node.info.node]
    for src, dst, _ in dag.edges:  # edges come in the order the walk produced them: producers first
        if dag.node(dst).kind == NodeKind.BUFFER and src in side and dst not in side:
            side[dst] = side[src]
    received: dict[int, int] = {}
    for _, dst, volume in dag.edges:
        received[dst] = received.get(dst, 0) + int(volume)
    placed = TaskDAG(dag.name)
    for node in dag.nodes:
        info = node.info.derive(unit=side[node.id]) if node.id in side else node.info
        placed.add_node(node.kind, node.label, info)
    for src, dst, volume in dag.edges:
        a, b = side.get(src), side.get(dst)
        crossing = a is not None and b is not None and a != b and host in (a, b)
        if not crossing:
            placed.add_edge(src, dst, volume)
            continue
        kind = b if a == host else a
        direction = "to-accelerator" if a == host else "to-host"
        moved = min(int(volume), received[src]) if dag.node(src).kind == NodeKind.BUFFER else int(volume)
        transfer = placed.add_node(
            NodeKind.TASK,
            f"{TRANSFER}({dag.label(src)}->{dag.label(dst)})",
            TaskInfo(role=Role.TRANSFER, op=TRANSFER, transfer=direction, unit=links[host, kind], elements=moved),
        )
        placed.add_edge(src, transfer, moved)
        if moved == volume:
            placed.add_edge(transfer, dst, volume)
            continue
        landing = placed.add_node(
            NodeKind.BUFFER, f"{dag.label(src)}@{b}", TaskInfo(role=Role.BUFFER, transfer=direction, unit=b)
        )
        placed.add_edge(transfer, landing, moved)
        placed.add_edge(landing, dst, volume)
    placed.validate()
    return placed


def transfer_tasks(dag: TaskDAG) -> list[int]:
    """The transfer tasks of a placed DAG."""
    return [v for v in dag.tasks if dag.info(v).is_transfer]
