"""Sweeps: every (implementation assignment, P, scheduler, architecture, on-chip memory) point of a workload.

Each assignment is lowered and its task DAG extracted once; all its (P, scheduler, architecture,
on-chip memory) points are then scheduled on that DAG, in the same process (see :mod:`dcaccel.exploration.executors`
for where that happens). A partition policy (``partition_policy``) adds, per assignment, the points of
its partitions (:func:`dcaccel.partition`, scheduled with HEFT). Nothing is compiled. Points stream into an
optional result file (:mod:`dcaccel.exploration.store`) as their assignments finish, and a resumed sweep skips
the stored ones.
"""

import math
import numbers
import os
import pickle
import queue
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace

import pandas as pd
from tqdm import tqdm

from dcaccel.architecture import DEFAULT as DEFAULT_ARCHITECTURE
from dcaccel.architecture import Architecture
from dcaccel.architecture import load as load_architecture
from dcaccel.architecture import variants as architecture_variants
from dcaccel.architecture.links import host_of
from dcaccel.dag.compose import Composer, composer_for
from dcaccel.dag.extract import EDGE_VOLUME_RULES, Granularity, extract
from dcaccel.dag.metrics import opaque_work
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.dag.walk import without_cycle_collection
from dcaccel.errors import DcaccelError
from dcaccel.exploration.assignments import STRATEGIES, Assignment, node_candidates, per_node, per_op_type
from dcaccel.exploration.cost import CostModel
from dcaccel.exploration.executors import Executor, Failure, Outcome, WorkloadSource, check_executor, make_executor
from dcaccel.exploration.mapping import MAPPING, mapping_points
from dcaccel.exploration.points import SWEEP_SCHEDULERS, ExplorationPoint, metrics, to_frame
from dcaccel.exploration.store import ResultStore
from dcaccel.frontend import ops
from dcaccel.frontend.ops import library_nodes
from dcaccel.partitioning import OBJECTIVES as PARTITION_OBJECTIVES
from dcaccel.partitioning import Partition, energy_split, partition
from dcaccel.scheduler import HETEROGENEOUS, PARTITIONINGS, CanonicalGraph, schedule
from dcaccel.scheduler.heft import schedule_units
from dcaccel.transforms.lower import (
    OpaqueOpWarning,
    available_implementations,
    lower,
    op_type,
    opaque_nodes,
    refuse_opaque,
)
from dcaccel.transforms.offload import POLICIES, check_work_share
from dcaccel.transforms.opaque import fallback_implementation

DEFAULT_PES = (1, 2, 4, 8, 16, 32, 64, 128)
DEFAULT_COST_MODEL = CostModel()
#: The ``partition_policy`` of a point of the plain pipeline (no operator kept on a host).
NO_PARTITION = "none"
#: The values of the ``partition_policy`` column.
PARTITION_POLICIES = (NO_PARTITION, *POLICIES)


@dataclass(frozen=True)
class Grid:
    """The points scheduled on every assignment's DAG."""

    pes: tuple[int, ...]
    schedulers: tuple[str, ...]
    onchip_memory: tuple[int, ...]
    partitioning: str = "relaxed"
    partition_policies: tuple[str, ...] = (NO_PARTITION,)
    min_nodes: int = 2  # of the min-region policy
    min_work_share: float = 0.05  # likewise
    partition_objective: str = "makespan"  # what the cost policy minimises

    def __len__(self) -> int:
        return len(self.pes) * len(self.schedulers)


@dataclass(frozen=True)
class LoweredDAG:
    """The task DAG of one assignment and what building it cost. ``label`` is the assignment the
    lowering actually applied (see :meth:`Assignment.lowered`), the ``assignment`` column of its points."""

    assignment: Assignment
    label: str
    dag: TaskDAG
    lower_seconds: float
    extract_seconds: float


@dataclass(frozen=True)
class Harvest:
    """The fragments the sweep's own process harvested for its workers (:func:`harvest`): its composer
    (shipped without the workload, :meth:`~dcaccel.dag.compose.Composer.__getstate__`), and the seconds its
    lowerings took, which the ``lower_seconds`` of ``assignment``'s DAG counts."""

    composer: Composer
    assignment: Assignment
    lower_seconds: float


#: (workload, message) pairs already reported: the assignments of a sweep share most of their warnings.
_REPORTED: set[tuple[str, str]] = set()


def _warn_once(workload_name: str, caught: list[warnings.WarningMessage]) -> None:
    """Re-issue the warnings of one DAG extraction that this process has not reported for the workload."""
    for warning in caught:
        key = (workload_name, str(warning.message))
        if key not in _REPORTED:
            _REPORTED.add(key)
            warnings.warn(f"{workload_name}: {warning.message}", warning.category, stacklevel=3)


def build_dag(
    workload,
    assignment: Assignment,
    granularity,
    edge_volume: str,
    strict: bool = False,
    compose: bool = False,
    covers: Sequence[Assignment] = (),
    harvested: Harvest | None = None,
) -> LoweredDAG:
    """Lower ``workload`` under ``assignment`` (``strict``: refusing ops without a canonical implementation)
    and extract its task DAG, timing both stages; the label is what the lowering gave the nodes the
    assignment's keys cover. The lowering's warning about opaque tasks is not repeated here:
    :func:`explore` reports the workload's opaque nodes once.

    With ``compose``, the DAG is composed from the fragments of earlier lowerings of the workload in this
    process (:mod:`dcaccel.dag.compose`; ``lower_seconds`` counts the lowerings done for fragments,
    composing counts as extraction). When a node's fragment is missing, the assignment is lowered whole
    (its fragments kept), then the ``covers`` (assignments that together give every node each
    implementation of the sweep), once per process and only while composition applies. The
    first composed DAG is checked against the whole-program extraction; where composition does not
    apply, every assignment is lowered whole and one warning says why. A worker process given the
    fragments its sweep ``harvested`` composes from them instead of lowering covers of its own.
    """
    built = _build_dag(workload, assignment, granularity, edge_volume, strict, compose, covers, harvested)
    if harvested is not None and assignment == harvested.assignment:
        return replace(built, lower_seconds=built.lower_seconds + harvested.lower_seconds)
    return built


