"""One row of an exploration: a design point and what the model says about it.

The results table's columns are the fields of :class:`ExplorationPoint`, in order; they are never
listed by hand anywhere else.
"""

from dataclasses import asdict, dataclass, fields

import pandas as pd


@dataclass(frozen=True)
class ExplorationPoint:
    """The metrics of one (implementation assignment, P, scheduler, on-chip memory) point."""

    workload: str
    assignment: str  # e.g. "Conv=mv" or "conv1=mv,conv2=op"
    granularity: str
    pes: int
    scheduler: str  # "streaming" or "list"
    onchip_memory: int  # on-chip capacity per block, in elements
    makespan: int  # cycles
    lower_bound: int  # list: max(depth, ceil(work / pes)); streaming: ceil(work / pes) (streams overlap the depth)
    speedup: float  # work / makespan
    utilisation: float  # speedup / pes
    work: int  # sum over tasks of max(I, O)
    depth: int  # critical path
    tasks: int
    buffers: int
    io_volume: int  # sum over buffer nodes of volume in + out (pseudo-source edges excluded)
    offchip_io: int
    onchip_io: int
    streamed_io: int
    num_blocks: int
    area: float  # CostModel proxy
    power: float  # CostModel proxy
    lower_seconds: float  # lowering the assignment (shared by all points of the assignment)
    extract_seconds: float  # extracting the task DAG (shared likewise)
    schedule_seconds: float  # scheduling this point


def columns() -> list[str]:
    """The results table's column names, derived from :class:`ExplorationPoint`."""
    return [field.name for field in fields(ExplorationPoint)]


def to_frame(points: list[ExplorationPoint]) -> pd.DataFrame:
    """The points as a DataFrame with one column per field, in field order."""
    return pd.DataFrame([asdict(point) for point in points], columns=columns())
