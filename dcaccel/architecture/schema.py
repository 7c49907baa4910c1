"""The YAML schema of an architecture description, as pydantic models.

An architecture is ``units`` (compute unit kinds), ``memories`` (by level) and ``links`` between
them, plus the datatype width ``element_bytes`` and the reference clock ``clock_mhz`` that cycles
are counted in. Every field is checked here (types, ranges, unknown keys, references between
components); :func:`describe_error` turns pydantic's report into one line naming the component
and field. ``docs/architecture_description.md`` documents the schema with a complete example.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from dcaccel.architecture.ranges import (
    MAX_ENTRIES,
    MAX_KINDS,
    MAX_LINKS,
    MIN_RATE,
    Area,
    Bandwidth,
    Capacity,
    Clock,
    ElementBytes,
    Energy,
    Latency,
    Rate,
    Units,
)
from dcaccel.architecture.reader import first_problem
from dcaccel.architecture.support import PatternText, SupportRule, UnitRole, check_support

#: An op name as a task's record (``TaskInfo.op``) carries it (ONNX op type), or ``"*"`` for every op.
ANY_OP = "*"

Name = Annotated[str, Field(strict=True, min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TopologyKind(StrEnum):
    """How the units of one kind are connected to each other."""

    ALL_TO_ALL = "all-to-all"  # a direct link between every pair
    MESH = "mesh"  # a 2-D mesh of rows × cols units, links between neighbours
    BUS = "bus"  # one shared bus every unit is attached to


class Topology(_Strict):
    """The unit↔unit network of a unit kind; ``rows`` × ``cols`` must equal the kind's count for a mesh."""

    kind: TopologyKind = TopologyKind.ALL_TO_ALL
    rows: Units | None = None
    cols: Units | None = None
    systolic: bool = Field(default=False, strict=True)  # a mesh whose operands shift along rows and cols

    @model_validator(mode="after")
    def _mesh_shape(self) -> Topology:
        if self.kind == TopologyKind.MESH and (self.rows is None or self.cols is None):
            raise ValueError("a mesh needs rows and cols")
        if self.systolic and self.kind != TopologyKind.MESH:
            raise ValueError(f"systolic applies to a mesh only, not to {self.kind.value}")
        if self.kind != TopologyKind.MESH and (self.rows is not None or self.cols is not None):
            raise ValueError(f"rows and cols apply to a mesh only, not to {self.kind.value}")
        return self


class Unit(_Strict):
    """A kind of compute unit. ``count`` None: as many as the schedule asks for (the abstract PEs).
    ``elements_per_cycle`` is the throughput of each port (elements read on one in-edge or written
    on one out-edge per cycle of the unit's clock); ``macs_per_cycle`` None: MACs never limit."""

    count: Units | None = None
    ops: list[Name | Literal["*"]] = Field(default_factory=lambda: [ANY_OP], min_length=1, max_length=MAX_ENTRIES)
    elements_per_cycle: Rate = 1.0
    macs_per_cycle: Rate | None = None
    frequency_mhz: Clock | None = None  # None: the architecture's clock
    area_mm2: Area = 0.0  # per unit
    energy_per_mac_pj: Energy = 0.0
    topology: Topology = Field(default_factory=Topology)
    role: UnitRole = UnitRole.ACCELERATOR  # host: the CPU that runs what the accelerator cannot
    # None: every op of ``ops``, unconstrained (dcaccel.architecture.support)
    support: list[SupportRule] | None = Field(default=None, max_length=MAX_ENTRIES)
    patterns: list[PatternText] = Field(default_factory=list, max_length=MAX_ENTRIES)  # composites, e.g. "Conv+Relu"

    @model_validator(mode="after")
    def _mesh_count(self) -> Unit:
        check_support(self.ops, self.role, self.support, self.patterns)
        topology = self.topology
        if topology.kind == TopologyKind.MESH:
            if self.count is None:
                raise ValueError("a mesh needs a count")
            if topology.rows * topology.cols != self.count:
                raise ValueError(f"mesh {topology.rows}×{topology.cols} does not hold count {self.count} units")
        return self

    def clock_ratio(self, clock_mhz: float) -> float:
        """How much faster than the reference clock ``clock_mhz`` the unit runs (1: at it)."""
        return 1.0 if self.frequency_mhz is None else self.frequency_mhz / clock_mhz


class MemoryLevel(StrEnum):
    LOCAL = "local"  # one per unit of the kind named by ``unit``
    ONCHIP = "onchip"  # shared on-chip memory (global buffer, unified buffer, scratchpad)
    OFFCHIP = "offchip"  # DRAM


#: The operands of a multiply-accumulate layer a memory can hold.
Operand = Literal["weights", "inputs", "outputs"]
#: The dimensions of a unit kind's array: a mesh's ``rows`` and ``cols``, or its ``units``.
ArrayDimension = Literal["rows", "cols", "units"]


