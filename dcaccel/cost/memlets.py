"""A mapped layer's per-level traffic counted from the memlets of the program that realises the mapping.

:mod:`dcaccel.cost.evaluate` counts a mapping's accesses with closed-form rules over the loop nest. This module
counts them from a DaCe program instead, as the DAG's volumes are counted (:mod:`dcaccel.dag.volume`):

- :func:`tiled_sdfg` realises the mapping's temporal tiling and loop order on the layer: one map per temporal
  loop, nested in the mapping's order (the outermost loop outermost), around one multiply-accumulate tasklet
  whose memlets are the operands' affine indices (a loop split into several temporal loops indexes with
  ``Σ piece · stride``); DaCe's memlet propagation over each scope's maps together gives the subset of every
  operand the scope touches;
- a level of an operand holding the innermost ``b`` temporal loops is local storage at the scope of those
  loops, hoisted over the loops just outside it whose parameters the operand's memlet does not use (the
  tile stays while they iterate: stationarity); what crosses the level's boundary is the subset entering
  that scope, once per iteration of the maps outside it — the copy ``InLocalStorage`` /
  ``OutLocalStorage`` put there;
- weights and inputs are read from the upper level and written into the lower one; outputs are written up
  at every exit of their scope and read back at every entry but the first touch of each element (the
  volume crossing less the elements of the whole output), read from the lower level when they go up and
  written into it when they come back; the MAC units keep no partial sum (every MAC writes the output to
  the innermost output memory, its scope is never hoisted), as the closed form counts it.

:func:`memlet_traffic` returns the elements read and written per (memory, operand), the table
:func:`dcaccel.cost.evaluate.evaluate` gives as ``traffic``; :func:`enumerated_traffic` is the arbiter:
it walks every iteration of the nest, keeps at each level the set of elements its scope touches and counts
a transfer each time that set changes. Spatial unrolling is not realised here (a mapping with one is
refused): the array is one unit.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import dace
import pandas as pd
from dace.sdfg import propagation
from dace.transformation.dataflow import InLocalStorage, OutLocalStorage

from dcaccel.cost.evaluate import LayerMapping
from dcaccel.cost.hierarchy import Hierarchy
from dcaccel.cost.nest import OPERANDS, LayerNest
from dcaccel.dag import volume
from dcaccel.errors import DcaccelError

#: The data container of each operand in the realised program.
CONTAINERS = {"W": "weights", "I": "inputs", "O": "outputs"}

#: (memory, operand) -> (elements read, elements written), as ``evaluate(...).traffic`` gives them.
TrafficTable = dict[tuple[str, str], tuple[int, int]]


def _pieces(nest: LayerNest, mapping: LayerMapping) -> list[tuple[str, str, int, int]]:
    """The temporal loops innermost first as (map parameter, loop, factor, stride within the loop)."""
    if mapping.spatial:
        raise DcaccelError(f"mapping of {nest.name}: spatial unrolling is not realised as memlets (one unit only)")
    strides: dict[str, int] = {}
    pieces = []
    for position, (loop, factor) in enumerate(mapping.temporal):
        if loop not in nest.loops:
            raise DcaccelError(f"mapping of {nest.name}: temporal loop {loop} is not a loop of the layer")
        stride = strides.get(loop, 1)
        pieces.append((f"{loop.lower()}_{position}", loop, factor, stride))
        strides[loop] = stride * factor
    for loop, extent in nest.loops.items():
        if strides.get(loop, 1) != extent:
            raise DcaccelError(
                f"mapping of {nest.name}: loop {loop} has temporal factors covering {strides.get(loop, 1)} "
                f"of its {extent} iterations (the program needs exact tiles)"
            )
    return pieces


def _memlet(nest: LayerNest, operand: str, pieces, wcr: str | None = None) -> dace.Memlet:
    """The tasklet's access to ``operand``: each index Σ coefficient · (Σ stride · piece) of the map parameters."""
    value = {loop: 0 for loop in nest.loops}
    for param, loop, _, stride in pieces:
        value[loop] += stride * dace.symbolic.symbol(param)
    point = [sum(coefficient * value[loop] for loop, coefficient in index) for index in nest.accesses[operand]]
    subset = dace.subsets.Range([(index, index, 1) for index in point])
    return dace.Memlet(data=CONTAINERS[operand], subset=subset, wcr=wcr)


