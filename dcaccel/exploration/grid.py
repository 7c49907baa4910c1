"""The grid of a sweep: the (P, scheduler, architecture, on-chip memory, partition policy) points scheduled
on every assignment's DAG, in the order they are yielded, and the architectures they are costed on.
"""

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from dcaccel.architecture import Architecture
from dcaccel.architecture import load as load_architecture
from dcaccel.architecture import variants as architecture_variants
from dcaccel.architecture.links import host_of
from dcaccel.errors import DcaccelError
from dcaccel.exploration.study import NO_PARTITION
from dcaccel.scheduler import HETEROGENEOUS
from dcaccel.scheduler.heft import schedule_units


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


def architectures(arch, parameters: Mapping[str, Sequence] | None = None) -> tuple[Architecture, ...]:
    """``arch`` (one or several names, files, descriptions as mappings or :class:`Architecture` objects)
    loaded, each swept over the product of ``parameters``; the labels must be distinct (a repeated identical
    description counts once)."""
    given = (arch,) if isinstance(arch, (str, os.PathLike, Architecture, dict)) else tuple(arch)
    if not given:
        raise DcaccelError("explore: arch is empty")
    found: dict[str, Architecture] = {}
    for entry in given:
        loaded = Architecture.from_dict(entry, "in the study") if isinstance(entry, dict) else load_architecture(entry)
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
