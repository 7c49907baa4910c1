"""Canonical element gathers and scatters: GatherElements, GatherND, ReverseSequence, TensorScatter, ScatterElements
(and its opset-9 name Scatter) and ScatterND.

Their indices are data: each element of the output (a gather) or each update (a scatter) reads or writes
one element of a container at a position known only when it runs, a dynamic memlet of volume 1 over the
positions it may touch (the idiom of :class:`~dcaccel.expansions.shape_ops.CanonicalGather`). Negative
indices count from the end of their axis. A container read at data-dependent positions and produced by
another task is copied into a REUSE buffer first.

TensorScatter writes every element of its output once (the update lands at a window of the sequence axis that
the write index of the batch places): it is a gather, one flat map over the output choosing, per element, the
update element that lands there or the past element.

A scatter is two flat maps (ScatterND computes the offsets of its index tuples in between): ``copy``
writes ``output = data`` row-major, then ``scatter`` writes every update into the copy. The scatter reads
the element it writes (``prev``) and writes it back, the update combined with it by the ``reduction``
(``add``, ``mul``, ``max``, ``min``) or in its place (``none``). Two updates may address one element, so
the scatter map is sequential: it takes the updates one after the other in row-major order, repeated
indices accumulate, and with ``none`` the last update of an element stays (onnxruntime's choice; ONNX
leaves it undefined).
"""

import math
from collections.abc import Callable

import dace
from dace import SDFG, Memlet, SDFGState

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import ExpansionBuilder, at_axis, connector, index_params, index_ranges, subscript
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    axis_input_shape,
    input_edge,
    input_shape,
    node_builder,
    normalize_axis,
    onnx_shape,
    output_shape,
    unsupported,
    wrong_shape,
)
from dcaccel.expansions.shape_ops import add_copy

REDUCTIONS = {
    "none": "{update}",
    "add": "{element} + {update}",
    "mul": "{element} * {update}",
    "max": "max({element}, {update})",
    "min": "min({element}, {update})",
}
"""The new value of an element of the output, from the ``element`` and an ``update``, per ``reduction`` of
ScatterElements and ScatterND."""


def _element(name: str, indices: list[str], sizes) -> str:
    """The tasklet expression of the element of connector ``name`` (a dynamic memlet over ranges of ``sizes``)
    at ``indices``; DaCe drops the ranges of size 1 from the connector's dimensions."""
    kept = [index for index, size in zip(indices, sizes, strict=True) if size != 1]
    return f"{name}[{', '.join(kept)}]" if kept else name


def _wrapped(index: str, size) -> str:
    """The tasklet expression of ``index`` with a negative value counted from the end of an axis of ``size``."""
    return f"({index} if {index} >= 0 else {index} + {size})"


def _check_same_rank(node, state: SDFGState, sdfg: SDFG, *connectors: str) -> tuple:
    """The shape of ``data``; :class:`UnsupportedOpError` unless ``connectors`` have its rank and ``axis`` is in it."""
    shape = input_shape(node, state, sdfg, "data")
    for name in connectors:
        other = input_shape(node, state, sdfg, name)
        if len(other) != len(shape):
            raise unsupported(node, f"{name} {other} and data {shape} differ in rank")
    normalize_axis(node.axis, len(shape), node)
    return shape


def _check_reduction(node) -> str:
    """The formula of the ``reduction`` of a scatter (see :data:`REDUCTIONS`)."""
    reduction = getattr(node, "reduction", None) or "none"
    if reduction not in REDUCTIONS:
        raise unsupported(node, f"reduction='{reduction}'")
    return REDUCTIONS[reduction]


def _data_dependent(source: str, indices: list[str]) -> Memlet:
    """A dynamic memlet of volume 1 into ``source`` at ``indices`` (ranges where the position is data)."""
    return Memlet(data=source, subset=subscript(indices), volume=1, dynamic=True)