def _shape(nest: LayerNest, operand: str) -> list[int]:
    return [1 + sum(abs(c) * (nest.loops[loop] - 1) for loop, c in index) for index in nest.accesses[operand]]


def tiled_sdfg(nest: LayerNest, mapping: LayerMapping) -> dace.SDFG:
    """The layer as nested maps, one per temporal loop of ``mapping`` (outermost last in ``temporal``),
    around ``outputs += weights · inputs``, each memlet the exact subset its scope touches
    (:func:`_exact_subsets`)."""
    pieces = _pieces(nest, mapping)
    sdfg = dace.SDFG(f"tiled_{''.join(c if c.isalnum() else '_' for c in nest.name)}")
    for operand in OPERANDS:
        sdfg.add_array(CONTAINERS[operand], _shape(nest, operand), dace.float64)
    state = sdfg.add_state("layer")
    entries, exits = [], []
    for param, _, factor, _ in reversed(pieces):
        entry, exit_ = state.add_map(f"map_{param}", {param: f"0:{factor}"})
        entries.append(entry)
        exits.insert(0, exit_)
    tasklet = state.add_tasklet("mac", {"w": None, "i": None}, {"o": None}, "o = w * i")  # one connector per operand
    for operand, connector in (("W", "w"), ("I", "i")):
        memlet = _memlet(nest, operand, pieces)
        state.add_memlet_path(state.add_read(CONTAINERS[operand]), *entries, tasklet, dst_conn=connector, memlet=memlet)
    memlet = _memlet(nest, "O", pieces, wcr="lambda a, b: a + b")
    state.add_memlet_path(tasklet, *exits, state.add_write(CONTAINERS["O"]), src_conn="o", memlet=memlet)
    propagation.propagate_memlets_sdfg(sdfg)
    _exact_subsets(sdfg, tasklet)
    return sdfg


def _tasklet(state: dace.SDFGState) -> dace.nodes.Tasklet:
    return next(node for node in state.nodes() if isinstance(node, dace.nodes.Tasklet))


def _tasklet_edge(state: dace.SDFGState, tasklet, operand: str):
    """The edge of ``operand`` at the tasklet (its connector is the operand's name in lower case)."""
    connector = operand.lower()
    return next(
        e for e in [*state.in_edges(tasklet), *state.out_edges(tasklet)] if connector in (e.dst_conn, e.src_conn)
    )


def _path(state: dace.SDFGState, tasklet, operand: str) -> list:
    """The edges of ``operand``'s memlet path from the tasklet outwards."""
    path = state.memlet_path(_tasklet_edge(state, tasklet, operand))
    return list(reversed(path)) if operand != "O" else path


def _exact_subsets(sdfg: dace.SDFG, tasklet) -> None:
    """Give every edge of each operand's path the tasklet's memlet propagated over all the maps it leaves
    together, as over one tiled map. DaCe's map-by-map propagation widens a strided window once an enclosing
    map does not index it (``fy + 2·oy`` over ``oy`` is three rows of five, then five after a map over
    ``ox``); propagating over a scope's parameters at once keeps it exact."""
    state = sdfg.start_state
    for operand in OPERANDS:
        path = _path(state, tasklet, operand)
        params, ranges = [], []
        for edge in path[1:]:  # edge k enters (leaves) the k-th innermost map
            entry = state.entry_node(edge.src) if operand == "O" else edge.dst
            params.extend(entry.map.params)
            ranges.extend(entry.map.range.ranges)
            array = sdfg.arrays[CONTAINERS[operand]]
            edge.data.subset = propagation.propagate_subset(
                [path[0].data], array, params, dace.subsets.Range(ranges)
            ).subset


def scope_tiles(sdfg: dace.SDFG, operand: str) -> list[int]:
    """Elements of ``operand`` one iteration of the maps outside each scope touches, innermost scope first
    (``0``: the tasklet's element; the last: the whole access), read from the memlets of :func:`tiled_sdfg`."""
    state = sdfg.start_state
    return [covered(edge.data.subset) for edge in _path(state, _tasklet(state), operand)]


