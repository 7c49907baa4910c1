"""What the learned cost models read of a task: hand features of its scope and a token sequence of its IR.

A *step* of a lowered program is a top-level map scope (a task, or a task map whose iterations are tasks)
or a copy between two containers (a DAG edge). Its features come from the step as
:mod:`dcaccel.dag.scopes` reads it (memlet volumes in and out of the whole scope, MACs and other operations
counted from the tasklets by :mod:`dcaccel.dag.arithmetic`, which containers are buffers) and from the map
scope in the SDFG (iterations of the outermost map, nesting depth, element types, how many innermost
accesses run along the innermost loop, i.e. at unit stride, and that loop's iterations, the largest stride
in bytes and the power of two in it, whether a copy's two containers have one shape, how many elements its
writes update atomically), from where a window of
its accesses misses in this machine's caches and TLBs (:data:`CACHE`, :mod:`~dcaccel.costmodel.cachesim`)
and from its place in the program (how many bytes the whole program moves: :data:`CONTEXT`), and whether
the compiler vectorises the loop around its tasklets (``vector_loop``, :func:`_vector_loop`).
All are numbers (:data:`NUMERIC`)
except the op and the implementation (:data:`CATEGORICAL`); the models also read ratios of them
(:data:`DERIVED`).

The tokens are the scope as text, the seed paper's view of the IR: every map (``MAP``, its dimensions,
its range sizes as powers of two), every memlet (``MEM``, the kind of its container, its volume and the
stride in bytes of its access as powers of two, ``WCR``), every tasklet's code with the names normalised
(its inputs ``IN``, outputs ``OUT``, other names ``VAR``; calls keep their name: ``exp``, ``max``), in
DaCe's topological order of the scope.
"""

from __future__ import annotations

import io
import math
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass

import dace
import numpy as np
import sympy
from dace.sdfg import nodes as dnodes

from dcaccel.costmodel import cachesim
from dcaccel.dag import volume as vol
from dcaccel.dag.arithmetic import code_shape
from dcaccel.dag.scopes import Access, Container, Copy, TaskScope
from dcaccel.errors import DcaccelError

#: Features that are names (encoded by the models, never ordered).
CATEGORICAL = ("kind", "op", "implementation")
#: Numeric features of a step's place in its program (:func:`program_context`): the bytes all the program's
#: steps move in one call, the data that competes with the step's own for the caches (on the shipped set it
#: lowered the boosted model's task MAPE from 0.439 to 0.375; the bytes moved since the step's containers were
#: last touched, tried beside it, did not help: docs/costmodel.md).
CONTEXT = ("program_bytes",)
#: Numeric features of where a step's accesses hit: each level's misses per access of a window of them
#: (:mod:`~dcaccel.costmodel.cachesim`).
CACHE = tuple(f"{level.name}_misses" for level in cachesim.LEVELS)
#: Numeric features that are -1 where they could not be read (a window of accesses, an innermost loop whose
#: range moves with an enclosing one): missing to the models.
UNREAD = ("inner_iterations", *CACHE)
#: Numeric features, in the order the models read them.
NUMERIC = (
    "iterations",
    "depth",
    "volume_in",
    "volume_out",
    "elements_in",
    "elements_out",
    "bytes_in",
    "bytes_out",
    "reads",
    "writes",
    "macs",
    "ops",
    "work",
    "buffers_in",
    "buffers_out",
    "accumulate",
    "atomic_writes",
    "itemsize",
    "unit_stride",
    "tasklets",
    "inner_iterations",
    "stride_bytes",
    "stride_twos",
    "same_shape",
    "vector_loop",
    *CACHE,
    *CONTEXT,
)
#: Ratios of the numeric features the models also read (a tree splits on one feature at a time and cannot
#: form them): arithmetic and iterations per element of work, distinct elements per access in and out
#: (reuse), bytes moved and distinct bytes touched (footprint), and accesses per iteration.
DERIVED = (
    "macs_per_work",
    "ops_per_work",
    "iterations_per_work",
    "reuse_in",
    "reuse_out",
    "bytes_per_work",
    "footprint",
    "work_per_iteration",
    "in_per_iteration",
    "out_per_iteration",
)
#: The most iterations of a loop in a tasklet's code that gcc unrolls completely (its parameter
#: ``max-completely-peel-times``): the map loop around it is then the innermost (:func:`_vector_loop`).
PEELED = 16
#: The fewest iterations of an innermost map loop counted as vectorised (fewer fill no vector of floats).
LEAST_LANES = 4
#: The functions a tasklet may call in a loop the compiler vectorises: these have vector instructions
#: (``sqrt`` under DaCe's ``-fno-math-errno``); without ``-ffast-math`` it calls ``expf`` or ``erff`` one element
#: at a time.
LANE_CALLS = frozenset({"min", "max", "abs", "fabs", "fmin", "fmax", "sqrt"})
#: Longest token sequence kept of a scope (the rest is cut).
MAX_TOKENS = 256