def _scatter(steps: ExpansionBuilder, updates_shape: tuple, target: list, inputs: dict, formula: str) -> None:
    """``output = data`` (``copy``), then the sequential ``scatter`` map over the updates: each reads one element
    of the output and writes it back, combined with its update by ``formula``. ``target`` gives, per dimension
    of the output, the tasklet expression of the element's index and the size of the dimension where the index
    is data (a range of the dynamic memlet), None where it is a map parameter."""
    add_copy(steps, "copy", "data", "output")
    params = index_params(len(updates_shape))
    position = [index if size is None else f"0:{size}" for index, size in target]
    data_dependent = [index for index, size in target if size is not None]
    sizes = [size for _, size in target if size is not None]
    tasklet = steps.flat_map(
        "scatter",
        index_ranges(params, updates_shape),
        {**inputs, "u": Memlet(f"updates[{subscript(params)}]"), "prev": _data_dependent("output", position)},
        f"{_element('out', data_dependent, sizes)} = "
        + formula.format(element=_element("prev", data_dependent, sizes), update="u"),
        {"out": _data_dependent("output", position)},
    )
    pointer = dace.pointer(steps.desc("output").dtype)
    tasklet.in_connectors[connector("prev")] = pointer
    tasklet.out_connectors[connector("out")] = pointer
    steps.state.entry_node(tasklet).map.schedule = dace.ScheduleType.Sequential


def _expand_scatter(node, state: SDFGState, sdfg: SDFG, targets: Callable) -> SDFG:
    """The nested SDFG of a scatter: ``output = data`` alone (``copy``) when there are no updates, else the steps
    of :func:`_scatter` where ``targets(steps, node, shape, updates_shape)`` (``shape`` that of ``data``) gives
    its ``target`` and the inputs its tasklet reads them from, after adding any step that computes them."""
    formula = _check_reduction(node)
    steps = node_builder(node, state, sdfg)
    shape = onnx_shape(steps.desc("data"))
    updates_shape = onnx_shape(steps.desc("updates"))
    if math.prod(updates_shape) == 0:
        add_copy(steps, "copy", "data", "output")
    else:
        _scatter(steps, updates_shape, *targets(steps, node, shape, updates_shape), formula)
    return steps.sdfg


def _elements_target(steps: ExpansionBuilder, node, shape: tuple, updates_shape: tuple) -> tuple[list, dict]:
    """ScatterElements: update ``i`` goes to ``i`` with ``i[axis]`` = ``indices[i]`` (wrapped)."""
    axis = normalize_axis(node.axis, len(shape), node)
    params = index_params(len(updates_shape))
    target = [(_wrapped("j", shape[axis]), shape[axis]) if d == axis else (p, None) for d, p in enumerate(params)]
    return target, {"j": Memlet(f"indices[{subscript(params)}]")}


def _add_offsets(steps: ExpansionBuilder, tuples: tuple, sizes: tuple, reused: bool) -> tuple[str, list[int]]:
    """Add the ``offset`` step: ``offset[b]``, the row-major position of index tuple ``indices[b]`` among axes of
    ``sizes`` (its ``len(sizes)`` indices read in order, negative ones wrapped), produced in the order of the
    tuples; a REUSE buffer if ``reused``. Returns the buffer and the strides of the axes."""
    k = len(sizes)
    batch = index_params(len(tuples))
    strides = [math.prod(sizes[d + 1 :]) for d in range(k)]
    entries = [f"j[{d}]" for d in range(k)] if k > 1 else ["j"]  # one index: a scalar connector
    linear = " + ".join(
        f"{_wrapped(e, size)} * {stride}" for e, size, stride in zip(entries, sizes, strides, strict=True)
    )
    offset = steps.transient("offset", tuples, dace.int64, BufferReason.REUSE if reused else None)
    steps.flat_map(
        "offset",
        index_ranges(batch, tuples),
        {"j": Memlet(f"indices[{subscript([*batch, f'0:{k}'])}]")},
        f"o = {linear}",
        {"o": Memlet(f"{offset}[{subscript(batch)}]")},
    )
    return offset, strides