def covered(subset: dace.subsets.Range) -> int:
    """Elements a propagated subset covers. Propagating a sliding window (``2·ox + fx``) gives a strided range
    of overlapping tiles (``0:7:2:3``, starts 0, 2, 4 of 3 columns) whose ``num_elements`` counts every tile in
    full (12); the tiles cover at most the range's span (7): per dimension the smaller of the two."""
    extents = []
    for (begin, end, _), size in zip(subset.ranges, subset.size(), strict=True):
        span = volume.concrete(volume.as_expr(end) - begin + 1)
        extents.append(min(span, volume.concrete(volume.as_expr(size))))
    return volume.product(extents)


def _relevant(sdfg: dace.SDFG, operand: str, pieces) -> list[bool]:
    """Per temporal loop, innermost first: whether its map parameter appears in the operand's memlet."""
    state = sdfg.start_state
    memlet = _tasklet_edge(state, _tasklet(state), operand).data
    used = {str(symbol) for symbol in memlet.subset.free_symbols}
    return [param in used for param, *_ in pieces]


def _hoisted(relevant: list[bool], bound: int) -> int:
    while bound < len(relevant) and not relevant[bound]:
        bound += 1
    return bound


@dataclass(frozen=True)
class Realised:
    """The tiled program with a local-storage transient per level: ``storage`` maps (memory, operand) to the
    transient that holds the level's tile (memory ``None``: the unit's input register); the outermost level
    is the operand's array itself."""

    sdfg: dace.SDFG
    storage: Mapping[tuple[str | None, str], str]
    outputs: int  # elements of the whole output


def realise(nest: LayerNest, hierarchy: Hierarchy, mapping: LayerMapping) -> Realised:
    """:func:`tiled_sdfg` with each operand's levels realised as local storage at their scopes (see the
    module's rules): ``InLocalStorage`` between the two maps a weight or input level lies between,
    ``OutLocalStorage`` (what ``AccumulateTransient`` applies, without initialisation) for outputs. Levels
    holding the same loops share one transient (the same tile)."""
    pieces = _pieces(nest, mapping)
    sdfg = tiled_sdfg(nest, mapping)
    state = sdfg.start_state
    tasklet = _tasklet(state)
    outputs = scope_tiles(sdfg, "O")[-1]
    storage = {}
    for operand in OPERANDS:
        levels = hierarchy.levels(operand)
        bounds = mapping.boundaries[operand]
        if len(bounds) != len(levels):
            raise DcaccelError(f"mapping: operand {operand} has {len(levels)} levels, {len(bounds)} bounds")
        relevant = _relevant(sdfg, operand, pieces)
        scopes = {
            memory.name: _hoisted(relevant, bound) for memory, bound in zip(levels[:-1], bounds[:-1], strict=True)
        }
        if operand != "O":  # the unit's register keeps an input while the innermost loops not indexing it run
            scopes[None] = _hoisted(relevant, 0)
        placed: dict[int, str] = {}
        for scope in sorted(set(scopes.values()), reverse=True):  # outermost first: inner paths stay in place
            edge = _path(state, tasklet, operand)[scope]
            transformation = OutLocalStorage if operand == "O" else InLocalStorage
            node = transformation.apply_to(
                sdfg,
                options={"array": edge.data.data, "prefix": f"scope{scope}_"},
                verify=False,
                save=False,
                node_a=edge.src,
                node_b=edge.dst,
            )
            placed[scope] = node.data
        storage.update({(memory, operand): placed[scope] for memory, scope in scopes.items()})
    return Realised(sdfg, storage, outputs)


def _crossing(state: dace.SDFGState, edge, node) -> int:
    """Elements ``edge`` moves over the program: its subset once per iteration of the maps around ``node``."""
    iterations, scope = 1, state.scope_dict()[node]
    while scope is not None:
        iterations *= volume.concrete(volume.as_expr(scope.map.range.num_elements()))
        scope = state.scope_dict()[scope]
    return covered(edge.data.subset) * iterations


def copies(realised: Realised, memory: str | None, operand: str) -> int:
    """Elements copied into (weights, inputs) or out of (outputs) the local storage of ``operand`` at
    ``memory`` over the whole program (outputs at memory ``None``: what the tasklet writes, every MAC)."""
    state = realised.sdfg.start_state
    if operand == "O" and memory is None:
        tasklet = _tasklet(state)
        return _crossing(state, _tasklet_edge(state, tasklet, operand), tasklet)
    data = realised.storage[(memory, operand)]
    node = next(n for n in state.data_nodes() if n.data == data)
    (edge,) = state.out_edges(node) if operand == "O" else state.in_edges(node)
    return _crossing(state, edge, node)


