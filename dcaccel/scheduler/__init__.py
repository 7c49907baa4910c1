"""Schedulers for canonical task DAGs on P processing elements.

``schedule(dag, pes, scheduler="streaming")`` runs the streaming scheduler of the HPDC'23 paper
(spatial block partitioning, streaming intervals, gang scheduling, buffer sizing, refinement);
``scheduler="list"`` runs the non-streaming list scheduler (the reference's EFT baseline with
the default options). The model and every deviation from the reference implementation are in
``docs/scheduler.md``. Plotting lives in :mod:`dcaccel.scheduler.gantt` (not imported here).
"""

from __future__ import annotations

from dcaccel.architecture import Architecture
from dcaccel.architecture import load as load_architecture
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.dag.walk import without_cycle_collection
from dcaccel.errors import DcaccelError
from dcaccel.scheduler.graph import CanonicalGraph
from dcaccel.scheduler.heft import heft_schedule, schedule_units
from dcaccel.scheduler.io import IOVolume
from dcaccel.scheduler.list import list_schedule
from dcaccel.scheduler.schedule import HeftDetail, ListDetail, Schedule, ScheduleError, StreamingDetail, TaskEvent
from dcaccel.scheduler.streaming import streaming_schedule

__all__ = [
    "CanonicalGraph",
    "HeftDetail",
    "IOVolume",
    "ListDetail",
    "Schedule",
    "ScheduleError",
    "StreamingDetail",
    "TaskEvent",
    "schedule",
]

SCHEDULERS = ("streaming", "list")
PARTITIONINGS = ("relaxed", "strict")
#: The heterogeneous list scheduler (:mod:`dcaccel.scheduler.heft`): needs ``arch``; not in SCHEDULERS,
#: which the sweeps and the command line offer.
HETEROGENEOUS = "heft"

#: Options each scheduler accepts, with their defaults (``onchip`` and ``validate`` apply to all).
OPTIONS = {
    "streaming": {"refine": True, "reference": True},
    "list": {"insertion": True, "bandwidth": None},
    HETEROGENEOUS: {},
}


def schedule(
    dag: TaskDAG | CanonicalGraph,
    pes: int,
    scheduler: str = "streaming",
    partitioning: str = "relaxed",
    *,
    onchip: int = 0,
    validate: bool = True,
    arch: Architecture | str | None = None,
    **options,
) -> Schedule:
    """Schedule ``dag`` on ``pes`` PEs and return the :class:`Schedule`: its placement and timing (``dag``
    is not modified). What it costs on an accelerator is :func:`dcaccel.cost.schedule.cost_schedule`'s.

    ``scheduler="heft"`` is the heterogeneous list scheduler of :mod:`dcaccel.scheduler.heft`: it places
    the tasks on the units of ``arch`` (an :class:`~dcaccel.architecture.Architecture`, a shipped name
    such as ``"eyeriss"``, or a YAML file; an open count is ``pes``), the one scheduler that reads an
    architecture. ``partitioning`` ("relaxed" or "strict") applies to the streaming scheduler. ``onchip``
    is the on-chip memory per block, in elements, for the I/O split. Streaming options: ``refine`` (the
    refinement loop, default True), ``reference`` (reproduce the reference's defects B1, B5, B6, default
    True). List options: ``insertion`` (fill idle gaps, default True), ``bandwidth`` (elements per cycle
    between PEs; None: free communication). With ``validate`` (default) the schedule is checked by
    :meth:`Schedule.validate` before it is returned.

    Time and memory do not grow with ``pes``: a streaming block holds at most as many PEs as the DAG
    has tasks, and the list scheduler runs on min(``pes``, number of nodes) PEs, which gives the
    same schedule. The result reports the ``pes`` asked for, and its lower bound and utilisation
    are those of ``pes`` PEs.

    ``dag`` may also be its :class:`CanonicalGraph` (``CanonicalGraph.from_dag(dag)``): scheduling
    many points on one DAG then validates it and computes what does not depend on P once.
    """
    if scheduler not in OPTIONS:
        raise DcaccelError(f"unknown scheduler '{scheduler}' (expected one of {', '.join(OPTIONS)})")
    if scheduler == HETEROGENEOUS and arch is None:
        raise DcaccelError(f"the {HETEROGENEOUS} scheduler places tasks on an architecture's units: give arch")
    if scheduler != HETEROGENEOUS and arch is not None:
        raise DcaccelError(
            f"the {scheduler} scheduler does not read an architecture (arch is the {HETEROGENEOUS} scheduler's): "
            "cost its schedule with dcaccel.cost.schedule.cost_schedule"
        )
    if partitioning not in PARTITIONINGS:
        raise DcaccelError(f"unknown partitioning '{partitioning}' (expected one of {', '.join(PARTITIONINGS)})")
    if isinstance(pes, bool) or not isinstance(pes, int) or pes < 1:
        raise DcaccelError(f"the number of PEs must be a positive integer, got {pes!r}")
    if isinstance(onchip, bool) or not isinstance(onchip, int) or onchip < 0:
        raise DcaccelError(f"the on-chip capacity must be a non-negative integer (elements), got {onchip!r}")
    unknown = sorted(set(options) - set(OPTIONS[scheduler]))
    if unknown:
        known = ", ".join(OPTIONS[scheduler])
        raise DcaccelError(f"unknown option(s) {', '.join(unknown)} for the {scheduler} scheduler (known: {known})")
    settings = {**OPTIONS[scheduler], **options}
    architecture = None if arch is None else load_architecture(arch)
    with without_cycle_collection():
        built = _run(dag, pes, scheduler, partitioning, onchip, settings, architecture)
        if validate:
            built.validate()
    return built


def _run(
    dag: TaskDAG | CanonicalGraph,
    pes: int,
    scheduler: str,
    partitioning: str,
    onchip: int,
    settings: dict,
    arch: Architecture | None,
) -> Schedule:
    graph = dag if isinstance(dag, CanonicalGraph) else CanonicalGraph.from_dag(dag)
    if scheduler == HETEROGENEOUS:
        timing, layout, order = heft_schedule(graph, arch, pes)
        return Schedule(graph, schedule_units(arch, pes), scheduler, timing, order, HeftDetail(layout), onchip=onchip)
    if scheduler == "streaming":
        result = streaming_schedule(
            graph, pes, strict=partitioning == "strict", refine=settings["refine"], reference=settings["reference"]
        )
        detail = StreamingDetail(
            partitioning, result.capacities, result.makespan_before_refinement, result.refinement_iterations
        )
        return Schedule(
            graph,
            pes,
            scheduler,
            result.timing,
            [v for order in result.orders for v in order],
            detail,
            streaming=bytes(result.streaming),
            blocks=result.blocks,
            onchip=onchip,
        )
    bandwidth = settings["bandwidth"]
    if bandwidth is not None and not bandwidth > 0:
        raise DcaccelError(f"bandwidth must be positive (elements per cycle), got {bandwidth!r}")
    # Every choice of the list scheduler takes the lowest fitting PE and an unused PE always fits,
    # so it never uses more PEs than there are nodes: P beyond that changes nothing but the cost.
    usable = min(pes, graph.n)
    timing, order = list_schedule(graph, usable, insertion=settings["insertion"], bandwidth=bandwidth)
    return Schedule(graph, pes, scheduler, timing, order, ListDetail(settings["insertion"], bandwidth), onchip=onchip)
