"""Sweeps: every (implementation assignment, P, scheduler, on-chip memory) point of a workload.

Each assignment is lowered and its task DAG extracted once; all its (P, scheduler, on-chip memory)
points are then scheduled on that DAG. Nothing is compiled.
"""

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
from dace.sdfg.nodes import LibraryNode
from tqdm.auto import tqdm

from dcaccel.dag.extract import extract
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.errors import DcaccelError
from dcaccel.explore.assignments import STRATEGIES, Assignment, per_node, per_op_type
from dcaccel.explore.cost import CostModel
from dcaccel.explore.points import ExplorationPoint, to_frame
from dcaccel.scheduler import SCHEDULERS, schedule
from dcaccel.transforms.lower import available_implementations, op_type

DEFAULT_PES = (1, 2, 4, 8, 16, 32, 64, 128)
DEFAULT_COST_MODEL = CostModel()


@dataclass(frozen=True)
class Grid:
    """The points scheduled on every assignment's DAG."""

    pes: tuple[int, ...]
    schedulers: tuple[str, ...]
    onchip_memory: tuple[int, ...]
    partitioning: str = "relaxed"

    def __len__(self) -> int:
        return len(self.pes) * len(self.schedulers)


@dataclass(frozen=True)
class LoweredDAG:
    """The task DAG of one assignment and what building it cost."""

    assignment: Assignment
    dag: TaskDAG
    lower_seconds: float
    extract_seconds: float


def build_dag(workload, assignment: Assignment, granularity, edge_volume: str) -> LoweredDAG:
    """Lower ``workload`` under ``assignment`` and extract its task DAG, timing both stages."""
    start = time.perf_counter()
    lowered = workload.lower(assignment.as_dict())
    lowered_at = time.perf_counter()
    dag = extract(lowered, granularity=granularity, edge_volume=edge_volume)
    return LoweredDAG(assignment, dag, lowered_at - start, time.perf_counter() - lowered_at)


def schedule_points(
    workload_name: str, built: LoweredDAG, grid: Grid, granularity: str, cost_model: CostModel
) -> Iterator[ExplorationPoint]:
    """Schedule ``built.dag`` on every (P, scheduler) of ``grid`` and yield one point per on-chip size."""
    dag = built.dag
    tasks = len(dag.tasks)
    buffers = len(dag.buffers)
    for pes in grid.pes:
        for scheduler in grid.schedulers:
            start = time.perf_counter()
            result = schedule(dag, pes, scheduler=scheduler, partitioning=grid.partitioning, validate=False)
            seconds = time.perf_counter() - start
            for memory in grid.onchip_memory:
                io = result.io_at(memory)
                yield ExplorationPoint(
                    workload=workload_name,
                    assignment=str(built.assignment),
                    granularity=granularity,
                    pes=pes,
                    scheduler=scheduler,
                    onchip_memory=memory,
                    makespan=result.makespan,
                    lower_bound=result.lower_bound,
                    speedup=result.speedup,
                    utilisation=result.utilisation,
                    work=result.work,
                    depth=result.depth,
                    tasks=tasks,
                    buffers=buffers,
                    io_volume=io.buffer,
                    offchip_io=io.off_chip,
                    onchip_io=io.on_chip,
                    streamed_io=io.streamed,
                    num_blocks=result.num_blocks,
                    area=cost_model.area(pes, memory),
                    power=cost_model.power(pes, result.makespan, io.off_chip, io.on_chip, io.streamed),
                    lower_seconds=built.lower_seconds,
                    extract_seconds=built.extract_seconds,
                    schedule_seconds=seconds,
                )


def _library_nodes(workload) -> list[LibraryNode]:
    return [node for node, _ in workload.sdfg.all_nodes_recursive() if isinstance(node, LibraryNode)]


def nodes_by_op_type(workload) -> dict[str, list[str]]:
    """Names of the workload's library nodes per op type, in program order."""
    found: dict[str, list[str]] = {}
    for node in _library_nodes(workload):
        found.setdefault(op_type(node), []).append(node.label)
    return found


def default_implementations(workload) -> dict[str, list[str]]:
    """Per op type of ``workload``, dcaccel's implementations, for the op types that have a choice."""
    choices: dict[str, list[str]] = {}
    for node in _library_nodes(workload):
        available = available_implementations(node)
        if len(available) > 1:
            choices.setdefault(op_type(node), available)
    return choices


