"""``Architecture``: an accelerator as a networkx graph of compute units, memories and links.

The component graph has one node per unit kind (``kind="unit"``) and per memory
(``kind="memory"``), and one edge per link; the unit↔unit links of a kind are a self-loop whose
``topology`` says how its instances connect (:func:`all_to_all`, :func:`mesh_2d`, :func:`bus`
build the instance graph). The queries the schedulers need (which unit runs an op, the off-chip
memory, the on-chip capacity, link and memory parameters) are methods here; the costs themselves
are computed by :mod:`dcaccel.cost.schedule`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

import networkx as nx
import yaml

from dcaccel.architecture.ranges import MAX_UNITS
from dcaccel.architecture.reader import ArchitectureError, read_yaml, shown, validated
from dcaccel.architecture.schema import (
    ANY_OP,
    ArchitectureSpec,
    Link,
    Memory,
    MemoryLevel,
    TopologyKind,
    Unit,
    describe_error,
)
from dcaccel.architecture.support import UnitRole

#: The most links an instance graph is built with (networkx keeps a few hundred bytes per link).
MAX_INSTANCE_LINKS = 10**6


def all_to_all(count: int) -> nx.Graph:
    """``count`` units, a link between every pair."""
    return nx.complete_graph(count)


def mesh_2d(rows: int, cols: int) -> nx.Graph:
    """``rows`` × ``cols`` units numbered row-major, links between horizontal and vertical neighbours."""
    return nx.convert_node_labels_to_integers(nx.grid_2d_graph(rows, cols), ordering="sorted")


def bus(count: int) -> nx.Graph:
    """``count`` units attached to one shared bus (node ``"bus"``): every transfer crosses it."""
    graph = nx.star_graph(count)  # node 0 is the hub
    return nx.relabel_nodes(graph, {0: "bus", **{i: i - 1 for i in range(1, count + 1)}})


class Architecture:
    """An accelerator description (see ``docs/architecture_description.md``); build it from a dict
    (:meth:`from_dict`), YAML text (:meth:`from_yaml`), or by name or file
    (:func:`dcaccel.architecture.load`)."""

    def __init__(self, spec: ArchitectureSpec, label: str | None = None):
        self.spec = spec
        self._label = label

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_dict(cls, data: Any, source: str = "", label: str | None = None) -> Architecture:
        """Validate ``data`` (the parsed YAML) and build the architecture; ``source`` names it in errors,
        ``label`` in results (default: its name)."""
        spec = validated(
            ArchitectureSpec,
            data,
            f"architecture {source or '?'}",
            lambda err: describe_error(err, source or shown(data.get("name", "?"))),  # data is a mapping here
        )
        return cls(spec, label)

    @classmethod
    def from_yaml(cls, text: str, source: str = "") -> Architecture:
        """Parse ``text`` as data, never code, within the bounds of :func:`~dcaccel.architecture.reader.read_yaml`
        (size, nesting, aliases, no duplicate key), and validate it."""
        return cls.from_dict(read_yaml(text, source or "?"), source)

    def to_dict(self) -> dict:
        return self.spec.model_dump(mode="json", exclude_defaults=False)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    def replace(self, **changes) -> Architecture:
        """A copy with top-level fields replaced (validated again)."""
        return Architecture.from_dict({**self.to_dict(), **changes}, self.name)

    # ------------------------------------------------------------------ the graph

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def label(self) -> str:
        """What results call it: its name, or for a variant with swept parameters
        (:mod:`dcaccel.architecture.parameters`) ``name[path=value,...]``."""
        return self._label or self.name

    @property
    def element_bytes(self) -> int:
        return self.spec.element_bytes

    @property
    def clock_mhz(self) -> float:
        return self.spec.clock_mhz

    @property
    def units(self) -> dict[str, Unit]:
        return self.spec.units

    @property
    def memories(self) -> dict[str, Memory]:
        return self.spec.memories

    @cached_property
    def graph(self) -> nx.MultiGraph:
        """The component graph: nodes ``kind`` = unit|memory with ``spec``; one edge per link (``spec``)."""
        graph = nx.MultiGraph(name=self.name)
        for name, unit in self.units.items():
            graph.add_node(name, kind="unit", spec=unit)
        for name, memory in self.memories.items():
            graph.add_node(name, kind="memory", spec=memory)
        for link in self.spec.links:
            graph.add_edge(*link.between, spec=link)
        return graph

    def instance_graph(self, unit: str, count: int | None = None) -> nx.Graph:
        """The instances of unit kind ``unit`` and their links, by its topology (``count`` for a kind
        whose count is open)."""
        spec = self.units[unit]
        count = spec.count if spec.count is not None else count
        if count is None:
            raise ArchitectureError(f"architecture {self.name}: unit '{unit}' has no count; give one")
        kind, rows, cols = spec.topology.kind, spec.topology.rows, spec.topology.cols
        if kind == TopologyKind.MESH:
            links = rows * (cols - 1) + cols * (rows - 1)
        else:
            links = count if kind == TopologyKind.BUS else count * (count - 1) // 2
        if links > MAX_INSTANCE_LINKS:
            raise ArchitectureError(
                f"architecture {self.name}: the instance graph of unit '{unit}' ({count} units, {kind.value}) "
                f"would have {links} links, more than {MAX_INSTANCE_LINKS}"
            )
        if kind == TopologyKind.MESH:
            return mesh_2d(rows, cols)
        if kind == TopologyKind.BUS:
            return bus(count)
        return all_to_all(count)

    @cached_property
    def _links(self) -> dict[frozenset[str], Link]:
        return {frozenset(link.between): link for link in self.spec.links}

    def link(self, a: str, b: str) -> Link | None:
        """The link between components ``a`` and ``b`` (None when they have none)."""
        return self._links.get(frozenset((a, b)))

    # ------------------------------------------------------------------ queries

    def unit_for(self, op: str | None) -> str:
        """The first unit kind (in description order) that runs ``op`` (a task without an op runs on a
        ``"*"`` unit)."""
        for name, unit in self.units.items():
            if ANY_OP in unit.ops or (op is not None and op in unit.ops):
                return name
        raise ArchitectureError(f"architecture {self.name}: no unit runs op '{op or '(none)'}'")

    def unit_count(self, unit: str, pes: int) -> int:
        """How many units of the kind the schedule uses: its count, or ``pes`` for an open count (at most
        :data:`~dcaccel.architecture.ranges.MAX_UNITS`, as a count)."""
        count = self.units[unit].count
        if count is not None:
            return count
        if pes > MAX_UNITS:
            raise ArchitectureError(
                f"architecture {self.label}: unit '{unit}' has no count and P = {pes} exceeds {MAX_UNITS} units"
            )
        return pes

    def unit_counts(self, pes: int) -> dict[str, int]:
        """The units of every kind (an open count is ``pes``)."""
        return {unit: self.unit_count(unit, pes) for unit in self.units}

    def accelerator_units(self, pes: int) -> int:
        """The most PEs a homogeneous schedule may use: the units of every kind but the host (a PE runs on
        a unit of the kind of each of its tasks, the host takes only what no other kind runs)."""
        return sum(count for unit, count in self.unit_counts(pes).items() if self.units[unit].role != UnitRole.HOST)

    @property
    def offchip(self) -> str:
        """The off-chip memory's name (the schema requires exactly one)."""
        return next(n for n, m in self.memories.items() if m.level == MemoryLevel.OFFCHIP)

    @property
    def onchip(self) -> list[str]:
        """The shared on-chip memories, in description order."""
        return [n for n, m in self.memories.items() if m.level == MemoryLevel.ONCHIP]

    def local(self, unit: str) -> str | None:
        """The local memory of unit kind ``unit`` (None: it has none)."""
        return next((n for n, m in self.memories.items() if m.level == MemoryLevel.LOCAL and m.unit == unit), None)

    @property
    def onchip_capacity_elements(self) -> int:
        """Elements the shared on-chip memories hold together (an open capacity counts 0: the
        schedule's ``onchip`` gives it)."""
        return sum(self.memories[n].capacity_bytes or 0 for n in self.onchip) // self.element_bytes

    def throughput(self, unit: str) -> float:
        """Elements per port per reference cycle: ``elements_per_cycle`` scaled by the unit's clock."""
        spec = self.units[unit]
        return spec.elements_per_cycle * spec.clock_ratio(self.clock_mhz)

    def mac_rate(self, unit: str) -> float | None:
        """MACs per reference cycle (None: MACs never limit)."""
        spec = self.units[unit]
        return None if spec.macs_per_cycle is None else spec.macs_per_cycle * spec.clock_ratio(self.clock_mhz)

    def peak_macs_per_cycle(self, pes: int) -> float:
        """The compute roof: MACs per reference cycle of every unit together, each at its MAC rate (one
        MAC per element of its port throughput when MACs never limit); an open unit count is ``pes``."""
        return sum(self.unit_count(unit, pes) * (self.mac_rate(unit) or self.throughput(unit)) for unit in self.units)

    @property
    def offchip_bandwidth(self) -> float | None:
        """The bandwidth roof: the off-chip memory's bytes per cycle (None: unlimited)."""
        return self.memories[self.offchip].bandwidth_bytes_per_cycle

    def area_mm2(self, pes: int) -> float:
        """Units, their local memories and the on-chip memories (off-chip memory excluded); an open
        unit count is ``pes``."""
        return self.area_of(self.unit_counts(pes))

    def area_of(self, counts: Mapping[str, int]) -> float:
        """The area (:meth:`area_mm2`) with ``counts`` units of every kind."""
        area = 0.0
        for name, unit in self.units.items():
            area += counts[name] * unit.area_mm2
        for memory in self.memories.values():
            if memory.level == MemoryLevel.LOCAL:
                area += counts[memory.unit] * memory.area_mm2
            elif memory.level == MemoryLevel.ONCHIP:
                area += memory.area_mm2
        return area

    def __repr__(self) -> str:
        units = ", ".join(f"{n}×{u.count if u.count is not None else 'P'}" for n, u in self.units.items())
        return f"Architecture({self.name!r}, units: {units}, memories: {', '.join(self.memories) or 'none'})"