def _build_dag(
    workload, assignment: Assignment, granularity, edge_volume: str, strict: bool, compose: bool, covers, harvested
) -> LoweredDAG:
    """:func:`build_dag` but for the harvest's lowering time."""
    composer = composer_for(workload, harvested.composer if harvested else None) if compose else None
    if composer is not None:
        start = time.perf_counter()
        choices = assignment.as_dict()
        granularity = Granularity.parse(granularity)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dag = composer.dag(choices, granularity, edge_volume, strict)
        if dag is None and composer.reason is None and composer.missing(choices):
            # this assignment lowered whole gives its own fragments (and tells whether composition
            # applies at all); then the covers give the fragments later assignments need
            built = _lowered_dag(workload, assignment, granularity, edge_volume, strict, composer)
            covered = time.perf_counter()
            for cover in covers:
                if composer.reason is not None:
                    break
                if str(cover) not in composer.lowerings:
                    _lower(workload, cover, strict, composer)
            _report_composition(workload.name, composer.reason)
            return replace(built, lower_seconds=built.lower_seconds + time.perf_counter() - covered)
        lowered_at = start
        _report_composition(workload.name, composer.reason)
        if dag is not None:
            label = str(assignment.lowered(composer.implementations(choices), nodes_by_op_type(workload)))
            if composer.verified or composer.composes_back(choices):
                _warn_once(workload.name, caught)
                return LoweredDAG(assignment, label, dag, lowered_at - start, time.perf_counter() - lowered_at)
            whole = _lowered_dag(workload, assignment, granularity, edge_volume, strict, None)
            composer.check(dag, whole.dag, str(assignment))
            _report_composition(workload.name, composer.reason)
            return replace(whole, lower_seconds=whole.lower_seconds + lowered_at - start)
    return _lowered_dag(workload, assignment, granularity, edge_volume, strict, composer)


def covering_assignments(implementations: Mapping[str, Sequence[str]]) -> tuple[Assignment, ...]:
    """Assignments that together give every key each of its implementations (the j-th gives every key
    its j-th one, wrapping around): lowering them yields every fragment a sweep composes from."""
    longest = max((len(names) for names in implementations.values()), default=0)
    return tuple(
        Assignment(tuple((key, names[j % len(names)]) for key, names in implementations.items() if names))
        for j in range(longest)
    )


def harvest(workload, sweep: "Sweep", batch: Sequence[Assignment]) -> Iterator[tuple[list[Assignment], Harvest | None]]:
    """The fragments worker processes need to compose the DAGs of ``batch`` without lowering, harvested
    in this process stage by stage: ``sweep``'s covers of ``workload`` are lowered one at a time, and
    after each the assignments of ``batch`` it gives (a lowering's fragments compose back to it) are
    yielded with the fragments so far, so that workers evaluate them while the next cover is lowered;
    then composition is checked on the first assignment left (composed, and compared with its
    whole-program extraction) and the rest is yielded. Each stage's :class:`Harvest` carries a copy of
    the composer and the seconds lowered for it. Should a lowering fail, the assignments left are
    yielded without a harvest: the workers lower them and report the failure as theirs."""
    composer = composer_for(workload)
    left = list(batch)
    start = time.perf_counter()

    def stage(ready: list[Assignment]) -> tuple[list[Assignment], Harvest]:
        nonlocal start
        shipped = pickle.loads(pickle.dumps(composer))  # what a worker receives, fixed now
        seconds, start = time.perf_counter() - start, time.perf_counter()
        return ready, Harvest(shipped, ready[0], seconds)

    try:
        for cover in sweep.covers:
            if composer.reason is not None:
                break
            if str(cover) not in composer.lowerings:
                _lower(workload, cover, sweep.strict, composer)
            ready = [assignment for assignment in left if composer.composes_back(assignment.as_dict())]
            if ready and composer.reason is None:
                left = [assignment for assignment in left if assignment not in ready]
                yield stage(ready)
        if left and composer.reason is None and not composer.verified:
            build_dag(workload, left[0], sweep.granularity, sweep.edge_volume, sweep.strict, compose=True)
    except Exception:  # the workers lower what is left and report the failure per assignment
        if left:
            yield left, None
        return
    _report_composition(workload.name, composer.reason)
    if left:
        yield stage(left)


def _together(stages: list[tuple[list[Assignment], Harvest | None]]) -> tuple[list[Assignment], Harvest | None]:
    """The stages of a harvest as one: every assignment, the last stage's fragments (none if a stage has
    none) and the seconds of all, counted by the first assignment."""
    assignments = [assignment for ready, _ in stages for assignment in ready]
    harvests = [harvested for _, harvested in stages]
    if not harvests or None in harvests:
        return assignments, None
    seconds = sum(harvested.lower_seconds for harvested in harvests)
    return assignments, Harvest(harvests[-1].composer, assignments[0], seconds)


def _ahead(items: Iterator) -> Iterator:
    """The items of ``items``, each computed in a background thread while the caller uses the previous."""
    found: queue.Queue = queue.Queue(maxsize=1)
    end = object()

    def produce() -> None:
        try:
            for item in items:
                found.put((item, None))
        except BaseException as err:  # re-raised in the caller's thread
            found.put((end, err))
            return
        found.put((end, None))

    threading.Thread(target=produce, name="harvest", daemon=True).start()
    while True:
        item, err = found.get()
        if err is not None:
            raise err
        if item is end:
            return
        yield item