def _number(value) -> float:
    """A concrete count as a float (a step of a program whose sizes are all given is concrete)."""
    value = vol.concrete(value)
    if vol.is_symbolic(value):
        raise ValueError(f"costmodel: count {value} has free sizes; measure a program with every size given")
    return float(value)


def _sum(accesses: tuple[Access, ...], field: str) -> float:
    return sum(_number(getattr(access, field)) for access in accesses)


def _bytes(accesses: tuple[Access, ...], sdfg: dace.SDFG) -> float:
    return sum(_number(access.volume) * sdfg.arrays[access.data].dtype.bytes for access in accesses)


def _buffers(accesses: tuple[Access, ...], containers: Mapping[str, Container]) -> float:
    return float(sum(containers[access.data].is_buffer for access in accesses if access.data in containers))


def bucket(value: float) -> int:
    """``value`` as its power of two (rounded), the coarse size tokens carry; 0 for values below 1."""
    return 0 if value < 1 else round(math.log2(value))


@dataclass(frozen=True)
class StepPlace:
    """Where a step is in its program: the SDFG, the state, the map entry (None for a copy), the
    containers as :mod:`dcaccel.dag.scopes` read them, the values of the program's sizes and what code
    generation makes of the step: for a copy, the implementation DaCe's copy node chooses (``MemcpyCPU`` a
    call of ``memcpy``, ``MappedTasklet`` a parallel map, ``Tasklet`` one element), for a map, the
    containers it updates atomically (:func:`~dcaccel.costmodel.measure.atomic_containers`)."""

    sdfg: dace.SDFG
    state: dace.SDFGState
    scope: dnodes.MapEntry | None
    containers: Mapping[str, Container]
    symbols: Mapping[str, int]
    copy_implementation: str | None = None  # None for a map
    atomic: frozenset[str] = frozenset()  # empty for a copy, and for a map without atomic writes

    def size(self, value) -> float | None:
        """A size of the SDFG with the program's sizes given; None when it depends on map parameters."""
        expr = vol.as_expr(dace.symbolic.pystr_to_symbolic(value) if isinstance(value, str) else value)
        expr = expr.subs({sym: self.symbols[str(sym)] for sym in expr.free_symbols if str(sym) in self.symbols})
        return None if expr.free_symbols else float(expr)


