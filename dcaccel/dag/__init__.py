"""The canonical task DAG (tasks, buffer nodes, pseudo source and exit), its extraction from a fully
lowered SDFG, and its metrics. Importing this package does not import DaCe."""

from dcaccel.dag.extract import extract
from dcaccel.dag.metrics import depth, io_volume, streaming_depth, task_costs, upward_ranks, work
from dcaccel.dag.symbolic import SymbolicMetrics, symbolic_metrics
from dcaccel.dag.task import Role, TaskInfo
from dcaccel.dag.taskdag import Node, NodeKind, TaskDAG

__all__ = [
    "Node",
    "NodeKind",
    "Role",
    "SymbolicMetrics",
    "TaskDAG",
    "TaskInfo",
    "depth",
    "extract",
    "io_volume",
    "streaming_depth",
    "symbolic_metrics",
    "task_costs",
    "upward_ranks",
    "work",
]
