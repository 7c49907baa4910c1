"""Application-space exploration: sweeps over implementation assignments, PEs, schedulers and
on-chip memory, returned as pandas DataFrames, with Pareto fronts and plots.

``explore`` (which lowers with DaCe) is imported on first use, so reading a result file or computing
a Pareto front does not import DaCe.
"""

from dcaccel.cost.proxy import CostModel
from dcaccel.exploration.assignments import Assignment
from dcaccel.exploration.pareto import pareto_front
from dcaccel.exploration.points import ExplorationPoint

__all__ = ["Assignment", "CostModel", "ExplorationPoint", "Study", "explore", "pareto_front"]


def __getattr__(name: str):
    if name == "explore":
        from dcaccel.exploration.sweep import explore

        return explore
    if name == "Study":
        from dcaccel.exploration.study import Study

        return Study
    raise AttributeError(f"module 'dcaccel.exploration' has no attribute '{name}'")
