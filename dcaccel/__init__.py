"""dcaccel: data-centric application-space exploration of spatial DNN accelerators.

The pipeline, top to bottom (data never flows back up):

``frontend`` (load a model into an SDFG) → ``expansions`` (canonical implementations of the
operators) → ``transforms`` (full lowering, granularity, fusion) → ``dag`` (the canonical task
DAG) → ``scheduler`` (makespan and I/O on P processing elements) → ``exploration`` (sweeps, ``dcaccel.explore``).
``dcaccel.verify(workload)`` checks a workload's SDFG (or a lowered version) against its reference.

The public names below are imported lazily, so that ``import dcaccel`` and the scheduler (which
needs no DaCe) stay fast.
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Architecture": "dcaccel.architecture",
    "load": "dcaccel.frontend",
    "Workload": "dcaccel.frontend",
    "TaskDAG": "dcaccel.dag",
    "extract": "dcaccel.dag",
    "schedule": "dcaccel.scheduler",
    "Schedule": "dcaccel.scheduler",
    "explore": "dcaccel.exploration",
    "Study": "dcaccel.exploration",
    "map": "dcaccel.mapping",
    "pareto_front": "dcaccel.exploration",
    "partition": "dcaccel.partitioning",
    "verify": "dcaccel.verification",
    "DcaccelError": "dcaccel.errors",
}

__all__ = sorted(_EXPORTS)


#: Sub-packages reachable as attributes (``dcaccel.workloads.get("lenet")``).
_SUBPACKAGES = {"architecture", "dag", "expansions", "exploration", "frontend", "scheduler", "transforms", "workloads"}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _SUBPACKAGES:
        return importlib.import_module(f"dcaccel.{name}")
    raise AttributeError(f"module 'dcaccel' has no attribute '{name}'")