def _nd_target(steps: ExpansionBuilder, node, shape: tuple, updates_shape: tuple) -> tuple[list, dict]:
    """ScatterND: the ``offset`` step (see :class:`CanonicalScatterND`); update ``[b, r]`` goes to ``r`` of the
    slice at ``offset[b]``, split into the first ``k`` dimensions."""
    *tuples, k = onnx_shape(steps.desc("indices"))
    params = index_params(len(updates_shape))
    batch = params[: len(tuples)]
    offset, strides = _add_offsets(steps, tuples, shape[:k], math.prod(shape[k:]) > 1)
    target = [(f"(o // {stride}) % {size}", size) for stride, size in zip(strides, shape[:k], strict=True)]
    target += [(p, None) for p in params[len(tuples) :]]
    return target, {"o": Memlet(f"{offset}[{subscript(batch)}]")}


class CanonicalGatherElements(CanonicalForward):
    """Canonical GatherElements along ``axis``: ``output[i] = data[i with i[axis] = indices[i]]``.

    One flat map over the output (the shape of ``indices``), produced row-major; each element reads its
    index in order and one element of its row of ``data`` along ``axis`` (a dynamic memlet).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _check_same_rank(node, state, sdfg, "indices")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("data"))
        out_shape = onnx_shape(steps.desc("output"))
        if math.prod(out_shape) == 0:
            return steps.sdfg
        axis = normalize_axis(node.axis, len(shape), node)
        params = index_params(len(out_shape))
        source = steps.operand("data", reused=True)
        row = at_axis(params, axis, f"0:{shape[axis]}")
        tasklet = steps.flat_map(
            "gather_elements",
            index_ranges(params, out_shape),
            {"row": _data_dependent(source, row), "j": Memlet(f"indices[{subscript(params)}]")},
            f"out = {_element('row', [_wrapped('j', shape[axis])], [shape[axis]])}",
            {"out": Memlet(f"output[{subscript(params)}]")},
        )
        tasklet.in_connectors[connector("row")] = dace.pointer(steps.desc(source).dtype)
        return steps.sdfg


class CanonicalScatterElements(CanonicalForward):
    """Canonical ScatterElements along ``axis``: ``output = data``, then for every update position ``i``,
    ``output[i with i[axis] = indices[i]] = updates[i]`` (or combined by ``reduction``).

    Two flat maps (see the module docstring): ``copy``, produced row-major, then ``scatter`` over the
    updates, which reads ``indices`` and ``updates`` in order and writes one element of its row of the
    output along ``axis`` each.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _check_same_rank(node, state, sdfg, "indices", "updates")
        _check_reduction(node)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        return _expand_scatter(node, state, sdfg, _elements_target)


class CanonicalScatterND(CanonicalForward):
    """Canonical ScatterND: ``output = data``, then for every index tuple ``indices[b]`` (of length ``k``, the
    last dimension of ``indices``) ``output[indices[b], r] = updates[b, r]`` for every position ``r`` of the
    slice it addresses (or combined by ``reduction``). Three flat maps:

    1. ``copy``: ``output = data``, produced row-major;
    2. ``offset``: ``offset[b]``, the row-major position of tuple ``b`` among the first ``k`` dimensions (its
       ``k`` indices read in order, negative ones wrapped), produced in the order of the tuples;
    3. ``scatter`` over the updates (``b``, then ``r``, row-major; see the module docstring): one offset and
       one update read, one element of the output written (a dynamic memlet over the first ``k``
       dimensions). ``offset`` is re-read for every element of its slice: a REUSE buffer when a slice has
       more than one element.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        shape = input_shape(node, state, sdfg, "data")
        indices = input_shape(node, state, sdfg, "indices")
        if not indices or not 1 <= indices[-1] <= len(shape):
            raise unsupported(node, f"indices {indices} for data {shape} (index tuples of 1 to {len(shape)})")
        _check_reduction(node)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        return _expand_scatter(node, state, sdfg, _nd_target)


class CanonicalScatter(CanonicalScatterElements):
    """Canonical Scatter (opset 9 and 10; ScatterElements since opset 11, without ``reduction``): as
    :class:`CanonicalScatterElements`."""


def _gather_nd_shapes(node, state: SDFGState, sdfg: SDFG) -> tuple[tuple, tuple, int, int]:
    """GatherND's data and indices shapes, ``batch_dims`` and the length ``k`` of the index tuples; raises
    :class:`UnsupportedOpError` unless they fit and the imported output shape is GatherND's."""
    shape, indices = input_shape(node, state, sdfg, "data"), input_shape(node, state, sdfg, "indices")
    batch = int(getattr(node, "batch_dims", 0) or 0)
    if not indices or not 1 <= indices[-1] <= len(shape) - batch or tuple(indices[:batch]) != tuple(shape[:batch]):
        raise unsupported(node, f"indices {list(indices)} for data {list(shape)} with batch_dims={batch}")
    k = indices[-1]
    expected = [*indices[:-1], *shape[batch + k :]]
    imported = list(output_shape(node, state, sdfg, "output"))
    if imported != expected:
        raise wrong_shape(node, f"imported output shape {imported} is not GatherND's {expected} (batch_dims={batch})")
    return shape, indices, batch, k