def _charge(counts: dict, lower: str | None, upper: str, operand: str, crossing: int, back: int) -> None:
    """Add one crossing between two levels (``lower`` None: the units): a weight or input is read above and
    written below; an output is written above and read below, and ``back`` of its elements (partial sums
    revisited) are read above and written below."""
    above = counts.setdefault((upper, operand), [0, 0])
    below = counts.setdefault((lower, operand), [0, 0]) if lower is not None else [0, 0]
    if operand != "O":
        above[0] += crossing
        below[1] += crossing
        return
    above[1] += crossing
    above[0] += back
    below[0] += crossing
    below[1] += back


def memlet_traffic(nest: LayerNest, hierarchy: Hierarchy, mapping: LayerMapping) -> TrafficTable:
    """(memory, operand) -> (elements read, elements written), counted from the copies into and out of the
    local storage of :func:`realise` (see the module's rules)."""
    realised = realise(nest, hierarchy, mapping)
    counts: dict[tuple[str, str], list[int]] = {}
    for operand in OPERANDS:
        names = (None, *(memory.name for memory in hierarchy.levels(operand)))
        for lower, upper in itertools.pairwise(names):
            crossing = copies(realised, lower, operand)
            _charge(counts, lower, upper, operand, crossing, crossing - realised.outputs)
    return {key: tuple(value) for key, value in counts.items()}


def enumerated_traffic(nest: LayerNest, hierarchy: Hierarchy, mapping: LayerMapping) -> TrafficTable:
    """The same table by walking the nest: at each level the set of elements the current iteration of its
    scope touches; when the set changes, the new one is loaded in full (outputs: the old one written up,
    the new one's elements touched before read back). It visits every iteration once per level: tiny layers
    only."""
    pieces = _pieces(nest, mapping)
    counts: dict[tuple[str, str], list[int]] = {}
    order = list(reversed(pieces))  # outermost first: itertools.product varies the last fastest

    def element(operand, values):
        loop_value = {loop: 0 for loop in nest.loops}
        for (_, loop, _, stride), value in zip(pieces, values, strict=True):
            loop_value[loop] += stride * value
        return tuple(sum(c * loop_value[loop] for loop, c in index) for index in nest.accesses[operand])

    for operand in OPERANDS:
        levels = hierarchy.levels(operand)
        names = (None, *(memory.name for memory in levels))
        for step, bound in enumerate((0, *mapping.boundaries[operand][:-1])):
            outer = order[: len(order) - bound]
            inner = order[len(order) - bound :]
            held, seen = None, set()
            for outer_values in itertools.product(*(range(f) for _, _, f, _ in outer)):
                tile = frozenset(
                    element(operand, tuple(reversed(outer_values + inner_values)))
                    for inner_values in itertools.product(*(range(f) for _, _, f, _ in inner))
                )
                if tile == held and not (operand == "O" and step == 0):
                    continue
                held = tile
                _charge(counts, names[step], names[step + 1], operand, len(tile), len(tile & seen))
                seen |= tile
    return {key: tuple(value) for key, value in counts.items()}


def closed_form_traffic(cost_traffic: Mapping) -> TrafficTable:
    """``evaluate(...).traffic`` as the same (memory, operand) -> (read, written) elements table."""
    return {key: (t.read_elements, t.write_elements) for key, t in cost_traffic.items()}


def traffic_frame(**tables: TrafficTable) -> pd.DataFrame:
    """The tables side by side: one row per (memory, operand), ``<name>_read`` / ``<name>_written`` columns
    per table (a table without the pair: 0)."""
    keys = sorted({key for table in tables.values() for key in table})
    rows = []
    for memory, operand in keys:
        row = {"memory": memory, "operand": operand}
        for name, table in tables.items():
            read, written = table.get((memory, operand), (0, 0))
            row[f"{name}_read"], row[f"{name}_written"] = read, written
        rows.append(row)
    return pd.DataFrame(rows)
