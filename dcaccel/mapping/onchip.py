"""The on-chip stage: schedule a realised mapping on the architecture and cost it by an objective.

A mapping's cost is the architecture cost of the schedule of its realised task DAG
(:func:`dcaccel.scheduler.schedule` on the mapping's PEs with its scheduler, costed by
:func:`dcaccel.cost.schedule.cost_schedule`) plus its off-chip
re-fetches (:mod:`dcaccel.mapping.offchip`), which the program's task structure does not carry:
each re-fetched element costs the off-chip memory's read energy and ``element_bytes / bandwidth``
cycles of its bandwidth (none when unlimited). ``makespan`` is in cycles, ``energy`` in pJ, ``edp``
their product (pJ·cycles).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dcaccel.architecture import Architecture
from dcaccel.cost.schedule import cost_schedule
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.errors import DcaccelError
from dcaccel.mapping.notation import Mapping
from dcaccel.scheduler import schedule

OBJECTIVES = ("makespan", "energy", "edp")


def check_objective(objective: str) -> str:
    if objective not in OBJECTIVES:
        raise DcaccelError(f"unknown objective '{objective}' (expected one of {', '.join(OBJECTIVES)})")
    return objective


@dataclass(frozen=True)
class Cost:
    """The cost of one mapping on an architecture."""

    makespan_cycles: int
    energy_pj: float

    @property
    def edp(self) -> float:
        return self.energy_pj * self.makespan_cycles

    def value(self, objective: str) -> float:
        """The value of ``objective`` (``makespan``, ``energy`` or ``edp``)."""
        return {"makespan": float(self.makespan_cycles), "energy": self.energy_pj, "edp": self.edp}[objective]

    def __add__(self, other: Cost) -> Cost:
        """Two layers run one after the other."""
        return Cost(self.makespan_cycles + other.makespan_cycles, self.energy_pj + other.energy_pj)


def cost(dag: TaskDAG, mapping: Mapping, arch: Architecture, refetch: int, onchip: int) -> Cost:
    """Schedule ``dag`` (``mapping`` realised) on ``arch`` with ``onchip`` elements on chip and add the
    cost of ``refetch`` elements."""
    costs = cost_schedule(schedule(dag, mapping.pes, mapping.scheduler, onchip=onchip), arch)
    offchip = arch.memories[arch.offchip]
    bandwidth = offchip.bandwidth_bytes_per_cycle
    cycles = math.ceil(refetch * arch.element_bytes / bandwidth) if bandwidth else 0
    return Cost(costs.makespan_cycles + cycles, costs.energy_total_pj + refetch * offchip.read_energy_pj)