class CanonicalGatherND(CanonicalForward):
    """Canonical GatherND (``batch_dims`` b): ``output[p, r] = data[p[:b], indices[p], r]`` for every position
    ``p`` of ``indices`` without its last axis (the first ``b`` of them batch positions) and ``r`` of the data axes
    after the ``k`` indexed ones (``k`` the last dimension of ``indices``); negative indices wrap. Two flat maps:

    1. ``offset``: ``offset[p]``, the row-major position of tuple ``p`` among the ``k`` indexed axes (its ``k``
       indices read in order), produced in the order of the tuples (as ScatterND's);
    2. ``gather_nd`` over the output, produced row-major: one offset (re-read for every ``r``: a REUSE buffer
       when a slice has more than one element) and one element of the slice of ``data`` it addresses (a dynamic
       memlet over the ``k`` indexed axes) per element.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _gather_nd_shapes(node, state, sdfg)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        shape, indices, batch, k = _gather_nd_shapes(node, state, sdfg)
        steps = node_builder(node, state, sdfg)
        out_shape = onnx_shape(steps.desc("output"))
        if math.prod(out_shape) == 0:
            return steps.sdfg
        indexed = shape[batch : batch + k]
        offset, strides = _add_offsets(steps, indices[:-1], indexed, math.prod(shape[batch + k :]) > 1)
        params = index_params(len(out_shape))
        positions, rest = params[: len(indices) - 1], params[len(indices) - 1 :]
        source = steps.operand("data", reused=True)
        split = [f"(o // {stride}) % {size}" for stride, size in zip(strides, indexed, strict=True)]
        tasklet = steps.flat_map(
            "gather_nd",
            index_ranges(params, out_shape),
            {
                "row": _data_dependent(source, [*positions[:batch], *(f"0:{n}" for n in indexed), *rest]),
                "o": Memlet(f"{offset}[{subscript(positions)}]"),
            },
            f"out = {_element('row', split, indexed)}",
            {"out": Memlet(f"output[{subscript(params)}]")},
        )
        tasklet.in_connectors[connector("row")] = dace.pointer(steps.desc(source).dtype)
        return steps.sdfg


class CanonicalReverseSequence(CanonicalForward):
    """Canonical ReverseSequence (``batch_axis``, ``time_axis``): the first ``sequence_lens[b]`` elements of every
    batch entry ``b`` along the time axis reversed, the others copied: ``output[b, t] = input[b, L - 1 - t]`` if
    ``t < L = sequence_lens[b]``, else ``input[b, t]``.

    One flat map over the output, produced row-major; each element reads its batch entry's length and one
    element of its line along the time axis (a dynamic memlet).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        shape = input_shape(node, state, sdfg, "input")
        axes = [normalize_axis(a, len(shape), node) for a in (node.batch_axis, node.time_axis)]
        if len(shape) < 2 or axes[0] == axes[1]:
            raise unsupported(node, f"batch_axis={node.batch_axis}, time_axis={node.time_axis} for rank {len(shape)}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("input"))
        if math.prod(shape) == 0:
            return steps.sdfg
        batch_axis, time_axis = (normalize_axis(a, len(shape), node) for a in (node.batch_axis, node.time_axis))
        params = index_params(len(shape))
        t, size = params[time_axis], shape[time_axis]
        source = steps.operand("input", reused=True)
        line = at_axis(params, time_axis, f"0:{size}")
        element = _element("line", [f"(n - 1 - {t} if {t} < n else {t})"], [size])
        tasklet = steps.flat_map(
            "reverse_sequence",
            index_ranges(params, shape),
            {"line": _data_dependent(source, line), "n": Memlet(f"sequence_lens[{params[batch_axis]}]")},
            f"out = {element}",
            {"out": Memlet(f"Y[{subscript(params)}]")},
        )
        tasklet.in_connectors[connector("line")] = dace.pointer(steps.desc(source).dtype)
        return steps.sdfg


TENSOR_SCATTER_MODES = ("linear", "circular")


class CanonicalTensorScatter(CanonicalForward):
    """Canonical TensorScatter (``axis``, default -2, never the batch axis 0; ``mode`` linear or circular): the
    past cache with every batch entry's update written along ``axis`` from ``write_indices[b]`` on (0 without
    ``write_indices``; circular: modulo the cache length S). With ``s`` a position along ``axis`` and ``L`` the
    update's length there, ``t = s - write_indices[b]`` (circular: modulo S): ``present_cache[b, s] = update[b,
    t]`` if ``0 <= t < L``, else ``past_cache[b, s]``.

    One flat map over the output, produced row-major: each element reads its write index, its past element (in
    order) and one element of the update's line along ``axis`` (a dynamic memlet).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        shape = axis_input_shape(node, state, sdfg, "past_cache")
        axis = normalize_axis(node.axis, len(shape), node)
        if axis == 0:
            raise unsupported(node, "axis 0 is the batch axis")
        if (node.mode or "linear") not in TENSOR_SCATTER_MODES:
            raise unsupported(node, f"mode='{node.mode}'")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("past_cache"))
        length = onnx_shape(steps.desc("update"))
        if math.prod(shape) == 0:
            return steps.sdfg
        axis = normalize_axis(node.axis, len(shape), node)
        params = index_params(len(shape))
        s, size, count = params[axis], shape[axis], length[axis]
        source = steps.operand("update", reused=True)
        line = at_axis(params, axis, f"0:{count}")
        inputs = {"line": _data_dependent(source, line), "past": Memlet(f"past_cache[{subscript(params)}]")}
        start = "0"
        if input_edge(node, state, "write_indices") is not None:
            inputs["w"], start = Memlet(f"write_indices[{params[0]}]"), "w"
        position = f"{s} - {start}"
        if (node.mode or "linear") == "circular":
            position = f"(({position}) % {size} + {size}) % {size}"
        tasklet = steps.flat_map(
            "tensor_scatter",
            index_ranges(params, shape),
            inputs,
            f"t = {position}\nout = {_element('line', ['t'], [count])} if t >= 0 and t < {count} else past",
            {"out": Memlet(f"present_cache[{subscript(params)}]")},
        )
        tasklet.in_connectors[connector("line")] = dace.pointer(steps.desc(source).dtype)
        return steps.sdfg


IMPLEMENTATIONS = (
    Implementation("GatherElements", CANONICAL, CanonicalGatherElements),
    Implementation("GatherND", CANONICAL, CanonicalGatherND),
    Implementation("ReverseSequence", CANONICAL, CanonicalReverseSequence),
    Implementation("TensorScatter", CANONICAL, CanonicalTensorScatter),
    Implementation("ScatterElements", CANONICAL, CanonicalScatterElements),
    Implementation("Scatter", CANONICAL, CanonicalScatter),
    Implementation("ScatterND", CANONICAL, CanonicalScatterND),
)
