"""The canonical task DAG (tasks, buffer nodes, pseudo source and exit) and its metrics."""

from dcaccel.dag.metrics import depth, io_volume, streaming_depth, task_costs, upward_ranks, work
from dcaccel.dag.taskdag import Node, NodeKind, TaskDAG

__all__ = [
    "Node",
    "NodeKind",
    "TaskDAG",
    "depth",
    "io_volume",
    "streaming_depth",
    "task_costs",
    "upward_ranks",
    "work",
]
