"""One row of an exploration: a design point and what the model says about it.

The results table's columns are the fields of :class:`ExplorationPoint`, in order; they are never
listed by hand anywhere else.
"""

import math
import typing
from dataclasses import asdict, dataclass, fields

import pandas as pd

from dcaccel.scheduler import HETEROGENEOUS, SCHEDULERS

_ARTICLES = {str: "a string", int: "an integer", float: "a number"}

#: The values of the ``scheduler`` column: the homogeneous schedulers and HEFT over an architecture's units.
SWEEP_SCHEDULERS = (*SCHEDULERS, HETEROGENEOUS)

#: Relative tolerance of the derived columns (speedup, utilisation) against the columns they derive from.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class ExplorationPoint:
    """The metrics of one (implementation assignment, P, scheduler, architecture, on-chip memory, partition
    policy) point."""

    workload: str
    assignment: str  # e.g. "Conv=mv" or "conv1=mv,conv2=op"
    granularity: str
    pes: int  # under "heft": the architecture's units the schedule ran on (an open count is the P swept)
    scheduler: str  # "streaming", "list" or "heft"
    onchip_memory: int  # on-chip capacity per block, in elements
    architecture: str  # the description the columns below are costed on: its name, name[path=value,...] for a variant
    makespan: int  # cycles
    lower_bound: int  # list: max(depth, ceil(work / pes)); streaming: ceil(work / pes) (streams overlap the depth)
    speedup: float  # work / makespan
    utilisation: float  # speedup / pes
    work: int  # sum over tasks of max(I, O)
    depth: int  # critical path
    tasks: int
    buffers: int
    opaque_tasks: int  # tasks standing for an op with no canonical implementation (role opaque in their records)
    opaque_work_share: float  # their share of the work: sum of their max(I, O) / work (0 when work is 0)
    io_volume: int  # sum over buffer nodes of volume in + out (pseudo-source edges excluded)
    offchip_io: int
    onchip_io: int
    streamed_io: int
    num_blocks: int
    area: float  # CostModel proxy
    power: float  # CostModel proxy
    # The schedule re-timed and costed on ``architecture`` (dcaccel.scheduler.architecture), with the
    # buffers placed on chip for onchip_memory elements, or the architecture's on-chip capacity when it is 0.
    makespan_cycles: int  # cycles of the architecture's clock
    makespan_us: float  # makespan_cycles at that clock, in microseconds
    macs: int  # the tasks' MACs (dcaccel.dag.arithmetic.task_arithmetic): a roofline's operations
    offchip_bytes: int  # bytes read from and written to the off-chip memory: a roofline's traffic
    energy_pj: float  # the sum of the five parts below (relative units under "abstract")
    offchip_energy_pj: float
    onchip_energy_pj: float
    local_energy_pj: float  # the units' local memories
    link_energy_pj: float
    compute_energy_pj: float
    area_mm2: float  # units, local and on-chip memories
    power_w: float  # energy over the makespan
    unit_utilisation: str  # per unit kind, busy cycles over (units × makespan): "pe=0.25,host=0.01"
    # The split between the architecture's host and its accelerator (dcaccel.partition, docs/partitioning.md).
    partition_policy: str  # "none": the plain pipeline (no operator kept on a host); greedy, min-region, cost
    offloaded_work_share: float  # the offloaded operators' share of the work (1 under "none")
    transfer_volume: int  # elements moved between host and accelerator (transfer tasks; 0 under "none")
    host_energy_pj: float  # energy_pj split: the host unit kind and its links to memories,
    accelerator_energy_pj: float  # everything else but
    transfer_energy_pj: float  # the host↔accelerator link units
    lower_seconds: float  # lowering the assignment (shared by all points of the assignment)
    extract_seconds: float  # extracting the task DAG (shared likewise)
    schedule_seconds: float  # scheduling this point
    # The schedule re-timed with the durations of the study's learned cost model (dcaccel.cost.learned): this
    # machine's CPU running DaCe's code, in seconds; 0 under the analytic cost source.
    learned_seconds: float = 0.0