def step_features(step: TaskScope | Copy, place: StepPlace) -> dict[str, float | str]:
    """The features of ``step`` at ``place``."""
    sdfg, containers = place.sdfg, place.containers
    if isinstance(step, Copy):
        volume = _number(step.dst.volume)
        itemsize = sdfg.arrays[step.dst.data].dtype.bytes
        return {
            "kind": "copy",
            "op": "Copy",
            "implementation": place.copy_implementation,
            **dict.fromkeys(NUMERIC, 0.0),
            "iterations": 1.0,
            "volume_in": volume,
            "volume_out": volume,
            "elements_in": _number(step.src.elements),
            "elements_out": _number(step.dst.elements),
            "bytes_in": volume * sdfg.arrays[step.src.data].dtype.bytes,
            "bytes_out": volume * itemsize,
            "reads": 1.0,
            "writes": 1.0,
            "work": volume,
            "buffers_in": _buffers((step.src,), containers),
            "buffers_out": _buffers((step.dst,), containers),
            "itemsize": float(itemsize),
            "unit_stride": float(_contiguous(step.src, place) and _contiguous(step.dst, place)),
            **_stride_features([_copy_stride(access, place) for access in (step.src, step.dst)]),
            "same_shape": float(_shape(step.src.data, place) == _shape(step.dst.data, place)),
            **_cache_features(_copy_window(step, place)),
        }
    reads, writes = step.whole_reads, step.whole_writes
    volume_in, volume_out = _sum(reads, "volume"), _sum(writes, "volume")
    depth, tasklets, unit, accesses, strides, trip = _scope_shape(place)
    return {
        "kind": "map",
        "op": step.info.op or "none",
        "implementation": step.info.implementation or "none",
        "iterations": math.prod(place.size(size) or 1.0 for size in place.scope.map.range.size()),
        "depth": float(depth),
        "volume_in": volume_in,
        "volume_out": volume_out,
        "elements_in": _sum(reads, "elements"),
        "elements_out": _sum(writes, "elements"),
        "bytes_in": _bytes(reads, sdfg),
        "bytes_out": _bytes(writes, sdfg),
        "reads": float(len(reads)),
        "writes": float(len(writes)),
        "macs": _number(step.whole_arithmetic.macs),
        "ops": _number(step.whole_arithmetic.ops),
        "work": max(volume_in, volume_out),
        "buffers_in": _buffers(reads, containers),
        "buffers_out": _buffers(writes, containers),
        "accumulate": float(any(access.accumulate for access in writes)),
        # the writes that code generation makes atomic (measure.atomic_containers), their whole volume
        "atomic_writes": float(sum(_number(a.volume) for a in writes if a.accumulate and a.data in place.atomic)),
        "itemsize": float(max((sdfg.arrays[a.data].dtype.bytes for a in (*reads, *writes)), default=0)),
        "unit_stride": unit / accesses if accesses else 0.0,
        "tasklets": float(tasklets),
        "inner_iterations": trip,
        **_stride_features(strides),
        "same_shape": 0.0,
        "vector_loop": _vector_loop(place),
        **_cache_features(_map_window(place)),
    }


def program_context(features: list[Mapping[str, float | str]]) -> dict[str, float]:
    """The :data:`CONTEXT` features of the steps of one program, from their own features (every map and copy
    of the program, in any order): the bytes the program moves in one call."""
    return {"program_bytes": float(sum(f["bytes_in"] + f["bytes_out"] for f in features))}


def _contiguous(access: Access, place: StepPlace) -> bool:
    """Whether a copy's access runs over whole rows of its container (the innermost dimension complete)."""
    shape = place.sdfg.arrays[access.data].shape
    return len(shape) <= 1 or _number(access.end[-1] - access.begin[-1] + 1) == place.size(shape[-1])


def _scope_shape(place: StepPlace) -> tuple[int, int, int, int, list[float | None], float]:
    """The nesting depth of the maps of the place's scope, its tasklets, of its tasklets' accesses those
    whose last index moves with the innermost loop (:func:`_innermost_loop`: they run along their
    container's last dimension), all of them, and each one's stride in bytes (:func:`_access_stride`: a
    different fact; an access to a column of one element runs along no last dimension and moves one element
    at a time), and the most iterations of an innermost loop (-1 when one is not a constant: unread)."""
    state, entry = place.state, place.scope
    scope_dict = state.scope_dict()
    depth, tasklets, unit, accesses, strides, trips = 1, 0, 0, 0, [], [1.0]
    for node in state.scope_subgraph(entry).nodes():
        enclosing = _enclosing_maps(scope_dict, node)
        if isinstance(node, dnodes.MapEntry):
            depth = max(depth, len(enclosing) + 1)
        if not isinstance(node, dnodes.Tasklet):
            continue
        tasklets += 1
        innermost, iterations, _ = _innermost_loop(enclosing, place)
        trips.append(iterations)
        for memlet in _accessing((*state.in_edges(node), *state.out_edges(node))):
            accesses += 1
            last = memlet.subset.ranges[-1][0]
            unit += innermost is not None and innermost in {str(s) for s in dace.symbolic.symlist(last)}
            strides.append(_access_stride(memlet, innermost, place))
    return depth, tasklets, unit, accesses, strides, -1.0 if None in trips else max(trips)


