"""Data movement, energy and cycles of one layer mapped onto an operand-aware hierarchy.

A :class:`LayerMapping` unrolls some loops over the array's dimensions (``spatial``) and orders the rest
as temporal loops, innermost first; every operand's levels take a prefix of the temporal loops each
(``boundaries``: how many temporal loops lie inside each of its levels, non-decreasing, the outermost
level takes them all). The counts follow the rules of loop-nest cost models (ZigZag, Timeloop):

- a level's *tile* of an operand is its footprint over the temporal loops inside the level and the spatial
  loops of the dimensions one instance serves;
- the tile is *refilled* once per iteration of the loops outside the level, except the innermost run of
  them that does not index the operand: the tile stays while they iterate (stationarity);
- an instance holds distinct data for the spatial loops outside it that index the operand; a spatial loop
  that does not index it sends the same data to several instances (multicast: one read above, a write
  in each instance below) and, for outputs, sums partial results in the array (one write above);
- outputs move as partial sums: each visit of an output tile at a level is written to the level above,
  and every visit but the first reads the partial sum back; what reaches the outermost level the last
  time is final and moves at the output precision, partial sums at ``psum`` precision;
- the MAC units form the level below the innermost memory: each unit's input registers keep a weight or
  an input while the innermost loops that do not index it iterate; a unit keeps no partial sum, every MAC
  reads and writes it in the innermost memory holding outputs (declare a small output register to
  model an accumulator in the unit), as ZigZag counts it.

Energy is word accesses × word energy for every memory (bits rounded up to words per memory and
direction) plus MACs × MAC energy. Cycles are the temporal iterations (one MAC per unit per cycle) or,
when a memory's traffic needs longer at its bandwidth, that time (the transfers of a level overlap the
computation, as double-buffered tiles do), plus the time to load the first tiles before the first MAC and
to write the last outputs after the last.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from dcaccel.cost.hierarchy import Hierarchy, Memory
from dcaccel.cost.nest import OPERANDS, LayerNest
from dcaccel.errors import DcaccelError


@dataclass(frozen=True)
class LayerMapping:
    """Spatial unrolling ``(array dimension, loop, factor)``, temporal loops ``(loop, factor)`` innermost
    first, and per operand the number of temporal loops inside each of its levels."""

    spatial: tuple[tuple[str, str, int], ...]
    temporal: tuple[tuple[str, int], ...]
    boundaries: Mapping[str, tuple[int, ...]]

    def text(self) -> str:
        """A one-line form: ``S[D1:K32 D2:C32] T[OX7 C2 ...] W|2|9 I|4|9 O|0|4|9``."""
        spatial = " ".join(f"{dim}:{loop}{factor}" for dim, loop, factor in self.spatial)
        temporal = " ".join(f"{loop}{factor}" for loop, factor in self.temporal)
        levels = " ".join(f"{op}|" + "|".join(map(str, self.boundaries[op])) for op in OPERANDS)
        return f"S[{spatial}] T[{temporal}] {levels}"


@dataclass(frozen=True)
class Traffic:
    """Elements and bits read from and written to one memory for one operand (all instances)."""

    read_elements: int = 0
    write_elements: int = 0
    read_bits: int = 0
    write_bits: int = 0


@dataclass(frozen=True)
class LayerCost:
    """What one mapped layer costs: per memory and operand traffic, energy per memory, cycles."""

    layer: str
    mapping: LayerMapping
    macs: int
    temporal_cycles: int
    ideal_cycles: int
    stall_cycles: int
    onload_cycles: int
    offload_cycles: int
    traffic: Mapping[tuple[str, str], Traffic]
    energy_pj: Mapping[str, float]  # memory name (and "mac") -> pJ
    port_stalls: Mapping[str, int] = field(default_factory=dict)  # "memory.r|w|rw" -> its stall cycles
    operand_energy_pj: Mapping[tuple[str, str], float] = field(default_factory=dict)  # (memory, operand) -> pJ

    @property
    def cycles(self) -> int:
        return self.temporal_cycles + self.stall_cycles + self.onload_cycles + self.offload_cycles

    @property
    def energy_total_pj(self) -> float:
        return sum(self.energy_pj.values())

    @property
    def utilisation(self) -> float:
        return self.ideal_cycles / self.cycles if self.cycles else 0.0

    def bits(self, memory: str) -> int:
        """Bits read from and written to ``memory`` for every operand."""
        return sum(t.read_bits + t.write_bits for (name, _), t in self.traffic.items() if name == memory)


def _effective(nest: LayerNest, spatial, temporal) -> tuple[tuple[str, str, float], ...]:
    """The spatial unrolling as the data sees it: a loop unrolled f times whose extent n leaves ⌈n / f'⌉
    iterations (f' its whole unrolling) touches n / ⌈n / f'⌉ elements per unit on average, not f (a
    non-dividing unrolling leaves units idle in its last iteration, as ZigZag counts it)."""
    unrolled: dict[str, int] = {}
    for _, loop, factor in spatial:
        unrolled[loop] = unrolled.get(loop, 1) * factor
    scale = {}
    for loop, factor in unrolled.items():
        iterations = math.ceil(nest.loops[loop] / factor)
        scale[loop] = nest.loops[loop] / iterations / factor
    effective = []
    for dim, loop, factor in spatial:  # a loop over several dimensions is scaled once, on its first
        effective.append((dim, loop, factor * scale.pop(loop, 1.0)))
    return tuple(effective)


class Tiles:
    """Footprints and refills of every operand for every prefix of a mapping's temporal loops, computed
    once (a search evaluates thousands of boundaries over the same loops)."""

    def __init__(self, nest: LayerNest, spatial, temporal):
        self.nest, self.spatial, self.temporal = nest, tuple(spatial), tuple(temporal)
        self.effective = _effective(nest, self.spatial, self.temporal)
        self._footprints: dict[tuple[str, frozenset], list[int]] = {}
        self._relevant = {op: [nest.relevant(op, loop) for loop, _ in self.temporal] for op in OPERANDS}
        suffix = [1] * (len(self.temporal) + 1)
        for position in range(len(self.temporal) - 1, -1, -1):
            suffix[position] = suffix[position + 1] * self.temporal[position][1]
        self._suffix = suffix

    def footprint(self, operand: str, served: frozenset, bound: int) -> int:
        """Elements of ``operand`` in one instance serving ``served`` holding the first ``bound`` loops."""
        key = (operand, served)
        table = self._footprints.get(key)
        if table is None:
            extents: dict[str, int] = {}
            for dim, loop, factor in self.effective:
                if dim in served:
                    extents[loop] = extents.get(loop, 1) * factor
            table = self._footprints[key] = self.nest.footprints(operand, extents, self.temporal)
        return table[bound]

    def refills(self, operand: str, bound: int) -> int:
        """Times a tile is (re)loaded: the outer loops' iterations less the innermost run not indexing it."""
        relevant = self._relevant[operand]
        start = bound
        while start < len(relevant) and not relevant[start]:
            start += 1
        return self._suffix[start]

    def iterations(self, bound: int) -> int:
        """Iterations of the loops outside the first ``bound``."""
        return self._suffix[bound]

    def distinct(self, operand: str, bound: int) -> int:
        """Iterations of the outer loops that index ``operand`` (distinct tiles over time)."""
        relevant = self._relevant[operand]
        return math.prod([f for (_, f), r in zip(self.temporal[bound:], relevant[bound:], strict=True) if r])


class _Walk:
    """The counts of one operand along its levels under one mapping (see the module's rules)."""

    def __init__(self, tiles: Tiles, hierarchy: Hierarchy, mapping: LayerMapping, operand: str):
        self.tiles, self.nest, self.mapping, self.operand = tiles, tiles.nest, mapping, operand
        self.levels = hierarchy.levels(operand)
        self.bounds = mapping.boundaries[operand]
        if len(self.bounds) != len(self.levels):
            raise DcaccelError(f"mapping: operand {operand} has {len(self.levels)} levels, {len(self.bounds)} bounds")

    def fan(self, lower: Memory | None, upper: Memory) -> int:
        """Distinct transfers between one tile of ``lower`` and ``upper``: instances of ``lower`` below all
        instances of ``upper`` that hold distinct data (multicast and spatial reduction count once)."""
        lower_served = lower.served if lower is not None else frozenset()
        fan = 1
        for dim, loop, factor in self.tiles.effective:
            if dim in lower_served:
                continue
            if dim not in upper.served or self.nest.relevant(self.operand, loop):
                fan *= factor
        return fan

    def copies(self, memory: Memory | None) -> int:
        """Instances of ``memory`` that hold a tile (all of them, duplicates included)."""
        served = memory.served if memory is not None else frozenset()
        return math.prod([factor for dim, _, factor in self.tiles.effective if dim not in served])

    def tile(self, position: int, bound: int) -> int:
        served = self.levels[position].served if position >= 0 else frozenset()
        return self.tiles.footprint(self.operand, served, bound)

    def visits(self, bound: int) -> int:
        return self.tiles.refills(self.operand, bound)

    def distinct_visits(self, bound: int) -> int:
        return self.tiles.distinct(self.operand, bound)


@dataclass(frozen=True)
class Link:
    """One direction of one operand's traffic at one memory, as ZigZag names them: ``tl`` read and sent to
    the level below, ``fh`` written from above, ``fl`` written from below, ``th`` read and sent up.
    ``elements`` move per period in each of ``instances`` instances, ``periods`` times, at ``bits`` each."""

    memory: Memory
    operand: str
    direction: str
    elements: int
    periods: int
    instances: int
    bits: int
    buffered: bool  # the receiving tile is double-buffered: a period-long window for the transfer
    window: int  # else the iterations of the period the transfer may take (the tile's top irrelevant loops)
    step: int  # the step of the operand's levels it belongs to (0: between the units and the first level)
    first: float  # elements of the operand's innermost tile: the least a transfer made once must carry

    @property
    def read(self) -> bool:
        return self.direction in ("tl", "th")

    @property
    def total_bits(self) -> int:
        return self.elements * self.periods * self.instances * self.bits

    def bandwidth(self) -> float:
        memory = self.memory
        return memory.read_bits_per_cycle if self.read else memory.write_bits_per_cycle

    def cycles(self) -> int:
        """Cycles one period's transfer takes on one instance's port."""
        return math.ceil(self.elements * self.bits / self.bandwidth())

    def words(self) -> float:
        """Word accesses: each period's bits rounded up to the port's step, in words of its width."""
        memory = self.memory
        word = memory.read_word_bits if self.read else memory.write_word_bits
        step = (memory.read_step_bits if self.read else memory.write_step_bits) or word
        return math.ceil(self.elements * self.bits / step) * step / word * self.periods * self.instances

    def port(self) -> tuple[str, str]:
        if self.memory.shared_port:
            return self.memory.name, "rw"
        return self.memory.name, "r" if self.read else "w"


def _window(walk: _Walk, bound: int) -> int:
    """The iterations of the innermost loops inside ``bound`` that do not index the operand, counted from
    the top: while they run, the next tile can arrive without a second buffer."""
    window, position = 1, bound - 1
    temporal = walk.mapping.temporal
    while position >= 0 and not walk.nest.relevant(walk.operand, temporal[position][0]):
        window *= temporal[position][1]
        position -= 1
    return window


def _links(walk: _Walk, bits: Mapping[str, int], buffered: Mapping[str, bool]) -> list[Link]:
    """Every link of one operand along its levels (see the module's rules)."""
    operand = walk.operand
    output = operand == "O"
    bounds = (0, *walk.bounds)
    memories = (None, *walk.levels)
    top = len(memories) - 2
    first = walk.tile(0, bounds[1])
    links = []
    for below in range(len(memories) - 1):
        lower, upper = memories[below], memories[below + 1]
        tile = walk.tile(below - 1, bounds[below])
        fan = walk.fan(lower, upper)
        # the units hold no partial sum: each MAC reads and writes it in the innermost output memory
        visits = walk.tiles.iterations(0) if output and lower is None else walk.visits(bounds[below])
        upper_copies = max(1, walk.copies(upper))
        per_upper = tile * fan / upper_copies
        double = buffered.get(lower.name, True) if lower is not None else True
        window = _window(walk, bounds[below])
        if not output:
            precision = bits[operand]
            links.append(
                Link(upper, operand, "tl", per_upper, visits, upper_copies, precision, double, window, below, first)
            )
            if lower is not None:
                copies = walk.copies(lower)
                links.append(Link(lower, operand, "fh", tile, visits, copies, precision, double, window, below, first))
            continue
        distinct = walk.distinct_visits(bounds[below])
        back = visits - distinct
        final = bits["O"] if below == top and back == 0 else bits["psum"]
        psum = bits["psum"]
        links.append(Link(upper, operand, "fl", per_upper, visits, upper_copies, final, double, window, below, first))
        if back:
            links.append(Link(upper, operand, "tl", per_upper, back, upper_copies, psum, double, window, below, first))
        if lower is not None:
            copies = walk.copies(lower)
            links.append(Link(lower, operand, "th", tile, visits, copies, final, double, window, below, first))
            if back:
                links.append(Link(lower, operand, "fh", tile, back, copies, psum, double, window, below, first))
    return links


def fits(nest: LayerNest, hierarchy: Hierarchy, mapping: LayerMapping) -> str | None:
    """None when every memory holds its operands' tiles, else why not."""
    tiles = Tiles(nest, mapping.spatial, mapping.temporal)
    for memory, used in _occupancy(hierarchy, mapping, tiles).items():
        if used > memory.size_bits:
            return f"memory {memory.name} holds {used} bits of tiles, more than its {memory.size_bits}"
    return None


def _occupancy(hierarchy: Hierarchy, mapping: LayerMapping, tiles: Tiles) -> dict[Memory, int]:
    """Bits of tiles each sized memory holds (one instance)."""
    used = {}
    for memory in hierarchy.memories:
        if memory.size_bits is None:
            continue
        total = 0
        for operand in memory.operands:
            bound = mapping.boundaries[operand][hierarchy.levels(operand).index(memory)]
            total += tiles.footprint(operand, memory.served, bound) * stored_bits(hierarchy, tiles, operand, bound)
        used[memory] = total
    return used


def stored_bits(hierarchy: Hierarchy, tiles: Tiles, operand: str, bound: int) -> int:
    """Bits of one stored element of ``operand`` in a level holding the first ``bound`` loops: outputs are
    partial sums while a loop outside the level still reduces into them."""
    precision = hierarchy.precision
    if operand != "O":
        return precision[operand]
    reduced = any(not tiles.nest.relevant("O", loop) for loop, _ in tiles.temporal[bound:])
    return precision["psum"] if reduced else precision["O"]


def evaluate(nest: LayerNest, hierarchy: Hierarchy, mapping: LayerMapping, tiles: Tiles | None = None) -> LayerCost:
    """The cost of ``nest`` under ``mapping`` on ``hierarchy`` (tiles must fit: see :func:`fits`); ``tiles``:
    the mapping's :class:`Tiles` when the caller has them."""
    spatial = {}
    for dim, loop, factor in mapping.spatial:
        if dim not in hierarchy.array or factor > hierarchy.array[dim]:
            raise DcaccelError(f"mapping: {loop} unrolled {factor}× on array dimension {dim!r} that does not hold it")
        spatial[loop] = spatial.get(loop, 1) * factor
    for loop, extent in nest.loops.items():
        covered = spatial.get(loop, 1) * math.prod([f for name, f in mapping.temporal if name == loop])
        if covered < extent:
            raise DcaccelError(f"mapping of {nest.name}: loop {loop} covers {covered} of its {extent} iterations")
    tiles = tiles or Tiles(nest, mapping.spatial, mapping.temporal)
    occupancy = _occupancy(hierarchy, mapping, tiles)
    buffered = {memory.name: 2 * used <= memory.size_bits for memory, used in occupancy.items()}
    links = [
        link
        for operand in OPERANDS
        for link in _links(_Walk(tiles, hierarchy, mapping, operand), hierarchy.precision, buffered)
    ]
    counts: dict[tuple[str, str], list[int]] = {}
    energy: dict[str, float] = {"mac": nest.macs * hierarchy.mac_energy_pj}
    operand_energy: dict[tuple[str, str], float] = {}
    for link in links:
        row = counts.setdefault((link.memory.name, link.operand), [0, 0, 0, 0])
        elements = link.elements * link.periods * link.instances
        row[0 if link.read else 1] += elements
        row[2 if link.read else 3] += link.total_bits
        cost = link.words() * (link.memory.read_energy_pj if link.read else link.memory.write_energy_pj)
        energy[link.memory.name] = energy.get(link.memory.name, 0.0) + cost
        key = (link.memory.name, link.operand)
        operand_energy[key] = operand_energy.get(key, 0.0) + cost
    traffic = {key: Traffic(*values) for key, values in counts.items()}

    temporal = math.prod([factor for _, factor in mapping.temporal])
    stall, onload, offload, port_stalls = _timing(links, temporal)
    drain = sum(factor - 1 for dim, _, factor in mapping.spatial if dim in hierarchy.systolic)
    return LayerCost(
        nest.name,
        mapping,
        nest.macs,
        temporal,
        math.ceil(nest.macs / hierarchy.units),
        stall,
        onload,
        offload + drain,
        traffic,
        energy,
        port_stalls,
        operand_energy,
    )


def _timing(links: list[Link], temporal: int) -> tuple[int, int, int, dict[str, int]]:
    """Stall, onloading and offloading cycles (ZigZag's latency model, ``docs/validation.md``):

    - a periodic transfer that takes longer than its window (the period when the receiving tile is
      double-buffered, else the iterations of its top irrelevant loops) stalls the array by the excess in
      every period but the first; a port's stalls add up, the worst port stalls the array;
    - a transfer made once (the first tiles in, the last outputs out) takes its cycles less what the
      port's spare bandwidth during the computation can carry, per operand level after level (the longer
      side of each step); the two inputs load in parallel on separate ports, one after the other on
      shared ones.
    """
    stalls: dict[tuple[str, str], int] = {}
    busy: dict[tuple[str, str], float] = {}
    for link in links:
        if link.periods > 1:
            period = temporal / link.periods
            allowed = period if link.buffered else period / max(1, link.window)
            excess = (link.cycles() - allowed) * (link.periods - 1)
            if excess > 0:
                stalls[link.port()] = stalls.get(link.port(), 0) + math.ceil(excess)
            busy[link.port()] = busy.get(link.port(), 0.0) + link.elements * link.bits / link.bandwidth() / period
    stall = max(stalls.values(), default=0)

    def once(link: Link) -> int:
        spare = max(0.0, 1.0 - busy.get(link.port(), 0.0)) * (temporal + stall)
        least = math.ceil(min(link.elements, link.first) * link.bits / link.bandwidth())
        return max(least, math.ceil(link.cycles() - spare))

    steps: dict[tuple[str, int], int] = {}
    ports: dict[str, set] = {}
    for link in links:
        if link.periods == 1 and (link.operand == "O") == (link.direction in ("th", "fl")) and link.step > 0:
            key = (link.operand, link.step)
            steps[key] = max(steps.get(key, 0), once(link))
            ports.setdefault(link.operand, set()).add(link.port())
    loads = [sum(c for (op, _), c in steps.items() if op == operand) for operand in ("W", "I")]
    separate = not (ports.get("W", set()) & ports.get("I", set()))
    onload = max(loads) if separate else sum(loads)
    offload = sum(c for (op, _), c in steps.items() if op == "O")
    return stall, onload, offload, {f"{name}.{kind}": cycles for (name, kind), cycles in stalls.items()}