def _as_tuple(value, name: str) -> tuple:
    values = (value,) if isinstance(value, (int, str)) else tuple(value)
    if not values:
        raise DcaccelError(f"explore: {name} is empty")
    return values


def explore(
    workload,
    implementations: Mapping[str, Sequence[str]] | None = None,
    pes: int | Iterable[int] = DEFAULT_PES,
    scheduler: str | Iterable[str] = ("streaming", "list"),
    onchip_memory: int | Iterable[int] = (0,),
    granularity: str | tuple = "task",
    strategy: str = "per-op-type",
    *,
    partitioning: str = "relaxed",
    edge_volume: str = "exact",
    max_assignments: int = 4096,
    objective: str = "makespan",
    cost_model: CostModel = DEFAULT_COST_MODEL,
    progress: bool | None = None,
) -> pd.DataFrame:
    """Explore ``workload`` (a Workload or a built-in name) and return one row per design point.

    :param implementations: op type → implementation names to try (default: every op type of the
        workload with more than one dcaccel implementation, with all of them).
    :param strategy: ``"per-op-type"`` (every node of an op type gets the same implementation),
        ``"per-node"`` (full product over nodes, at most ``max_assignments``) or ``"greedy"`` (one node
        at a time, keeping the implementation that minimises the mean ``objective`` over the grid).
    :param progress: show a progress bar (None: when the sweep runs longer than a second).
    :return: a DataFrame whose columns are the fields of :class:`ExplorationPoint`.
    """
    if isinstance(workload, str):
        from dcaccel.workloads import get

        workload = get(workload)
    if strategy not in STRATEGIES:
        raise DcaccelError(f"explore: unknown strategy '{strategy}' (expected one of {', '.join(STRATEGIES)})")
    schedulers = _as_tuple(scheduler, "scheduler")
    unknown = [name for name in schedulers if name not in SCHEDULERS]
    if unknown:
        raise DcaccelError(f"explore: unknown scheduler {unknown[0]!r} (expected {', '.join(SCHEDULERS)})")
    grid = Grid(_as_tuple(pes, "pes"), schedulers, _as_tuple(onchip_memory, "onchip_memory"), partitioning)
    if implementations is None:
        implementations = default_implementations(workload)
    implementations = {op: list(names) for op, names in implementations.items()}
    label = granularity if isinstance(granularity, str) else "=".join(map(str, granularity))
    cache: dict[Assignment, list[ExplorationPoint]] = {}

    def evaluate(assignment: Assignment) -> list[ExplorationPoint]:
        if assignment not in cache:
            built = build_dag(workload, assignment, granularity, edge_volume)
            cache[assignment] = list(schedule_points(workload.name, built, grid, label, cost_model))
            bar.update(1)
        return cache[assignment]

    if strategy == "per-op-type":
        assignments = list(per_op_type(implementations))
    elif strategy == "per-node":
        assignments = list(per_node(nodes_by_op_type(workload), implementations, max_assignments))
    else:
        assignments = []
    total = len(assignments) or None
    with tqdm(
        total=total,
        desc=f"explore {workload.name}",
        unit="assignment",
        disable=progress is False,
        delay=0 if progress else 1.0,
    ) as bar:
        if strategy == "greedy":
            _greedy(evaluate, nodes_by_op_type(workload), implementations, objective)
        else:
            for assignment in assignments:
                evaluate(assignment)
    return to_frame([point for points in cache.values() for point in points])


def _greedy(evaluate, nodes: Mapping[str, list[str]], implementations: Mapping[str, Sequence[str]], objective: str):
    """Choose per node, one at a time in program order, the implementation minimising the mean
    ``objective`` over the grid with the other nodes fixed (ties: the first listed)."""
    order = [(node, op) for op in implementations for node in nodes.get(op, ())]
    current = Assignment(tuple((node, implementations[op][0]) for node, op in order))
    for node, op in order:
        scores = []
        for implementation in implementations[op]:
            candidate = current.replace(node, implementation)
            points = evaluate(candidate)
            scores.append(sum(getattr(point, objective) for point in points) / len(points))
        current = current.replace(node, implementations[op][scores.index(min(scores))])
    return current