def _innermost_loop(
    enclosing: list[dnodes.MapEntry], place: StepPlace
) -> tuple[str | None, float | None, float | None]:
    """The innermost loop around a tasklet (``enclosing``: its maps, innermost first): the innermost map
    parameter that takes more than one value (a parameter of one value is no loop: the compiler runs the
    loop around it), its number of iterations (None when its range moves with an enclosing parameter,
    which counts as a loop) and its step (None when not a constant); (None, 1, 1) when every parameter
    takes one value."""
    for entry in enclosing:
        ranges = list(zip(entry.map.params, entry.map.range.size(), entry.map.range.ranges, strict=True))
        for param, size, (_, _, step) in reversed(ranges):
            iterations = place.size(size)
            if iterations != 1:
                return param, iterations, place.size(step)
    return None, 1.0, 1.0


def _vector_loop(place: StepPlace) -> float:
    """1.0 when the compiler vectorises the loop around every tasklet of the place's scope, by gcc's rules as
    this rule reads them, else 0.0. A loop in a tasklet's code (a dot product's) of at most :data:`PEELED`
    iterations is unrolled completely; a longer one stays the innermost loop, and a sum the compiler may not
    reorder is not vectorised (gcc's limit on the size of what it unrolls is not modelled). Past them, the
    innermost map loop
    (:func:`_innermost_loop`; one whose range moves with an enclosing parameter counts as long enough) is
    vectorised when it runs at least :data:`LEAST_LANES` iterations, the tasklet has no ``if`` statement (a
    branch the compiler would have to turn into a select) and calls no function but :data:`LANE_CALLS`, and
    per iteration (the map's step counted) every read moves by at most one element, forwards or backwards
    (0: the same element for every lane), and every write by exactly one, forwards or backwards; a memlet's
    first element stands for the tasklet's access
    (its own subscripts are not read). A scope with a nested SDFG, or a tasklet not in Python, is not read:
    0.0 (a direct convolution's C++ tasklet indexes its whole input by subscripts of its own, which no memlet
    shows; gcc unrolled the 16 and 9 iterations of convs' 1x1 and depthwise 3x3 ones and vectorised neither).
    An LMV of 16-element dot products over rows of 256 runs at 0.017 ns a unit on this machine; of 27-element
    ones over rows of 1,024, 1.07 (docs/costmodel.md, "The vector loop")."""
    state = place.state
    scope_dict = state.scope_dict()
    tasklets = _readable_tasklets(place)
    if tasklets is None:
        return 0.0
    for tasklet in tasklets:
        if tasklet.code.language != dace.dtypes.Language.Python:
            return 0.0
        shape = code_shape(tasklet.label, tasklet.code.as_string)
        trips = [place.size(trip) for trip in shape.trips]
        if None in trips or max(trips, default=0) > PEELED or shape.branches or not shape.calls <= LANE_CALLS:
            return 0.0
        innermost, iterations, step = _innermost_loop(_enclosing_maps(scope_dict, tasklet), place)
        if innermost is None or (iterations is not None and iterations < LEAST_LANES):
            return 0.0
        for edges, allowed in ((state.in_edges(tasklet), {0.0, 1.0}), (state.out_edges(tasklet), {1.0})):
            for memlet in _accessing(edges):
                moves = _moves(memlet, innermost, place)
                if moves is None or step is None or abs(moves * step) not in allowed:
                    return 0.0
    return 1.0


