"""Application-space exploration: sweeps over implementation assignments, PEs, schedulers and
on-chip memory, returned as pandas DataFrames, with Pareto fronts and plots."""

from dcaccel.explore.assignments import Assignment
from dcaccel.explore.cost import CostModel
from dcaccel.explore.pareto import pareto_front
from dcaccel.explore.points import ExplorationPoint
from dcaccel.explore.sweep import explore

__all__ = ["Assignment", "CostModel", "ExplorationPoint", "explore", "pareto_front"]