class Memory(_Strict):
    """A memory. ``bandwidth_bytes_per_cycle`` None: unlimited. ``capacity_bytes`` None: unlimited
    off chip, and for an on-chip memory the capacity the schedule is given (``onchip=``, the abstract
    model). Energies are per element read or written; ``area_mm2`` per instance."""

    level: MemoryLevel
    unit: Name | None = None  # the unit kind a local memory belongs to
    capacity_bytes: Capacity | None = None
    bandwidth_bytes_per_cycle: Bandwidth | None = None
    read_energy_pj: Energy = 0.0
    write_energy_pj: Energy = 0.0
    area_mm2: Area = 0.0
    # Read by the loop-nest cost model (dcaccel.cost, docs/architecture_description.md "Operands"):
    operands: list[Operand] | None = Field(default=None, min_length=1, max_length=3)  # None: all three
    shared_along: list[ArrayDimension] = Field(default_factory=list, max_length=2)  # a local memory's sharing
    separate_ports: bool = Field(default=False, strict=True)  # reads and writes each at the full bandwidth
    access_bytes: ElementBytes | None = None  # the narrowest access: a transfer is rounded up to whole ones

    @model_validator(mode="after")
    def _level_fields(self) -> Memory:
        if (self.level == MemoryLevel.LOCAL) != (self.unit is not None):
            raise ValueError("unit is required for a local memory and allowed for it only")
        if self.level == MemoryLevel.LOCAL and self.capacity_bytes is None:
            raise ValueError("capacity_bytes is required for a local memory")
        if self.operands is not None and len(set(self.operands)) != len(self.operands):
            raise ValueError("operands: each operand once")
        if self.shared_along and self.level != MemoryLevel.LOCAL:
            raise ValueError("shared_along applies to a local memory only (the others serve every unit)")
        if len(set(self.shared_along)) != len(self.shared_along):
            raise ValueError("shared_along: each dimension once")
        return self


class Link(_Strict):
    """A link between two components (unit kinds or memories). Between a unit kind and itself it is
    every link of the kind's topology. ``bandwidth_bytes_per_cycle`` None: unlimited."""

    between: tuple[Name, Name]
    bandwidth_bytes_per_cycle: Bandwidth | None = None
    latency_cycles: Latency = 0
    energy_per_element_pj: Energy = 0.0


class ArchitectureSpec(_Strict):
    """The whole description (the top level of an architecture YAML file)."""

    name: Name
    description: Annotated[str, Field(strict=True)] = ""
    element_bytes: ElementBytes = 4
    partial_sum_bytes: ElementBytes | None = None  # the loop-nest model's accumulators (None: 2 × element_bytes)
    clock_mhz: Clock = 1000.0
    units: dict[Name, Unit] = Field(min_length=1, max_length=MAX_KINDS)
    memories: dict[Name, Memory] = Field(default_factory=dict, max_length=MAX_KINDS)
    links: list[Link] = Field(default_factory=list, max_length=MAX_LINKS)

    @model_validator(mode="after")
    def _references(self) -> ArchitectureSpec:
        shared = set(self.units) & set(self.memories)
        if shared:
            raise ValueError(f"'{sorted(shared)[0]}' names both a unit and a memory")
        for name, unit in self.units.items():
            ratio = unit.clock_ratio(self.clock_mhz)
            for field in ("elements_per_cycle", "macs_per_cycle"):
                rate = getattr(unit, field)
                if rate is not None and rate * ratio < MIN_RATE:
                    raise ValueError(
                        f"units.{name}.{field}: {rate:g} at {unit.frequency_mhz:g} MHz is {rate * ratio:.3g} per "
                        f"cycle of the {self.clock_mhz:g} MHz clock, below {MIN_RATE:g}"
                    )
        hosts = [name for name, unit in self.units.items() if unit.role == UnitRole.HOST]
        if len(hosts) > 1:
            raise ValueError(f"units: at most one host, got {', '.join(hosts)}")
        offchip = [name for name, memory in self.memories.items() if memory.level == MemoryLevel.OFFCHIP]
        if len(offchip) != 1:
            raise ValueError(f"memories: exactly one offchip memory, got {', '.join(offchip) or 'none'}")
        for name, memory in self.memories.items():
            if memory.unit is not None and memory.unit not in self.units:
                raise ValueError(f"memories.{name}.unit: unknown unit '{memory.unit}'")
        components = set(self.units) | set(self.memories)
        seen = set()
        for index, link in enumerate(self.links):
            for end in link.between:
                if end not in components:
                    raise ValueError(f"links.{index}.between: unknown component '{end}'")
            pair = frozenset(link.between)
            if pair in seen:
                raise ValueError(f"links.{index}.between: a second link between {' and '.join(link.between)}")
            seen.add(pair)
        return self


def describe_error(error: pydantic.ValidationError, source: str) -> str:
    """One line for a failed validation of ``source`` (a name or file): the first problem, where
    it is (``units.pe.count``), and how many more there are."""
    first, where, more = first_problem(error)
    message = first["msg"].removeprefix("Value error, ")
    return f"architecture {source}: {where + ': ' if where else ''}{message}{more}"