def _readable_tasklets(place: StepPlace) -> list[dnodes.Tasklet] | None:
    """The tasklets of the map scope at ``place`` in DaCe's topological order; None when it holds none, or a
    nested SDFG (whose accesses and code are not read)."""
    scope = list(dace.sdfg.utils.dfs_topological_sort(place.state.scope_subgraph(place.scope)))
    tasklets = [node for node in scope if isinstance(node, dnodes.Tasklet)]
    return None if not tasklets or any(isinstance(node, dnodes.NestedSDFG) for node in scope) else tasklets


def _accessing(edges) -> list[dace.Memlet]:
    """The memlets of ``edges`` that access data (not empty, with a subset)."""
    return [edge.data for edge in edges if not edge.data.is_empty() and edge.data.subset is not None]


def _shape(data: str, place: StepPlace) -> tuple[float | None, ...]:
    return tuple(place.size(size) for size in place.sdfg.arrays[data].shape)


def _access_stride(memlet: dace.Memlet, innermost: str | None, place: StepPlace) -> float | None:
    """The distance in bytes between neighbouring elements of a tasklet's access: along the innermost
    dimension of the subset with more than one element, else (one element per iteration) between the
    elements of consecutive values of the innermost map parameter (a map's step not counted); None when it is
    not a constant."""
    desc = place.sdfg.arrays[memlet.data]
    ranges = memlet.subset.ranges
    wide = [d for d, size in enumerate(memlet.subset.size()) if place.size(size) != 1]
    if wide:
        elements = place.size(vol.as_expr(desc.strides[wide[-1]]) * vol.as_expr(ranges[wide[-1]][2]))
    elif innermost is None:
        return 0.0
    else:
        elements = _moves(memlet, innermost, place)
    return None if elements is None else abs(elements) * desc.dtype.bytes


def _moves(memlet: dace.Memlet, parameter: str, place: StepPlace) -> float | None:
    """How many elements the first element of a tasklet's access moves as the map parameter ``parameter``
    grows by one (0: it does not move with it; a map's step multiplies it per iteration); None when that is
    not a constant."""
    desc = place.sdfg.arrays[memlet.data]
    symbol = dace.symbolic.symbol(parameter)
    elements = sum(
        (
            vol.as_expr(begin).diff(symbol) * vol.as_expr(stride)
            for (begin, _, _), stride in zip(memlet.subset.ranges, desc.strides, strict=True)
        ),
        sympy.Integer(0),
    )
    elements = place.size(elements)
    return None if elements is None else abs(elements)


def _copy_stride(access: Access, place: StepPlace) -> float | None:
    """The distance in bytes between neighbouring elements of a copy's side (innermost dimension of more than
    one element)."""
    desc = place.sdfg.arrays[access.data]
    wide = [d for d, (b, e) in enumerate(zip(access.begin, access.end, strict=True)) if _number(e - b) != 0]
    if not wide:
        return 0.0
    elements = place.size(desc.strides[wide[-1]])
    return None if elements is None else elements * desc.dtype.bytes


def _stride_features(strides: list[float | None]) -> dict[str, float]:
    """``stride_bytes``, the largest constant stride of the accesses, and ``stride_twos``, how many times 2
    divides it (a large power of two puts the accessed elements into the same cache sets)."""
    largest = int(max((s for s in strides if s is not None), default=0))
    return {
        "stride_bytes": float(largest),
        "stride_twos": float((largest & -largest).bit_length() - 1 if largest else 0),
    }


def _cache_features(addresses: np.ndarray | None) -> dict[str, float]:
    """The :data:`CACHE` features of a window of a step's accesses (:func:`_map_window`, :func:`_copy_window`);
    -1 each when the window could not be read."""
    if addresses is None:
        return dict.fromkeys(CACHE, -1.0)
    rates = cachesim.miss_rates(addresses)
    return {f"{name}_misses": rate for name, rate in rates.items()}