def columns() -> list[str]:
    """The results table's column names, derived from :class:`ExplorationPoint`."""
    return [field.name for field in fields(ExplorationPoint)]


def to_frame(points: list[ExplorationPoint]) -> pd.DataFrame:
    """The points as a DataFrame with one column per field, in field order."""
    return pd.DataFrame([asdict(point) for point in points], columns=columns())


def metrics() -> list[str]:
    """The numeric columns (those a sweep can minimise)."""
    hints = typing.get_type_hints(ExplorationPoint)
    return [name for name in columns() if hints[name] in (int, float)]


def typed(values: tuple, record: type = ExplorationPoint):
    """The ``record`` (a dataclass of str, int and float fields; default a point) whose fields are ``values``
    (in field order), after checking each has its field's type (an integer for a float is taken); raises
    ValueError naming the first field that has not."""
    hints = typing.get_type_hints(record)
    checked = []
    for name, value in zip([field.name for field in fields(record)], values, strict=True):
        kind = hints[name]
        if kind is float and type(value) is int:
            value = float(value)
        if type(value) is not kind:
            raise ValueError(f"{name} {value!r} is not {_ARTICLES[kind]}")
        checked.append(value)
    return record(*checked)


def inconsistency(point: ExplorationPoint) -> str | None:
    """Why ``point`` cannot come from a sweep, or None: a count or float out of range (P ≥ 1, the others
    ≥ 0 and finite, utilisation ≤ 1), an unknown scheduler, makespan below its lower bound or the lower
    bound below ⌈work / P⌉, an offloaded work share above 1, an energy split that does not add up to the
    energy, more opaque tasks than tasks, an opaque work share above 1 or not positive
    exactly when there are opaque tasks, or speedup and utilisation not work / makespan and speedup / P."""
    values = asdict(point)
    for name in metrics():
        value = values[name]
        if not math.isfinite(value) or value < (1 if name == "pes" else 0):
            return f"{name} {value!r} is out of range"
    if point.scheduler not in SWEEP_SCHEDULERS:
        return f"scheduler {point.scheduler!r} is unknown"
    if point.utilisation > 1 + TOLERANCE:
        return f"utilisation {point.utilisation!r} is above 1"
    if point.offloaded_work_share > 1 + TOLERANCE:
        return f"offloaded work share {point.offloaded_work_share!r} is above 1"
    split = point.host_energy_pj + point.accelerator_energy_pj + point.transfer_energy_pj
    if not math.isclose(split, point.energy_pj, rel_tol=TOLERANCE, abs_tol=TOLERANCE):
        return f"host, accelerator and transfer energy {split!r} do not add up to energy_pj {point.energy_pj!r}"
    if point.opaque_tasks > point.tasks:
        return f"opaque tasks {point.opaque_tasks} are more than the {point.tasks} tasks"
    if point.opaque_work_share > 1 + TOLERANCE or (point.opaque_work_share > 0) != (point.opaque_tasks > 0):
        return f"opaque work share {point.opaque_work_share!r} does not fit {point.opaque_tasks} opaque tasks"
    if point.makespan < point.lower_bound:
        return f"makespan {point.makespan} is below its lower bound {point.lower_bound}"
    if point.lower_bound < -(-point.work // point.pes):
        return f"lower bound {point.lower_bound} is below work / P = {point.work} / {point.pes}"
    speedup = point.work / point.makespan if point.makespan else 0.0
    if not math.isclose(point.speedup, speedup, rel_tol=TOLERANCE, abs_tol=TOLERANCE):
        return f"speedup {point.speedup!r} is not work / makespan = {speedup!r}"
    if not math.isclose(point.utilisation, speedup / point.pes, rel_tol=TOLERANCE, abs_tol=TOLERANCE):
        return f"utilisation {point.utilisation!r} is not speedup / P = {speedup / point.pes!r}"
    return None