def _lower(workload, assignment: Assignment, strict: bool, composer):
    """``lower(workload, assignment)``; its fragments go to ``composer`` (if any). Without cycle
    collection (see :meth:`Sweep.points`): the harvest lowers outside an assignment's evaluation."""
    with warnings.catch_warnings(), without_cycle_collection():
        warnings.simplefilter("ignore", OpaqueOpWarning)
        lowered = lower(workload, assignment.as_dict(), strict=strict)
        if composer is not None:
            composer.add(lowered, str(assignment))
    return lowered


def _lowered_dag(workload, assignment: Assignment, granularity, edge_volume: str, strict: bool, composer):
    """:func:`build_dag` by lowering the whole program; its fragments go to ``composer`` (if any)."""
    start = time.perf_counter()
    lowered = _lower(workload, assignment, strict, composer)
    if composer is not None:
        _report_composition(workload.name, composer.reason)
    lowered_at = time.perf_counter()
    label = str(assignment.lowered(lowered.implementations, nodes_by_op_type(workload)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dag = extract(lowered, granularity=granularity, edge_volume=edge_volume)
    _warn_once(workload.name, caught)
    return LoweredDAG(assignment, label, dag, lowered_at - start, time.perf_counter() - lowered_at)


def _report_composition(workload_name: str, reason: str | None) -> None:
    """Say once per workload and process why its DAGs are not composed from fragments."""
    if reason is not None and (workload_name, reason) not in _REPORTED:
        _REPORTED.add((workload_name, reason))
        warnings.warn(
            f"{workload_name}: DAGs not composed from fragments ({reason}); every assignment is lowered whole",
            UserWarning,
            stacklevel=4,
        )


def heft_units(arch: Architecture, pes: int) -> int:
    """The PEs of a HEFT schedule on ``arch`` for P = ``pes``: its units (an open count is ``pes``),
    the ``pes`` column of its points."""
    return schedule_units(arch, pes)


def runs(grid: Grid, archs: Sequence[Architecture]) -> Iterator[tuple[int, str, tuple[Architecture, ...]]]:
    """The schedules ``grid`` asks for on each DAG, in order, as (P, scheduler, the architectures it is
    costed on). A homogeneous schedule does not depend on the architecture: it is built once and costed
    on every one. HEFT places tasks on an architecture's units: one schedule per architecture and
    distinct number of units (an architecture whose unit counts are all fixed has one whatever P)."""
    seen: set[tuple[str, int]] = set()
    for pes in grid.pes:
        for scheduler in grid.schedulers:
            if scheduler != HETEROGENEOUS:
                yield pes, scheduler, tuple(archs)
                continue
            for arch in archs:
                key = (arch.label, heft_units(arch, pes))
                if key not in seen:
                    seen.add(key)
                    yield pes, scheduler, (arch,)


def partition_runs(grid: Grid, archs: Sequence[Architecture]) -> Iterator[tuple[str, Architecture, int]]:
    """The partitions ``grid`` asks for on each assignment, in order, as (policy, architecture, P): one per
    policy, architecture and distinct number of its units (a partition is scheduled with HEFT)."""
    for policy in grid.partition_policies:
        if policy == NO_PARTITION:
            continue
        for arch in archs:
            seen: set[int] = set()
            for pes in grid.pes:
                if heft_units(arch, pes) not in seen:
                    seen.add(heft_units(arch, pes))
                    yield policy, arch, pes


def point_keys(grid: Grid, archs: Sequence[Architecture]) -> list[tuple[int, str, str, int, str]]:
    """The (pes, scheduler, architecture, onchip_memory, partition_policy) columns of the points of one
    assignment, in the order :meth:`Sweep.points` yields them: the plain pipeline's (:func:`runs`), then
    the partitions' (:func:`partition_runs`)."""
    plain = [
        (heft_units(arch, pes) if scheduler == HETEROGENEOUS else pes, scheduler, arch.label, memory, NO_PARTITION)
        for pes, scheduler, costed in runs(grid, archs)
        for arch in costed
        for memory in grid.onchip_memory
    ]
    return [
        *(plain if NO_PARTITION in grid.partition_policies else []),
        *(
            (heft_units(arch, pes), HETEROGENEOUS, arch.label, memory, policy)
            for policy, arch, pes in partition_runs(grid, archs)
            for memory in grid.onchip_memory
        ),
    ]


def schedule_points(
    workload_name: str,
    built: LoweredDAG,
    grid: Grid,
    granularity: str,
    cost_model: CostModel,
    archs: Sequence[Architecture] = (),
    partitioned: Partition | None = None,
) -> Iterator[ExplorationPoint]:
    """Schedule ``built.dag`` as :func:`runs` says and yield one point per architecture and on-chip size,
    each costed on its architecture (none given: the default, ``abstract``). Under HEFT the ``pes``
    column is the number of units the schedule ran on. ``partitioned``: ``built.dag`` is that partition's
    placed DAG (``archs`` its costed architecture), whose policy, offloaded share and transfers the points
    carry."""
    archs = archs or (load_architecture(DEFAULT_ARCHITECTURE),)
    dag = built.dag
    graph = CanonicalGraph.from_dag(dag)  # validated and ranked once for every P
    tasks = len(dag.tasks)
    buffers = len(dag.buffers)
    opaque_tasks, opaque_share = opaque_work(dag)
    for pes, scheduler, costed in runs(grid, archs):
        shared = None if scheduler == HETEROGENEOUS else _timed_schedule(graph, pes, scheduler, grid.partitioning, None)
        for arch in costed:
            result, seconds = shared or _timed_schedule(graph, pes, scheduler, grid.partitioning, arch)
            for memory in grid.onchip_memory:
                io = result.io_at(memory)
                onchip = memory or arch.onchip_capacity_elements
                scheduled_on = result.costs is not None and onchip == result.onchip
                costs = result.costs if scheduled_on else result.cost_on(arch, onchip)
                energy = costs.energy_by_level
                if partitioned is None:
                    split = energy_split(costs.energy_pj, host_of(arch), {})
                else:
                    split = energy_split(costs.energy_pj, partitioned.host, partitioned.links)
                yield ExplorationPoint(
                    workload=workload_name,
                    assignment=built.label,
                    granularity=granularity,
                    pes=result.pes,
                    scheduler=scheduler,
                    onchip_memory=memory,
                    architecture=arch.label,
                    makespan=result.makespan,
                    lower_bound=result.lower_bound,
                    speedup=result.speedup,
                    utilisation=result.utilisation,
                    work=result.work,
                    depth=result.depth,
                    tasks=tasks,
                    buffers=buffers,
                    opaque_tasks=opaque_tasks,
                    opaque_work_share=opaque_share,
                    io_volume=io.buffer,
                    offchip_io=io.off_chip,
                    onchip_io=io.on_chip,
                    streamed_io=io.streamed,
                    num_blocks=result.num_blocks,
                    area=cost_model.area(result.pes, memory),
                    power=cost_model.power(result.pes, result.makespan, io.off_chip, io.on_chip, io.streamed),
                    makespan_cycles=costs.makespan_cycles,
                    makespan_us=costs.makespan_seconds * 1e6,
                    macs=costs.macs,
                    offchip_bytes=costs.offchip_bytes,
                    energy_pj=costs.energy_total_pj,
                    offchip_energy_pj=energy["offchip"],
                    onchip_energy_pj=energy["onchip"],
                    local_energy_pj=energy["local"],
                    link_energy_pj=energy["links"],
                    compute_energy_pj=energy["compute"],
                    area_mm2=costs.area_mm2,
                    power_w=costs.average_power_w,
                    unit_utilisation=",".join(f"{unit}={share:.6g}" for unit, share in costs.utilisation.items()),
                    partition_policy=NO_PARTITION if partitioned is None else partitioned.policy,
                    offloaded_work_share=1.0 if partitioned is None else partitioned.offloaded_work_share,
                    transfer_volume=0 if partitioned is None else partitioned.transfer_volume,
                    host_energy_pj=split["host"],
                    accelerator_energy_pj=split["accelerator"],
                    transfer_energy_pj=split["link"],
                    lower_seconds=built.lower_seconds,
                    extract_seconds=built.extract_seconds,
                    schedule_seconds=seconds,
                )


def _timed_schedule(
    dag: TaskDAG | CanonicalGraph, pes: int, scheduler: str, partitioning: str, arch: Architecture | None
):
    """The schedule of ``dag`` (on ``arch``'s units for HEFT, costed there at its on-chip capacity) and
    the seconds it took."""
    start = time.perf_counter()
    result = schedule(dag, pes, scheduler=scheduler, partitioning=partitioning, validate=False, arch=arch)
    return result, time.perf_counter() - start


@dataclass(frozen=True)
class Sweep:
    """What every assignment of one exploration is evaluated on: the grid, how the DAG is extracted,
    the cost model and the architectures every point is costed on (distinct labels); ``strict`` refuses ops
    without a canonical implementation (a failed assignment) instead of lowering them as opaque tasks.
    Picklable: executors ship it to their workers."""

    grid: Grid
    granularity: Granularity
    edge_volume: str
    cost_model: CostModel
    strict: bool = False
    archs: tuple[Architecture, ...] = field(default_factory=lambda: (load_architecture(DEFAULT_ARCHITECTURE),))
    compose: bool = True  # compose DAGs from fragments where that applies (build_dag)
    covers: tuple[Assignment, ...] = ()  # lowered first for their fragments (build_dag)
    harvested: Harvest | None = None  # the fragments of the sweep's process, for its workers (harvest)

    @property
    def label(self) -> str:
        """The granularity as the ``granularity`` column writes it (``task``, ``coarse``, ``tiles=T``)."""
        granularity = self.granularity
        return f"tiles={granularity.tiles}" if granularity.mode == "tiles" else granularity.mode

    def points(self, workload, assignment: Assignment) -> list[ExplorationPoint]:
        """Lower ``workload`` under ``assignment``, extract its DAG and schedule every point of the grid;
        then each partition of :func:`partition_runs` (``dcaccel.partition`` with the assignment as its
        choices; ``lower_seconds`` is the whole partition's time), scheduled with HEFT on its architecture
        plus the link units, at every on-chip size.

        Python's cycle collector is paused meanwhile (as in :func:`_lower`): the collections that
        lowering's allocations trigger rescan every live object of the sweep (the workload, cached
        expansions, fragments), about a third of the lowering time on ResNet-18. The cyclic garbage of
        one assignment is collected after it, so a sweep's peak memory is higher (ResNet-18 per op
        type: 1.5 GB instead of 1.15 GB)."""
        with without_cycle_collection():
            return self._points(workload, assignment)

    def _points(self, workload, assignment: Assignment) -> list[ExplorationPoint]:
        found = []
        if NO_PARTITION in self.grid.partition_policies:
            built = build_dag(
                workload,
                assignment,
                self.granularity,
                self.edge_volume,
                self.strict,
                self.compose,
                self.covers,
                self.harvested,
            )
            found += schedule_points(workload.name, built, self.grid, self.label, self.cost_model, self.archs)
        for policy, arch, pes in partition_runs(self.grid, self.archs):
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                split = partition(
                    workload,
                    arch,
                    policy,
                    choices=assignment.as_dict(),
                    pes=pes,
                    min_nodes=self.grid.min_nodes,
                    min_work_share=self.grid.min_work_share,
                    granularity=self.granularity,
                    edge_volume=self.edge_volume,
                    objective=self.grid.partition_objective,
                )
            _warn_once(workload.name, caught)
            label = str(assignment.lowered(_placed_implementations(split, assignment), nodes_by_op_type(workload)))
            built = LoweredDAG(assignment, label, split.dag, time.perf_counter() - start, 0.0)
            grid = replace(self.grid, pes=(pes,), schedulers=(HETEROGENEOUS,))
            found += schedule_points(workload.name, built, grid, self.label, self.cost_model, (split.costed,), split)
        return found

    def settings(self, workload) -> dict[str, object]:
        """What a result file must share to be resumed by this sweep on ``workload``: the options not in
        a point's key, the description behind each ``architecture`` label, and the workload's fingerprint
        (:func:`fingerprint`). A file resumed with other architectures gains their points; a label whose
        description changed is refused."""
        return {
            "edge_volume": self.edge_volume,
            "partitioning": self.grid.partitioning,
            "partition options": {
                "min_nodes": self.grid.min_nodes,
                "min_work_share": self.grid.min_work_share,
                "objective": self.grid.partition_objective,
            },
            "cost_model": asdict(self.cost_model),
            **{f"architecture {arch.label}": arch.to_dict() for arch in self.archs},
            **fingerprint(workload),
        }

    def complete(self, stored: Sequence[ExplorationPoint]) -> list[ExplorationPoint] | None:
        """The points of the grid among ``stored`` (one assignment's), in the order :func:`schedule_points`
        yields them; None when one is missing."""
        by_key = {
            (point.pes, point.scheduler, point.architecture, point.onchip_memory, point.partition_policy): point
            for point in stored
        }
        wanted = point_keys(self.grid, self.archs)
        if not all(key in by_key for key in wanted):
            return None
        return [by_key[key] for key in wanted]


def _placed_implementations(split: Partition, assignment: Assignment) -> dict[str, str]:
    """The implementation per node of ``split``'s lowering, a node kept on the host written ``NAME@HOST``
    with NAME the one ``assignment`` asked for (its host task is costed with that lowering's MACs, see
    :func:`dcaccel.partition`), so that two assignments never share a label."""
    choices = assignment.as_dict()
    implementations = dict(split.lowered.implementations)
    for node in split.nodes:
        asked = choices.get(node.name, choices.get(node.op))
        if not node.offloaded and asked is not None:
            implementations[node.name] = f"{asked}@{split.host}"
    return implementations


class SweepError(DcaccelError):
    """Assignments of a sweep failed; the others finished.

    ``results`` holds the finished points (as :func:`explore` would return them), ``failures`` one
    :class:`Failure` per failed assignment. With a result file, the finished points are stored and a
    resumed sweep retries only the failed assignments.
    """

    def __init__(self, message: str, results: pd.DataFrame, failures: list[Failure]):
        super().__init__(message)
        self.results = results
        self.failures = failures


def fingerprint(workload) -> dict[str, object]:
    """What the numbers of ``workload`` depend on besides its name: its program (the first 16 hex digits
    of the SHA-256 DaCe's ``hash_sdfg`` computes over the SDFG: operators, shapes, attributes) and the
    values of its symbolic sizes; one entry each, named after the workload."""
    return {
        f"program of {workload.name}": workload.sdfg.hash_sdfg()[:16],
        f"sizes of {workload.name}": dict(sorted(workload.symbols.items())),
    }


def nodes_by_op_type(workload) -> dict[str, list[str]]:
    """Names of the workload's library nodes per op type, in program order."""
    return ops.nodes_by_op_type(workload.sdfg)


def default_implementations(workload) -> dict[str, list[str]]:
    """Per op type of ``workload``, dcaccel's implementations, for the op types that have a choice."""
    choices: dict[str, list[str]] = {}
    for node, _ in library_nodes(workload.sdfg):
        available = available_implementations(node)
        if len(available) > 1:
            choices.setdefault(op_type(node), available)
    return choices


def check_implementations(workload, implementations: Mapping[str, Sequence[str]]) -> None:
    """Raise :class:`DcaccelError` for an implementation a node named by ``implementations`` (through its
    op type or its name) does not have, before anything is lowered."""
    for node, _ in library_nodes(workload.sdfg):
        op = op_type(node)
        names = [*implementations.get(op, ()), *implementations.get(node.label, ())]
        available = available_implementations(node)
        for name in names:
            if name not in available:
                raise DcaccelError(
                    f"{op} node '{node.label}': no implementation '{name}'; available: {', '.join(available) or 'none'}"
                )


def drop_unknown_keys(workload, implementations: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """``implementations`` without the keys that name no op type or node of ``workload`` (with one
    warning naming them), each key's implementations without repeats, in order."""
    known = set(ops.choice_keys(workload.sdfg))
    unknown = [key for key in implementations if key not in known]
    if unknown:
        warnings.warn(
            f"explore {workload.name}: no node or op type named {', '.join(map(repr, unknown))}; ignored",
            UserWarning,
            stacklevel=3,
        )
    return {key: list(dict.fromkeys(names)) for key, names in implementations.items() if key in known}


def report_opaque(workload, strict: bool) -> None:
    """Refuse (``strict``) or announce in one warning the nodes of ``workload`` that have no canonical
    implementation and are lowered as opaque tasks. A node that DaCe cannot expand either would fail every
    assignment: it is refused (:class:`UnsupportedOpError`, as ``lower`` and ``dcaccel dag`` refuse it)."""
    if strict:
        refuse_opaque(workload.sdfg)
    opaque = opaque_nodes(workload.sdfg)
    if not opaque:
        return
    for node, state in library_nodes(workload.sdfg):
        if node.label in opaque:
            fallback_implementation(node, state)
    warnings.warn(
        f"explore {workload.name}: {len(opaque)} node(s) with no canonical implementation lowered as opaque "
        "tasks: " + ", ".join(f"{node} ({op})" for node, op in opaque.items()),
        OpaqueOpWarning,
        stacklevel=3,
    )


def check_ops_run(workload, archs: Sequence[Architecture]) -> None:
    """Refuse an architecture with no unit kind that runs an op of ``workload`` (``ops`` holding it or
    ``"*"``): every task of that op, so every assignment, would fail to be costed or placed on it."""
    ops = dict.fromkeys(op_type(node) for node, _ in library_nodes(workload.sdfg))
    for arch in archs:
        for op in ops:
            arch.unit_for(op)


def _as_tuple(value, name: str, low: int | None = None) -> tuple:
    """``value`` (one or several) as a non-empty tuple; with ``low``, of integers at least ``low``."""
    values = (value,) if isinstance(value, (int, str)) else tuple(value)
    if not values:
        raise DcaccelError(f"explore: {name} is empty")
    if low is not None:
        bad = [v for v in values if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < low]
        if bad:
            raise DcaccelError(f"explore: {name} must be integers of at least {low}, got {bad[0]!r}")
        values = tuple(int(v) for v in values)
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
    executor: str = "local",
    address: str | None = None,
    workers: int | None = None,
    results=None,
    resume: bool = False,
    strict: bool = False,
    arch=DEFAULT_ARCHITECTURE,
    arch_params: Mapping[str, Sequence] | None = None,
    compose: bool = True,
    partition_policy: str | Iterable[str] | None = None,
    min_nodes: int = 2,
    min_work_share: float = 0.05,
    partition_objective: str = "makespan",
) -> pd.DataFrame:
    """Explore ``workload`` (a Workload or a built-in name) and return one row per design point.

    :param implementations: op type or node name → implementation names to try (default: every op
        type of the workload with more than one dcaccel implementation, with all of them). A node name
        wins over its op type. Keys that name no op type or node are ignored with one warning; the
        ``assignment`` column always says what the nodes were lowered with.
    :param strategy: ``"per-op-type"`` (the product over the keys: every node of an op type gets the
        same implementation unless named itself), ``"per-node"`` (full product over the nodes the keys
        cover, at most ``max_assignments``) or ``"greedy"`` (one node at a time, keeping the
        implementation that minimises the mean ``objective`` over the grid; the candidates of one node
        are evaluated in parallel), or ``"mapping"``: the mapping search (:func:`dcaccel.map` with
        ``objective`` ``makespan``, ``energy`` or ``edp`` and the PE counts ``pes``) for each architecture
        and on-chip size, one row per layer and one for the whole network
        (:mod:`dcaccel.exploration.mapping` says what each column holds; the implementations, schedulers
        and DAG options are the search's own).
    :param progress: show a progress bar over assignments (None: when the sweep runs longer than a second).
    :param executor: ``"local"`` (this process), ``"process"`` (a pool of ``workers`` processes on this
        machine) or ``"dask"`` (the ``dask.distributed`` scheduler at ``address``; a ``LocalCluster`` of
        ``workers`` single-threaded processes on loopback when ``address`` is None). A workload given by
        a built-in name is rebuilt by name on the workers; any other is shipped pickled.
    :param results: a result file (SQLite) that every finished assignment's points are written to.
    :param resume: continue ``results``: assignments whose points are all stored are not evaluated
        again (without ``resume``, a result file that holds points is refused; so is, with it, a file
        written for another program or sizes under the workload's name, or with other settings).
    :param strict: refuse a workload with an op that dcaccel has no canonical implementation of
        (:class:`UnsupportedOpError`, before anything is lowered). Without it such an op is lowered as an
        opaque task (one warning names every such node) and the ``opaque_tasks`` and
        ``opaque_work_share`` columns count them.
    :param scheduler: ``"streaming"``, ``"list"`` and/or ``"heft"`` (the heterogeneous list scheduler:
        each task on a unit of a kind that runs it, at that kind's speed; its ``pes`` column is the
        number of the architecture's units, P for an open count).
    :param arch: the accelerators every point is costed on, one or several (an
        :class:`~dcaccel.architecture.Architecture`, a shipped name or a YAML file; default
        ``"abstract"``): a dimension of the sweep, whose ``architecture`` column names the description,
        and the columns from ``makespan_cycles`` on (re-timed makespan, energy by level, area, power,
        utilisation per unit kind) depend on it. The other columns do not (but under ``"heft"``): the
        DAG of an assignment is built once and each (P, scheduler) scheduled once for all of them.
    :param arch_params: parameter path → values (``{"units.pe.count": [16, 64]}``, paths of
        :mod:`dcaccel.architecture.parameters`): every architecture of ``arch`` is swept over the
        product of the values, each variant labelled ``name[path=value,...]``.
    :param compose: compose each assignment's DAG from the fragments of the nodes lowered in earlier
        assignments (:mod:`dcaccel.dag.compose`: the same DAG, without lowering the whole program again);
        False lowers every assignment whole. A workload composition does not apply to is lowered whole
        with one warning saying why.
    :param partition_policy: None (the plain pipeline) or one or several of ``"none"`` (the plain
        pipeline's points), ``"greedy"``, ``"min-region"``, ``"cost"``: a dimension of the sweep. Each
        policy partitions every assignment between each architecture's host and its accelerator
        (:func:`dcaccel.partition`, the assignment as its choices, ``min_nodes`` and ``min_work_share``
        for ``min-region``, ``partition_objective`` — ``makespan``, ``energy`` or ``edp`` — for ``cost``)
        and schedules the placed DAG with HEFT (``scheduler`` must include
        ``"heft"``) for each number of the architecture's units P gives; the ``partition_policy``,
        ``offloaded_work_share``, ``transfer_volume`` and host/accelerator/transfer energy columns
        describe the split (``docs/partitioning.md``).
    :raises SweepError: after the whole sweep, when assignments failed; it carries the finished points
        (``results``) and the failures. Every executor returns the same rows in the same order (the
        order of the assignments, then P, scheduler, architecture, on-chip memory; the partition policies'
        points after the plain ones, by policy, architecture, P), timing columns aside.
    :return: a DataFrame whose columns are the fields of :class:`ExplorationPoint`.
    """
    if strategy == MAPPING:
        if results is not None or partition_policy is not None:
            raise DcaccelError("explore: the mapping strategy takes no results file and no partition policy")
        archs = architectures(arch, arch_params)
        return mapping_points(
            workload, archs, _as_tuple(onchip_memory, "onchip_memory", 0), objective, _as_tuple(pes, "pes", 1)
        )
    if strategy not in STRATEGIES:
        raise DcaccelError(
            f"explore: unknown strategy '{strategy}' (expected one of {', '.join([*STRATEGIES, MAPPING])})"
        )
    schedulers = _as_tuple(scheduler, "scheduler")
    unknown = [name for name in schedulers if name not in SWEEP_SCHEDULERS]
    if unknown:
        raise DcaccelError(f"explore: unknown scheduler {unknown[0]!r} (expected {', '.join(SWEEP_SCHEDULERS)})")
    if edge_volume not in EDGE_VOLUME_RULES:
        raise DcaccelError(f"explore: unknown edge volume {edge_volume!r} (expected {', '.join(EDGE_VOLUME_RULES)})")
    if partitioning not in PARTITIONINGS:
        raise DcaccelError(f"explore: unknown partitioning {partitioning!r} (expected {', '.join(PARTITIONINGS)})")
    if objective not in metrics():
        raise DcaccelError(f"explore: objective {objective!r} is not a numeric column of the results")
    check_executor(executor, address, workers)
    policies = _partition_policies(partition_policy, schedulers, min_nodes, min_work_share, partition_objective)
    grid = Grid(
        _as_tuple(pes, "pes", 1),
        schedulers,
        _as_tuple(onchip_memory, "onchip_memory", 0),
        partitioning,
        policies,
        min_nodes,
        min_work_share,
        partition_objective,
    )
    archs = architectures(arch, arch_params)
    check_units(grid, archs)
    sweep = Sweep(grid, Granularity.parse(granularity), edge_volume, cost_model, strict, archs, compose)
    builtin = isinstance(workload, str)
    if builtin:
        from dcaccel.workloads import get

        workload = get(workload)
    check_ops_run(workload, archs)
    report_opaque(workload, strict)
    nodes = nodes_by_op_type(workload)
    if implementations is None:
        implementations = default_implementations(workload)
    implementations = drop_unknown_keys(workload, implementations)
    check_implementations(workload, implementations)
    if compose:
        sweep = replace(sweep, covers=covering_assignments(implementations))

    if strategy == "per-op-type":
        assignments = list(per_op_type(implementations))
    elif strategy == "per-node":
        assignments = list(per_node(nodes, implementations, max_assignments))
    else:
        assignments = []
    assignments = list(dict.fromkeys(assignment.effective(nodes) for assignment in assignments))
    with ExitStack() as stack:
        store = None
        if results is not None:
            store = stack.enter_context(ResultStore(results, sweep.settings(workload), resume))
        bar = stack.enter_context(
            tqdm(
                total=len(assignments) or None,
                desc=f"explore {workload.name}",
                unit="assignment",
                disable=progress is False,
                delay=0 if progress else 1.0,
            )
        )

        def start() -> Executor:
            return stack.enter_context(
                make_executor(executor, workload, WorkloadSource.of(workload, builtin), sweep, address, workers)
            )

        run = _Run(sweep, workload, store, bar, start, store.points(workload.name, sweep.label) if store else {})
        if strategy == "greedy":
            _greedy(run.evaluate, nodes, implementations, objective)
        else:
            run.evaluate(assignments)
    frame = to_frame([point for assignment in run.order if assignment in run.found for point in run.found[assignment]])
    if run.failures:
        first = next(iter(run.failures.values()))
        raise SweepError(
            f"explore {workload.name}: {len(run.failures)} of {len(run.order)} assignments failed "
            f"(first: {first.assignment}: {first.error})",
            frame,
            list(run.failures.values()),
        )
    return frame


def _partition_policies(
    policy: str | Iterable[str] | None,
    schedulers: Sequence[str],
    min_nodes: int,
    min_work_share: float,
    objective: str,
) -> tuple[str, ...]:
    """The ``partition_policy`` values of a sweep (None: the plain pipeline), checked."""
    policies = (NO_PARTITION,) if policy is None else _as_tuple(policy, "partition_policy")
    for name in policies:
        if name not in PARTITION_POLICIES:
            raise DcaccelError(f"explore: unknown partition policy {name!r} (expected {', '.join(PARTITION_POLICIES)})")
    if any(name != NO_PARTITION for name in policies) and HETEROGENEOUS not in schedulers:
        raise DcaccelError(
            f"explore: a partition policy places tasks on the host and accelerator units, which only the "
            f"{HETEROGENEOUS} scheduler honours: add it to the schedulers"
        )
    unused = [name for name in schedulers if name != HETEROGENEOUS]
    if unused and NO_PARTITION not in policies:
        raise DcaccelError(
            f"explore: scheduler {unused[0]} gives no points under partition policy {policies[0]} (a partition is "
            f"scheduled with {HETEROGENEOUS}): add partition policy {NO_PARTITION} for the plain pipeline's points"
        )
    if isinstance(min_nodes, bool) or not isinstance(min_nodes, numbers.Integral) or min_nodes < 0:
        raise DcaccelError(f"explore: min_nodes must be an integer of at least 0, got {min_nodes!r}")
    check_work_share(min_work_share)
    if objective not in PARTITION_OBJECTIVES:
        raise DcaccelError(
            f"explore: unknown partition objective {objective!r} (expected {', '.join(PARTITION_OBJECTIVES)})"
        )
    return tuple(dict.fromkeys(policies))


def architectures(arch, parameters: Mapping[str, Sequence] | None = None) -> tuple[Architecture, ...]:
    """``arch`` (one or several names, files or :class:`Architecture` objects) loaded, each swept over
    the product of ``parameters``; the labels must be distinct (a repeated identical description counts once)."""
    given = (arch,) if isinstance(arch, (str, os.PathLike, Architecture)) else tuple(arch)
    if not given:
        raise DcaccelError("explore: arch is empty")
    found: dict[str, Architecture] = {}
    for loaded in map(load_architecture, given):
        for variant in architecture_variants(loaded, parameters or {}):
            known = found.setdefault(variant.label, variant)
            if known is not variant and known.to_dict() != variant.to_dict():
                raise DcaccelError(f"explore: two different architectures are labelled '{variant.label}'")
    return tuple(found.values())


def check_units(grid: Grid, archs: Sequence[Architecture]) -> None:
    """Refuse a P of a homogeneous scheduler above the units an architecture has besides its host (each PE
    runs on a unit of the accelerator)."""
    if all(scheduler == HETEROGENEOUS for scheduler in grid.schedulers):
        return
    for arch in archs:
        for pes in grid.pes:
            units = arch.accelerator_units(pes)
            if pes > units:
                besides = " besides its host" if host_of(arch) else ""
                raise DcaccelError(
                    f"explore: architecture {arch.label} has {units} units{besides}, fewer than P = {pes}"
                )


class _Run:
    """The state of one sweep: the points found (stored or evaluated), the failures, and the executor,
    started at the first assignment that is not stored. Composing for worker processes, this process
    harvests the fragments (:func:`harvest`) while they start, and ships them with every assignment."""

    def __init__(self, sweep: Sweep, workload, store: ResultStore | None, bar, start: Callable[[], Executor], stored):
        self.sweep = sweep  # with the harvested fragments once the workers are started (harvest)
        self.workload = workload
        self.store = store
        self.bar = bar
        self.start = start
        self.stored: dict[str, list[ExplorationPoint]] = stored
        self.executor: Executor | None = None
        self.order: list[Assignment] = []
        self.found: dict[Assignment, list[ExplorationPoint]] = {}
        self.failures: dict[Assignment, Failure] = {}

    def evaluate(self, batch: Sequence[Assignment]) -> list[list[ExplorationPoint] | None]:
        """The points of every assignment of ``batch`` (None for a failed one), evaluating in parallel
        those neither evaluated in this sweep nor stored."""
        todo = []
        for assignment in dict.fromkeys(batch):
            if assignment in self.found or assignment in self.failures:
                continue
            self.order.append(assignment)
            points = self.sweep.complete(self.stored.get(str(assignment), ()))
            if points is None:
                todo.append(assignment)
            else:
                self.found[assignment] = points
                self.bar.update(1)
        if todo:
            stages = [(todo, self.sweep.harvested)]
            if self.executor is None:
                self.executor = self.start()
                if self.sweep.compose and self.executor.name != "local":
                    # the workers start, then evaluate each stage while this process harvests the next;
                    # on Dask (its client's event loop runs in this process) the harvest comes first
                    self.executor.warm()
                    stages = harvest(self.workload, self.sweep, todo)
                    stages = _ahead(stages) if self.executor.name == "process" else [_together(list(stages))]
            for assignments, harvested in stages:
                self.sweep = replace(self.sweep, harvested=harvested)
                for outcome in self.executor.map(assignments, self.sweep):
                    self._record(outcome)
        return [self.found.get(assignment) for assignment in batch]

    def _record(self, outcome: Outcome) -> None:
        if outcome.failure is None:
            self.found[outcome.assignment] = list(outcome.points)
            if self.store is not None:
                self.store.add(outcome.points)
        else:
            self.failures[outcome.assignment] = outcome.failure
            if self.store is not None:
                self.store.add_failure(outcome.failure)
            self.bar.set_postfix(failed=len(self.failures))
        self.bar.update(1)


def _greedy(evaluate, nodes: Mapping[str, list[str]], implementations: Mapping[str, Sequence[str]], objective: str):
    """Choose per node, one at a time in the order of :func:`node_candidates`, the implementation
    minimising the mean ``objective`` over the grid with the other nodes fixed (ties: the first listed;
    a failed candidate scores infinity). ``evaluate`` takes the candidates of one node at once, so they
    run in parallel."""
    order = node_candidates(nodes, implementations)
    current = Assignment(tuple((node, names[0]) for node, names in order))
    for node, names in order:
        candidates = [current.replace(node, implementation) for implementation in names]
        scores = [
            sum(getattr(point, objective) for point in points) / len(points) if points else math.inf
            for points in evaluate(candidates)
        ]
        current = current.replace(node, names[scores.index(min(scores))])
    return current