#: How :func:`sympy.lambdify` evaluates DaCe's integer functions on arrays (``CMod`` is C's ``%``: ``i % n`` in
#: a memlet's index).
_INDEX_FUNCTIONS = {
    "__int_floor": np.floor_divide,
    "int_floor": np.floor_divide,
    "int_ceil": lambda a, b: -(-a // b),
    "CMod": np.fmod,
}
#: The operations of an index the window evaluates: SymPy's that numpy has, and :data:`_INDEX_FUNCTIONS`; an
#: index with any other (a bitwise operation, a condition) leaves the window unread.
_INDEX_OPERATIONS = frozenset({"Add", "Mul", "Pow", "Max", "Min", "Mod", "floor", "ceiling", "Abs", *_INDEX_FUNCTIONS})


def _map_window(place: StepPlace) -> np.ndarray | None:
    """The addresses of the first :data:`~dcaccel.costmodel.cachesim.WINDOW` accesses of the map scope at
    ``place``: for each tasklet (in topological order, an equal share of the window each), its enclosing
    maps' loops (parameters in the order DaCe nests them) and its memlets (reads, then writes), each
    container at its own place (:func:`~dcaccel.costmodel.cachesim.container_base`); None when a loop's
    range is not a constant, when an index is not a function of the enclosing parameters and the program's
    sizes that numpy can evaluate (:data:`_INDEX_OPERATIONS`), when a memlet is dynamic (it may touch any
    element of its subset, or none) or has a dimension of no elements, when the scope holds no tasklet or a
    nested SDFG (whose accesses are not listed), and when its loops run no iteration."""
    state = place.state
    scope_dict = state.scope_dict()
    tasklets = _readable_tasklets(place)
    if tasklets is None:
        return None
    memlets = {tasklet: _accessing((*state.in_edges(tasklet), *state.out_edges(tasklet))) for tasklet in tasklets}
    names = sorted({memlet.data for accessed in memlets.values() for memlet in accessed})
    bases = {name: cachesim.container_base(index) for index, name in enumerate(names)}
    windows = []
    for tasklet in tasklets:
        maps = _enclosing_maps(scope_dict, tasklet)[::-1]
        params = [param for entry in maps for param in entry.map.params]
        loops = []
        for entry in maps:
            for (begin, _, step), count in zip(entry.map.range.ranges, entry.map.range.size(), strict=True):
                values = [place.size(value) for value in (begin, step, count)]
                if None in values:
                    return None
                loops.append(cachesim.Loop(*(int(value) for value in values)))
        accesses = [_window_access(memlet, params, bases[memlet.data], place) for memlet in memlets[tasklet]]
        if None in accesses:
            return None
        windows.append(cachesim.access_window(loops, accesses, cachesim.WINDOW // len(tasklets)))
    window = np.concatenate(windows)
    return window if len(window) else None  # a loop of no iterations: no access to read


def _window_access(memlet: dace.Memlet, params: list[str], base: int, place: StepPlace) -> cachesim.Access | None:
    """A tasklet's memlet as a :class:`~dcaccel.costmodel.cachesim.Access` of the loops of ``params``: the
    offset of its first element as a function of them, and the elements of its subset (C order)."""
    desc = place.sdfg.arrays[memlet.data]
    strides = [place.size(stride) for stride in desc.strides]
    sizes = [place.size(size) for size in memlet.subset.size()]
    steps = [place.size(step) for _, _, step in memlet.subset.ranges]
    if None in strides or None in sizes or None in steps or 0 in sizes or memlet.dynamic:
        return None
    pattern = np.zeros(1, dtype=np.int64)
    for size, step, stride in zip(sizes, steps, strides, strict=True):
        size = min(int(size), cachesim.WINDOW)
        pattern = pattern[: -(-cachesim.WINDOW // size)]  # the rows of which the first WINDOW elements come
        pattern = (pattern[:, None] + np.arange(size, dtype=np.int64)[None, :] * int(step * stride)).reshape(-1)
        pattern = pattern[: cachesim.WINDOW]
    first = sum(
        (vol.as_expr(begin) * int(stride) for (begin, _, _), stride in zip(memlet.subset.ranges, strides, strict=True)),
        sympy.Integer(0),
    )
    first = first.subs({sym: place.symbols[str(sym)] for sym in first.free_symbols if str(sym) in place.symbols})
    by_name = {str(sym): sym for sym in first.free_symbols}
    operations = {type(node).__name__ for node in sympy.preorder_traversal(first) if not node.is_Atom}
    if set(by_name) - set(params) or operations - _INDEX_OPERATIONS:
        return None
    arguments = [by_name.get(param, sympy.Symbol(param)) for param in params]
    offset = sympy.lambdify(arguments, first, modules=[_INDEX_FUNCTIONS, "numpy"])
    return cachesim.Access(base, desc.dtype.bytes, offset, pattern)


def _copy_window(step: Copy, place: StepPlace) -> np.ndarray | None:
    """The addresses of the first accesses of a copy: element after element of its volume (C order), a read
    of the source and a write of the destination each, the two containers at their own places."""
    sides = []
    for index, access in enumerate((step.src, step.dst)):
        desc = place.sdfg.arrays[access.data]
        strides = [place.size(stride) for stride in desc.strides]
        begins = [place.size(begin) for begin in access.begin]
        sizes = [place.size(end - begin + 1) for begin, end in zip(access.begin, access.end, strict=True)]
        if None in strides or None in begins or None in sizes or math.prod(sizes) != place.size(access.elements):
            return None  # a side of unknown extent, or with a step (its elements are not all of its extent)
        count = min(math.prod(int(size) for size in sizes), cachesim.WINDOW // 2)
        digits = np.unravel_index(np.arange(count), [int(size) for size in sizes])
        elements = sum(
            (int(begin) + digit) * int(stride) for begin, digit, stride in zip(begins, digits, strides, strict=True)
        )
        sides.append(cachesim.container_base(index) + desc.dtype.bytes * np.asarray(elements, dtype=np.int64))
    count = min(len(side) for side in sides)
    return np.column_stack([side[:count] for side in sides]).reshape(-1)


def _enclosing_maps(scope_dict, node) -> list[dnodes.MapEntry]:
    """The map entries around ``node``, innermost first (a map entry is not its own enclosing map)."""
    maps = []
    parent = scope_dict[node]
    while parent is not None:
        maps.append(parent)
        parent = scope_dict[parent]
    return maps


def _container_token(sdfg: dace.SDFG, data: str, containers: Mapping[str, Container]) -> str:
    container = containers.get(data)
    if container is not None and container.is_buffer:
        return "BUF"
    return "TMP" if sdfg.arrays[data].transient else "IO"


def _code_tokens(tasklet: dnodes.Tasklet) -> list[str]:
    """The tasklet's code as tokens, names normalised (connectors by direction, calls by name)."""
    inputs, outputs = set(tasklet.in_connectors), set(tasklet.out_connectors)
    try:
        raw = list(tokenize.generate_tokens(io.StringIO(tasklet.code.as_string).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return ["CODE"]
    tokens = []
    for index, token in enumerate(raw):
        if token.type == tokenize.NAME:
            following = raw[index + 1].string if index + 1 < len(raw) else ""
            if token.string in inputs:
                tokens.append("IN")
            elif token.string in outputs:
                tokens.append("OUT")
            elif following == "(" or token.string in {"if", "else", "for", "in", "and", "or", "not"}:
                tokens.append(token.string)
            else:
                tokens.append("VAR")
        elif token.type == tokenize.NUMBER:
            tokens.append("NUM")
        elif token.type == tokenize.OP:
            tokens.append(token.string)
    return tokens


def step_tokens(step: TaskScope | Copy, place: StepPlace) -> list[str]:
    """The token sequence of ``step``'s scope (at most :data:`MAX_TOKENS`)."""
    sdfg, containers = place.sdfg, place.containers
    if isinstance(step, Copy):
        return [
            "COPY",
            place.copy_implementation.upper(),
            _container_token(sdfg, step.src.data, containers),
            _container_token(sdfg, step.dst.data, containers),
            f"V{bucket(_number(step.dst.volume))}",
            f"D{len(step.dst.begin)}",
            *(_size_token("S", _copy_stride(access, place)) for access in (step.src, step.dst)),
            "SAME" if _shape(step.src.data, place) == _shape(step.dst.data, place) else "RESHAPE",
        ]
    subgraph = place.state.scope_subgraph(place.scope)
    scope_dict = place.state.scope_dict()
    tokens: list[str] = []
    for node in dace.sdfg.utils.dfs_topological_sort(subgraph):
        if isinstance(node, dnodes.MapEntry):
            tokens += ["MAP", f"D{len(node.map.params)}"]
            tokens += [_size_token("R", place.size(size)) for size in node.map.range.size()]
        elif isinstance(node, dnodes.MapExit):
            tokens.append("END")
        elif isinstance(node, dnodes.Tasklet):
            tokens += ["TASKLET", *_code_tokens(node)]
            innermost, _, _ = _innermost_loop(_enclosing_maps(scope_dict, node), place)
            for edge in (*subgraph.in_edges(node), *subgraph.out_edges(node)):
                if edge.data.is_empty() or edge.data.data is None:
                    continue
                tokens += ["MEM", _container_token(sdfg, edge.data.data, containers)]
                tokens.append(_size_token("V", place.size(edge.data.volume)))
                if edge.data.subset is not None:
                    tokens.append(_size_token("S", _access_stride(edge.data, innermost, place)))
                if edge.data.wcr is not None:
                    tokens.append("WCR")
        if len(tokens) >= MAX_TOKENS:
            break
    return tokens[:MAX_TOKENS]


def _size_token(prefix: str, size: float | None) -> str:
    """A size as a token: its power of two, or ``?`` when it is not a constant (a triangular range moves with
    an enclosing map)."""
    return f"{prefix}?" if size is None else f"{prefix}{bucket(size)}"


def feature_matrix(features: list[Mapping[str, float | str]], categories: Mapping[str, list[str]]) -> np.ndarray:
    """The numeric features (logarithms of counts), their ratios (:data:`DERIVED`, logarithms) and one code
    per categorical feature, one row per step; a category not in ``categories`` (unseen in training) is
    coded -1. Rows read before a feature existed are refused in one line (renew them with
    ``benchmarks/costmodel_folds.py refeature``)."""
    missing = next((name for f in features for name in (*NUMERIC, *CATEGORICAL) if name not in f), None)
    if missing is not None:
        raise DcaccelError(
            f"costmodel: a row has no feature '{missing}' (rows of an older dcaccel: renew them with "
            "benchmarks/costmodel_folds.py refeature)"
        )
    numeric = np.array([[float(f[name]) for name in NUMERIC] for f in features], dtype=np.float64).reshape(
        -1, len(NUMERIC)
    )
    counts = dict(zip(NUMERIC, np.maximum(numeric, 0.0).T, strict=True))
    work, iterations = np.maximum(counts["work"], 1.0), np.maximum(counts["iterations"], 1.0)
    ratios = np.column_stack(
        [
            (counts["macs"] + 1) / work,
            (counts["ops"] + 1) / work,
            iterations / work,
            (counts["elements_in"] + 1) / (counts["volume_in"] + 1),
            (counts["elements_out"] + 1) / (counts["volume_out"] + 1),
            (counts["bytes_in"] + counts["bytes_out"] + 1) / work,
            (counts["elements_in"] + counts["elements_out"]) * counts["itemsize"] + 1,
            work / iterations,
            counts["volume_in"] / iterations + 1,
            counts["volume_out"] / iterations + 1,
        ]
    ).reshape(-1, len(DERIVED))
    codes = np.array(
        [[_code(categories[name], str(f[name])) for name in CATEGORICAL] for f in features], dtype=np.float64
    ).reshape(-1, len(CATEGORICAL))
    unread = np.isin(np.arange(len(NUMERIC)), [NUMERIC.index(name) for name in UNREAD]) & (numeric < 0)
    return np.hstack([np.log1p(np.where(unread, np.nan, np.maximum(numeric, 0.0))), np.log(ratios), codes])


def _code(known: list[str], value: str) -> int:
    return known.index(value) if value in known else -1
