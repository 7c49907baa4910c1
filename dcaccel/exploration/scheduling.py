"""The schedule and cost stages: a DAG scheduled at every (P, scheduler) of the grid and costed on every
architecture and on-chip size, one :class:`~dcaccel.exploration.points.ExplorationPoint` each.
"""

import time
from collections.abc import Iterator, Sequence

from dcaccel.architecture import DEFAULT as DEFAULT_ARCHITECTURE
from dcaccel.architecture import Architecture
from dcaccel.architecture import load as load_architecture
from dcaccel.cost.learned import TaskTimes, learned_makespan
from dcaccel.cost.proxy import CostModel
from dcaccel.cost.schedule import CostCache, cost_schedule
from dcaccel.dag.metrics import opaque_work
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.exploration.dags import LoweredDAG
from dcaccel.exploration.grid import Grid, runs
from dcaccel.exploration.points import ExplorationPoint
from dcaccel.exploration.study import NO_PARTITION
from dcaccel.partitioning import Partition
from dcaccel.scheduler import HETEROGENEOUS, CanonicalGraph, schedule

#: The fields of a point that are its schedule's own, by the same name (``ExplorationPoint.makespan`` is the
#: schedule's ``makespan``).
SCHEDULE_FIELDS = ("makespan", "lower_bound", "speedup", "utilisation", "work", "depth", "num_blocks")


def schedule_points(
    workload_name: str,
    built: LoweredDAG,
    grid: Grid,
    granularity: str,
    cost_model: CostModel,
    archs: Sequence[Architecture] = (),
    partitioned: Partition | None = None,
    learned: TaskTimes | None = None,
) -> Iterator[ExplorationPoint]:
    """Schedule ``built.dag`` as :func:`runs` says and yield one point per architecture and on-chip size,
    each costed on its architecture (none given: the default, ``abstract``). Under HEFT the ``pes``
    column is the number of units the schedule ran on. ``partitioned``: ``built.dag`` is that partition's
    placed DAG (``archs`` its costed architecture), whose policy, offloaded share and transfers the points
    carry. ``learned``: the durations of ``built.dag``'s nodes by a learned cost model, each schedule's
    ``learned_seconds`` (:func:`~dcaccel.cost.learned.learned_makespan`)."""
    archs = archs or (load_architecture(DEFAULT_ARCHITECTURE),)
    dag = built.dag
    graph = CanonicalGraph.from_dag(dag)  # validated and ranked once for every P
    cache = CostCache(graph)  # what the costings of its schedules share
    tasks = len(dag.tasks)
    buffers = len(dag.buffers)
    opaque_tasks, opaque_share = opaque_work(dag)
    for pes, scheduler, costed in runs(grid, archs):
        shared = None if scheduler == HETEROGENEOUS else _timed_schedule(graph, pes, scheduler, grid.partitioning, None)
        for arch in costed:
            result, seconds = shared or _timed_schedule(graph, pes, scheduler, grid.partitioning, arch)
            learned_seconds = 0.0 if learned is None else learned_makespan(result, learned)
            for memory in grid.onchip_memory:
                io = result.io_at(memory)
                onchip = memory or arch.onchip_capacity_elements
                costs = cost_schedule(result, arch, onchip, cache=cache, validate=False)
                energy = costs.energy_by_level
                split = costs.energy_split({} if partitioned is None else partitioned.links)
                yield ExplorationPoint(
                    workload=workload_name,
                    assignment=built.label,
                    granularity=granularity,
                    pes=result.pes,
                    scheduler=scheduler,
                    onchip_memory=memory,
                    architecture=arch.label,
                    **{name: getattr(result, name) for name in SCHEDULE_FIELDS},
                    tasks=tasks,
                    buffers=buffers,
                    opaque_tasks=opaque_tasks,
                    opaque_work_share=opaque_share,
                    io_volume=io.buffer,
                    offchip_io=io.off_chip,
                    onchip_io=io.on_chip,
                    streamed_io=io.streamed,
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
                    learned_seconds=learned_seconds,
                )


def _timed_schedule(
    dag: TaskDAG | CanonicalGraph, pes: int, scheduler: str, partitioning: str, arch: Architecture | None
):
    """The schedule of ``dag`` (on ``arch``'s units for HEFT) and the seconds it took."""
    start = time.perf_counter()
    result = schedule(dag, pes, scheduler=scheduler, partitioning=partitioning, validate=False, arch=arch)
    return result, time.perf_counter() - start
