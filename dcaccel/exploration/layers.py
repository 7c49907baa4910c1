"""Per-layer breakdown of a task DAG: tasks, work and buffer I/O of each node of the source program.

A task belongs to the node it lowers (``Node.info.node``, recorded by the lowering). A buffer
belongs to the layer of its first producer task, or of its first consumer task when no task writes
it (program inputs, weights). Each buffer-edge volume counted by :func:`dcaccel.dag.io_volume`
(once per buffer end) is charged to the layer of the task at the other end, or to the source
buffer's layer for a copy between two buffers, so the layers' I/O adds up to the DAG's.
"""

from dataclasses import asdict, dataclass

import pandas as pd

from dcaccel.dag.metrics import task_costs
from dcaccel.dag.taskdag import NodeKind, TaskDAG

UNATTRIBUTED = "(none)"


@dataclass
class LayerMetrics:
    """What one node of the source program contributes to the task DAG."""

    layer: str
    op_type: str
    implementation: str
    tasks: int = 0
    work: int = 0
    io_volume: int = 0


def _layer_of_tasks(dag: TaskDAG) -> list[str | None]:
    return [node.info.node if node.kind is NodeKind.TASK else None for node in dag.nodes]


def _buffer_layers(dag: TaskDAG, layer: list[str | None]) -> dict[int, str]:
    owners = {}
    for b in dag.buffers:
        producers = [u for u in dag.predecessors(b) if layer[u]]
        consumers = [v for v in dag.successors(b) if layer[v]]
        owners[b] = layer[(producers or consumers)[0]] if producers or consumers else UNATTRIBUTED
    return owners


def layer_breakdown(dag: TaskDAG) -> pd.DataFrame:
    """One row per layer (in the order its first task appears), the fields of :class:`LayerMetrics`."""
    layer = _layer_of_tasks(dag)
    owners = _buffer_layers(dag, layer)
    rows: dict[str, LayerMetrics] = {}

    def row(name: str | None) -> LayerMetrics:
        name = name or UNATTRIBUTED
        if name not in rows:
            first = next((n.info for n in dag.nodes if n.info.node == name), None)
            op, implementation = (first.op, first.implementation) if first is not None else (None, None)
            rows[name] = LayerMetrics(name, op or "", implementation or "")
        return rows[name]

    costs = task_costs(dag)
    for v in dag.tasks:
        entry = row(layer[v])
        entry.tasks += 1
        entry.work += int(costs[v])
    buffers = dag.buffers
    for u, v, volume in dag.edges:
        if dag.kind(u) is NodeKind.SOURCE:
            continue
        if u in buffers:
            row(layer[v] or owners[u]).io_volume += int(volume)
        if v in buffers:
            row(owners[u] if u in buffers else layer[u]).io_volume += int(volume)
    return pd.DataFrame([asdict(entry) for entry in rows.values()])
