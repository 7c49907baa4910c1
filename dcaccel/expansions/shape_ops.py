"""Canonical data-movement ops: the reshape family, Transpose, Concat, Slice, Gather, Expand, Tile, DepthToSpace,
SpaceToDepth, Trilu and the shape constants (Shape, Size, ConstantOfShape, EyeLike).

In the canonical model a reshape is a task, not a view: Reshape, Flatten, Squeeze and Unsqueeze
are one copy map each, reading the input and writing the output in the same (row-major) element
order. Shape parameters (Reshape's ``shape``, the ``axes`` inputs) are not data: the output
shape is known when the node is expanded, so those inputs are disconnected.
"""

import itertools
import math

import dace
import numpy as np
from dace import SDFG, Memlet, SDFGState
from dace.sdfg.utils import out_desc_with_name

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import (
    ExpansionBuilder,
    at_axis,
    broadcast_indices,
    connector,
    index_params,
    index_ranges,
    is_broadcast,
    literal,
    subscript,
)
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    constant_input,
    constant_int,
    constant_ints,
    input_edge,
    input_shape,
    node_builder,
    normalize_axis,
    onnx_shape,
    ordered_inputs,
    output_shape,
    unsupported,
    wrong_shape,
)


def _suffix_products(shape) -> list[int]:
    return [math.prod(shape[d:]) for d in range(len(shape) + 1)]


def _refinement(in_shape, out_shape) -> list[int] | None:
    """Strides (inner to outer) of the coarsest index space both shapes are groupings of, or None.

    Every dimension of either shape must be a product of consecutive dimensions of that space
    (e.g. (N, C, H, W) for a Flatten of (N, C, H, W) to (N, C·H·W)); this fails when the two
    shapes split the elements at incompatible places (e.g. (2, 6) and (3, 4)).
    """
    total = math.prod(in_shape)
    if total == 0:
        return None
    cuts = sorted(set(_suffix_products(in_shape)) | set(_suffix_products(out_shape)))
    if any(outer % inner for inner, outer in itertools.pairwise(cuts)):
        return None
    return cuts


def _grouped_indices(shape, cuts: list[int], params: list[str]) -> list[str]:
    """Per-dimension indices of ``shape`` in the refined index space ``params`` (outer to inner)."""
    strides = _suffix_products(shape)[1:]
    levels = list(reversed(cuts[:-1]))  # stride of each refined parameter, outer to inner
    indices = []
    for size, stride in zip(shape, strides, strict=True):
        terms = [
            p if level == stride else f"{p} * {level // stride}"
            for p, level in zip(params, levels, strict=True)
            if stride <= level < stride * size
        ]
        indices.append(" + ".join(terms) if terms else "0")
    return indices


def add_copy(steps: ExpansionBuilder, label: str, source: str, target: str) -> None:
    """Add one flat map copying ``source`` into ``target`` element by element in row-major order.

    The shapes may differ (same element count): the map runs over the coarsest common refinement
    of the two shapes, so that both subscripts are affine; if there is none, over the target
    shape with the source subscript computed by division and remainder of the linear index.
    Nothing is added for an empty tensor.
    """
    in_shape, out_shape = onnx_shape(steps.desc(source)), onnx_shape(steps.desc(target))
    if math.prod(out_shape) == 0:
        return
    cuts = _refinement(in_shape, out_shape)
    if cuts is not None:
        sizes = [outer // inner for inner, outer in itertools.pairwise(cuts)][::-1]
        params = index_params(len(sizes), "__r")
        ranges = index_ranges(params, sizes)
        in_index = _grouped_indices(in_shape, cuts, params)
        out_index = _grouped_indices(out_shape, cuts, params)
    else:
        params = index_params(len(out_shape))
        ranges = index_ranges(params, out_shape)
        out_strides = _suffix_products(out_shape)[1:]
        linear = " + ".join(f"{p} * {s}" for p, s in zip(params, out_strides, strict=True)) or "0"
        in_strides = _suffix_products(in_shape)[1:]
        in_index = [f"(({linear}) // {s}) % {n}" for s, n in zip(in_strides, in_shape, strict=True)]
        out_index = params
    steps.flat_map(
        label,
        ranges,
        {"v": Memlet(f"{source}[{subscript(in_index)}]")},
        "out = v",
        {"out": Memlet(f"{target}[{subscript(out_index)}]")},
    )


def _copy_implementation(op: str, data: str, output: str, parameters: tuple[str, ...]) -> Implementation:
    class Forward(CanonicalForward):
        @staticmethod
        def check(node, state: SDFGState, sdfg: SDFG) -> None:
            in_shape, out_shape = input_shape(node, state, sdfg, data), output_shape(node, state, sdfg, output)
            if math.prod(in_shape) != math.prod(out_shape):
                raise wrong_shape(node, f"imported output shape {list(out_shape)} does not hold the input {in_shape}")

        @staticmethod
        def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
            steps = node_builder(node, state, sdfg, drop=parameters)
            add_copy(steps, "copy", data, output)
            return steps.sdfg

    Forward.__name__ = Forward.__qualname__ = f"Canonical{op}"
    Forward.__doc__ = (
        f"Canonical {op}: a copy task. One flat map reads ``{data}`` and writes ``{output}`` in the "
        "same row-major element order (see :func:`add_copy`); the output is produced row-major."
    )
    return Implementation(op, CANONICAL, Forward)


def _permutation(node, rank: int) -> list[int]:
    """Transpose's ``perm`` (default: the axes reversed), checked to permute ``rank`` axes."""
    perm = list(node.perm) if node.perm is not None else list(reversed(range(rank)))
    if sorted(perm) != list(range(rank)):
        raise unsupported(node, f"perm {perm} for rank {rank}")
    return perm


class CanonicalTranspose(CanonicalForward):
    """Canonical Transpose: ``transposed[o] = data[o permuted back]`` (``perm``, default reversed axes).

    One flat map over the output, produced row-major, reading the input in permuted order. If the
    permutation keeps the order of the axes larger than 1, it is a plain copy in order. Otherwise
    an input produced by another task is first copied into a REORDER buffer.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _permutation(node, len(input_shape(node, state, sdfg, "data")))

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("data"))
        perm = _permutation(node, len(shape))
        moved = [d for d in perm if shape[d] != 1]
        if moved == sorted(moved):
            add_copy(steps, "copy", "data", "transposed")
            return steps.sdfg
        source = steps.operand("data", reused=True, reason=BufferReason.REORDER)
        out_shape = [shape[d] for d in perm]
        params = index_params(len(out_shape))
        in_index = [None] * len(shape)
        for k, d in enumerate(perm):
            in_index[d] = params[k]
        steps.flat_map(
            "transpose",
            index_ranges(params, out_shape),
            {"v": Memlet(f"{source}[{subscript(in_index)}]")},
            "out = v",
            {"out": Memlet(f"transposed[{subscript(params)}]")},
        )
        return steps.sdfg


class CanonicalConcat(CanonicalForward):
    """Canonical Concat along ``axis``: copy tasks of equal size, each writing its slab of the output.

    The slab is ``g`` consecutive indices along ``axis`` (all other indices whole), ``g`` the greatest
    common divisor of the inputs' lengths along ``axis``. An input of length ``g`` is one copy map (one
    task); a longer input is a task map with one task per slab, in order along ``axis``. Every copy
    task thus reads and writes the same number of elements, so the consumer of the output gets
    in-edges of one volume (docs/dag.md, "Concat"). Each input is read once; the output is produced
    input by input, slab by slab, row-major within a slab.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        normalize_axis(node.axis, len(output_shape(node, state, sdfg, "concat_result")), node)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        inputs = ordered_inputs(node, state)
        out_shape = onnx_shape(steps.desc("concat_result"))
        axis = normalize_axis(node.axis, len(out_shape), node)
        shapes = [onnx_shape(steps.desc(name)) for name in inputs]
        slab = math.gcd(*(shape[axis] for shape in shapes if math.prod(shape) > 0))
        offset = 0
        for k, (name, shape) in enumerate(zip(inputs, shapes, strict=True)):
            if math.prod(shape) > 0:
                params = index_params(len(shape))
                in_index, out_index = list(params), list(params)
                if shape[axis] == slab:
                    out_index[axis] = f"{params[axis]} + {offset}"
                    steps.flat_map(
                        f"copy_{k}",
                        index_ranges(params, shape),
                        {"v": Memlet(f"{name}[{subscript(in_index)}]")},
                        "out = v",
                        {"out": Memlet(f"concat_result[{subscript(out_index)}]")},
                    )
                else:
                    in_index[axis] = f"__s * {slab} + {params[axis]}"
                    out_index[axis] = f"__s * {slab} + {params[axis]} + {offset}"
                    steps.task_map(
                        f"copy_{k}",
                        {"__s": f"0:{shape[axis] // slab}"},
                        "slab",
                        index_ranges(params, [*shape[:axis], slab, *shape[axis + 1 :]]),
                        {"v": Memlet(f"{name}[{subscript(in_index)}]")},
                        "out = v",
                        {"out": Memlet(f"concat_result[{subscript(out_index)}]")},
                    )
            offset += shape[axis]
        return steps.sdfg


def _split_sizes(node, state: SDFGState, sdfg: SDFG, size: int, count: int) -> list[int]:
    """The part sizes of a Split of an axis of ``size`` into ``count`` outputs (ONNX rules of every opset)."""
    if node.schema.since_version < 13:
        sizes = list(getattr(node, "split", None) or [])
    else:
        sizes = constant_ints(node, state, sdfg, "split")
        if sizes is None and input_edge(node, state, "split") is not None:
            raise unsupported(node, "'split' must be a constant")
        sizes = sizes or []
    if sizes:
        return sizes
    parts = getattr(node, "num_outputs", None) or count
    if node.schema.since_version >= 18 and getattr(node, "num_outputs", None):
        step = -(-size // parts)
        return [min(step, size - k * step) for k in range(parts)]
    if size % parts:
        raise unsupported(node, f"an axis of {size} elements into {parts} equal parts")
    return [size // parts] * parts


def _split_outputs(node, state: SDFGState) -> list[str]:
    """The output connectors of a Split node, in order."""
    return sorted((e.src_conn for e in state.out_edges(node)), key=lambda c: int(c.partition("__")[2] or 0))


class CanonicalSplit(CanonicalForward):
    """Canonical Split along ``axis``: output k is the block of the input at offset ``sum(split[:k])``.

    Sizes from the ``split`` attribute (opset < 13) or constant input, ``num_outputs`` (opset 18:
    parts of ceil(size / n), the last smaller), else equal parts. One copy map per output, each
    reading its block of the input once, row-major; each output is produced row-major, the outputs
    one after the other.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        shape = input_shape(node, state, sdfg, "input")
        axis = normalize_axis(node.axis, len(shape), node)
        outputs = _split_outputs(node, state)
        sizes = _split_sizes(node, state, sdfg, shape[axis], len(outputs))
        if len(sizes) != len(outputs) or sum(sizes) != shape[axis]:
            raise unsupported(node, f"split {sizes} of an axis of {shape[axis]} into {len(outputs)} outputs")
        for name, size in zip(outputs, sizes, strict=True):
            expected = at_axis(shape, axis, size)
            if list(output_shape(node, state, sdfg, name)) != expected:
                raise wrong_shape(node, f"imported shape of {name} {list(output_shape(node, state, sdfg, name))}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        drop = ("split",) if input_edge(node, state, "split") is not None else ()
        steps = node_builder(node, state, sdfg, drop=drop)
        shape = onnx_shape(steps.desc("input"))
        axis = normalize_axis(node.axis, len(shape), node)
        offset = 0
        for k, name in enumerate(_split_outputs(node, state)):
            out_shape = onnx_shape(steps.desc(name))
            if math.prod(out_shape) > 0:
                params = index_params(len(out_shape))
                in_index = list(params)
                in_index[axis] = f"{params[axis]} + {offset}" if offset else params[axis]
                steps.flat_map(
                    f"split_{k}",
                    index_ranges(params, out_shape),
                    {"v": Memlet(f"input[{subscript(in_index)}]")},
                    "out = v",
                    {"out": Memlet(f"{name}[{subscript(params)}]")},
                )
            offset += out_shape[axis]
        return steps.sdfg


class CanonicalExpand(CanonicalForward):
    """Canonical Expand: ``output = input`` broadcast (numpy rules) to the shape the ``shape`` input gives.

    ``shape`` is a shape parameter, not data: it is disconnected (the imported output shape is the
    broadcast shape). One flat map over the output, produced row-major; an input that is read more
    than once (broadcast) and produced by another task is first copied into a REUSE buffer.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        in_shape, out_shape = input_shape(node, state, sdfg, "input"), output_shape(node, state, sdfg, "output")
        target = constant_ints(node, state, sdfg, "shape")
        try:
            expected = np.broadcast_shapes(tuple(in_shape), tuple(target if target is not None else out_shape))
        except ValueError:
            expected = None
        if expected != tuple(out_shape):
            raise wrong_shape(node, f"imported output shape {list(out_shape)} is not {list(in_shape)} expanded")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg, drop=("shape",))
        in_shape, out_shape = onnx_shape(steps.desc("input")), onnx_shape(steps.desc("output"))
        if math.prod(out_shape) == 0:
            return steps.sdfg
        params = index_params(len(out_shape))
        source = steps.operand("input", reused=is_broadcast(in_shape, out_shape))
        steps.flat_map(
            "expand",
            index_ranges(params, out_shape),
            {"v": Memlet(f"{source}[{subscript(broadcast_indices(in_shape, out_shape, params))}]")},
            "out = v",
            {"out": Memlet(f"output[{subscript(params)}]")},
        )
        return steps.sdfg


class CanonicalTile(CanonicalForward):
    """Canonical Tile: ``output`` is ``input`` repeated ``repeats[d]`` times along every axis ``d``.

    ``repeats`` is a shape parameter, not data: it is disconnected. One flat map over a (copy, index) pair
    per axis, iterated in that order so that the output is produced row-major with affine indices only:
    ``output[r·s + j] = input[j]`` for an axis of size ``s``. An input read more than once (a repeat above 1)
    and produced by another task is first copied into a REUSE buffer.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        in_shape, out_shape = input_shape(node, state, sdfg, "input"), output_shape(node, state, sdfg, "output")
        repeats = constant_ints(node, state, sdfg, "repeats")
        if repeats is None:
            raise unsupported(node, "input 'repeats' must be a constant")
        if len(repeats) != len(in_shape) or [r * s for r, s in zip(repeats, in_shape, strict=True)] != list(out_shape):
            raise unsupported(node, f"repeats {repeats} of an input {list(in_shape)} do not give {list(out_shape)}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        repeats = constant_ints(node, state, sdfg, "repeats")
        steps = node_builder(node, state, sdfg, drop=("repeats",))
        in_shape, out_shape = onnx_shape(steps.desc("input")), onnx_shape(steps.desc("output"))
        if math.prod(out_shape) == 0:
            return steps.sdfg
        copies, params = index_params(len(in_shape), "__r"), index_params(len(in_shape))
        ranges = {}
        for copy, param, count, size in zip(copies, params, repeats, in_shape, strict=True):
            ranges |= {copy: f"0:{count}", param: f"0:{size}"}
        written = [f"{copy} * {size} + {param}" for copy, param, size in zip(copies, params, in_shape, strict=True)]
        source = steps.operand("input", reused=any(count > 1 for count in repeats))
        steps.flat_map(
            "tile",
            ranges or index_ranges([], ()),
            {"v": Memlet(f"{source}[{subscript(params)}]")},
            "out = v",
            {"out": Memlet(f"output[{subscript(written)}]")},
        )
        return steps.sdfg


class CanonicalRange(CanonicalForward):
    """Canonical Range: ``output[i] = start + i * delta`` for the ``max(ceil((limit - start) / delta), 0)`` elements.

    Constant ``start`` and ``delta`` are folded into the tasklet (``limit`` only sets the length, which
    the import knows); inputs that are data are read by every element (a REUSE buffer if another task
    produces them). One flat map, produced in order.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        (size,) = output_shape(node, state, sdfg, "output")
        if dace.symbolic.issymbolic(size):
            raise unsupported(node, f"output length {size} unknown at import (constant inputs are needed)")
        values = [constant_input(node, state, sdfg, c) for c in ("start", "limit", "delta")]
        if all(v is not None for v in values):
            start, limit, delta = (v.reshape(()).item() for v in values)
            expected = max(math.ceil((limit - start) / delta), 0) if delta else None
            if expected != size:
                raise wrong_shape(node, f"imported length {size} is not that of range({start}, {limit}, {delta})")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        dtype = out_desc_with_name(node, state, sdfg, "output").dtype
        folded = {}
        for name in ("start", "delta"):
            value = constant_input(node, state, sdfg, name)
            if value is not None:
                folded[name] = literal(value.reshape(()).item(), dtype)
        steps = node_builder(node, state, sdfg, drop=("limit", *folded))
        (size,) = onnx_shape(steps.desc("output"))
        if size == 0:
            return steps.sdfg
        inputs = {
            name: Memlet(f"{steps.operand(name, reused=size > 1)}[0]")
            for name in ("start", "delta")
            if name not in folded
        }
        start, delta = folded.get("start", "start"), folded.get("delta", "delta")
        (index,) = index_params(1)
        steps.flat_map(
            "range",
            {index: f"0:{size}"},
            inputs,
            f"out = {start} + dace.{dtype.to_string()}({index}) * {delta}",
            {"out": Memlet(f"output[{index}]")},
        )
        return steps.sdfg


def _slice_ranges(node, state: SDFGState, sdfg: SDFG, shape) -> dict[int, tuple[int, int, int]]:
    """Per sliced axis: (first index, step, element count), following the ONNX clamping rules."""
    if node.schema.since_version < 10:
        starts, ends, axes, steps = node.starts, node.ends, node.axes, None
    else:
        starts, ends = (constant_ints(node, state, sdfg, c) for c in ("starts", "ends"))
        axes, steps = (constant_ints(node, state, sdfg, c) for c in ("axes", "steps"))
        if starts is None or ends is None:
            raise unsupported(node, "'starts' and 'ends' must be constants")
        for name, value in (("axes", axes), ("steps", steps)):
            if value is None and input_edge(node, state, name) is not None:
                raise unsupported(node, f"'{name}' must be a constant")
    axes = axes or list(range(len(starts)))
    steps = steps or [1] * len(starts)
    sliced = {}
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        axis = normalize_axis(axis, len(shape), node)
        size = shape[axis]
        start, end = (v + size if v < 0 else v for v in (start, end))
        if step > 0:
            start, end = min(max(start, 0), size), min(max(end, 0), size)
        else:
            start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
        sliced[axis] = (start, step, max(0, -(-(end - start) // step)))
    return sliced


class CanonicalSlice(CanonicalForward):
    """Canonical Slice (constant starts, ends, axes, steps): ``output[o] = data[start + o * step]``.

    One flat map over the output, produced row-major. The input is read in order, skipping the
    elements outside the slice, unless a step is negative: then an input produced by another task
    is first copied into a REORDER buffer.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        shape = input_shape(node, state, sdfg, "data")
        sliced = _slice_ranges(node, state, sdfg, shape)
        out_shape = output_shape(node, state, sdfg, "output")
        expected = [sliced[d][2] if d in sliced else s for d, s in enumerate(shape)]
        if list(out_shape) != expected:
            raise wrong_shape(node, f"imported output shape {list(out_shape)} is not the slice's {expected}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        sliced = _slice_ranges(node, state, sdfg, input_shape(node, state, sdfg, "data"))
        steps = node_builder(node, state, sdfg, drop=("starts", "ends", "axes", "steps"))
        out_shape = onnx_shape(steps.desc("output"))
        if math.prod(out_shape) == 0:
            return steps.sdfg
        reversed_axis = any(step < 0 for _, step, _ in sliced.values())
        source = steps.operand("data", reused=reversed_axis, reason=BufferReason.REORDER)
        params = index_params(len(out_shape))
        in_index = [f"{sliced[d][0]} + {p} * {sliced[d][1]}" if d in sliced else p for d, p in enumerate(params)]
        steps.flat_map(
            "slice",
            index_ranges(params, out_shape),
            {"v": Memlet(f"{source}[{subscript(in_index)}]")},
            "out = v",
            {"out": Memlet(f"output[{subscript(params)}]")},
        )
        return steps.sdfg


def _affine_indices(indices: np.ndarray) -> tuple[int, list[int]] | None:
    """``(first, steps)`` such that ``indices[j] == first + sum(steps[k] * j[k])`` for every position ``j``, or None."""
    first = int(indices.reshape(-1)[0]) if indices.size else 0
    steps = [
        int(indices[tuple(1 if d == k else 0 for d in range(indices.ndim))]) - first if size > 1 else 0
        for k, size in enumerate(indices.shape)
    ]
    if indices.ndim == 0:
        return first, []
    expected = first + np.dot(steps, np.indices(indices.shape).reshape(indices.ndim, -1))
    return (first, steps) if np.array_equal(expected, indices.reshape(-1)) else None


def _gather_indices(node, state: SDFGState, sdfg: SDFG) -> np.ndarray | None:
    """The constant indices of a Gather node, negative ones wrapped, checked to be in range; None if they are data."""
    constant = constant_input(node, state, sdfg, "indices")
    if constant is None:
        return None
    shape = input_shape(node, state, sdfg, "data")
    size = shape[normalize_axis(node.axis, len(shape), node)]
    if constant.size and (constant.min() < -size or constant.max() >= size):
        raise unsupported(node, f"indices outside [-{size}, {size})")
    return np.where(constant < 0, constant + size, constant).astype(np.int64)


class CanonicalGather(CanonicalForward):
    """Canonical Gather along ``axis``: ``output[a, j, b] = data[a, indices[j], b]`` (negative indices wrap).

    One flat map over the output, produced row-major. Constant indices that are an affine function of
    their position (a scalar, a range of any step, a repeated index) are folded into the memlet: the
    input element is known (a static memlet). Otherwise each output reads its index and one element
    of ``data`` at a data-dependent position (a dynamic memlet of volume 1). An input that is read more
    than once (REUSE) or out of order (REORDER, a static gather whose indices do not increase), and
    that another task produces, is first copied into a buffer.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        normalize_axis(node.axis, len(input_shape(node, state, sdfg, "data")), node)
        _gather_indices(node, state, sdfg)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        constant = _gather_indices(node, state, sdfg)
        affine = _affine_indices(constant) if constant is not None else None
        steps = node_builder(node, state, sdfg, drop=("indices",) if affine is not None else ())
        data_shape = onnx_shape(steps.desc("data"))
        out_shape = onnx_shape(steps.desc("output"))
        if math.prod(out_shape) == 0:
            return steps.sdfg
        axis = normalize_axis(node.axis, len(data_shape), node)
        size = data_shape[axis]
        params = index_params(len(out_shape))
        index_rank = len(out_shape) - len(data_shape) + 1
        before, chosen, after = params[:axis], params[axis : axis + index_rank], params[axis + index_rank :]
        if affine is not None:
            first, strides = affine
            flat = constant.reshape(-1)
            repeated = len(np.unique(flat)) < flat.size
            if repeated or np.any(np.diff(flat) < 0):
                reason = BufferReason.REUSE if repeated else BufferReason.REORDER
                source = steps.operand("data", reused=True, reason=reason)
            else:
                source = "data"
            terms = [str(first)] * bool(first) + [f"{s} * {p}" for s, p in zip(strides, chosen, strict=True) if s]
            memlet = Memlet(f"{source}[{subscript([*before, ' + '.join(terms) or '0', *after])}]")
            steps.flat_map("gather", index_ranges(params, out_shape), {"v": memlet}, "out = v", {"out": _write(params)})
            return steps.sdfg
        source = steps.operand("data", reused=True)
        row = Memlet(data=source, subset=subscript([*before, f"0:{size}", *after]), volume=1, dynamic=True)
        tasklet = steps.flat_map(
            "gather",
            index_ranges(params, out_shape),
            {"row": row, "j": Memlet(f"indices[{subscript(chosen)}]")},
            f"out = row[j if j >= 0 else j + {size}]",
            {"out": _write(params)},
        )
        tasklet.in_connectors[connector("row")] = dace.pointer(steps.desc(source).dtype)
        return steps.sdfg


def _write(params: list[str]) -> Memlet:
    return Memlet(f"output[{subscript(params)}]")


class CanonicalShape(CanonicalForward):
    """Canonical Shape: the (sliced, ``start``/``end``) shape of ``data`` as a constant int64 vector.

    The shape is known when the node is expanded, so no data is read: one flat map writes the
    constants, in order.
    """

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        data = sdfg.arrays[input_edge(node, state, "data").data.data]
        dims = list(onnx_shape(data))
        start = getattr(node, "start", None) or 0
        end = getattr(node, "end", None)
        values = [int(v) for v in np.array(dims[start:end], dtype=np.int64)]
        steps = node_builder(node, state, sdfg, drop=("data",))
        if not values:
            return steps.sdfg
        (index,) = index_params(1)
        expression = str(values[-1])
        for k in reversed(range(len(values) - 1)):
            expression = f"({values[k]} if {index} == {k} else {expression})"
        steps.flat_map(
            "shape", {index: f"0:{len(values)}"}, {}, f"out = {expression}", {"out": Memlet(f"shape[{index}]")}
        )
        return steps.sdfg


class CanonicalSize(CanonicalForward):
    """Canonical Size: the element count of ``data`` as a constant int64 scalar (no data is read; one map)."""

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        count = math.prod(onnx_shape(sdfg.arrays[input_edge(node, state, "data").data.data]))
        steps = node_builder(node, state, sdfg, drop=("data",))
        steps.flat_map("size", index_ranges([], ()), {}, f"out = {int(count)}", {"out": Memlet("size[0]")})
        return steps.sdfg


class CanonicalConstantOfShape(CanonicalForward):
    """Canonical ConstantOfShape: the output (of the shape the import inferred) filled with ``value``.

    The shape input is a shape parameter, not data: it is disconnected. One flat map writes the
    constant, row-major.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        shape = output_shape(node, state, sdfg, "output")
        if any(dace.symbolic.issymbolic(size) for size in shape):
            raise unsupported(
                node, f"output shape {tuple(map(str, shape))} unknown at import (a constant shape is needed)"
            )

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg, drop=("input",))
        desc = steps.desc("output")
        shape = onnx_shape(desc)
        value = 0 if node.value is None else np.asarray(node.value).reshape(-1)[0].item()
        if math.prod(shape) > 0:
            params = index_params(len(shape))
            steps.flat_map(
                "fill",
                index_ranges(params, shape),
                {},
                f"out = {literal(value, desc.dtype)}",
                {"out": Memlet(f"output[{subscript(params)}]")},
            )
        return steps.sdfg


def _trilu_k(node, state: SDFGState, sdfg: SDFG) -> int:
    """Trilu's diagonal offset: the constant ``k`` input, 0 without one."""
    return constant_int(node, state, sdfg, "k", "the diagonal offset", default=0)


class CanonicalTrilu(CanonicalForward):
    """Canonical Trilu: the upper (``upper`` 1, the default) or lower triangle of the last two axes of ``input``
    from the diagonal ``k`` on (a constant input, 0 if absent), zeros elsewhere: ``output[..., i, j] = input[...,
    i, j]`` where ``j - i >= k`` (upper) or ``j - i <= k`` (lower), else 0.

    One flat map over the output, produced row-major, reading the input in order.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        rank = len(input_shape(node, state, sdfg, "input"))
        if rank < 2:
            raise unsupported(node, f"input rank {rank} (a matrix or a batch of matrices)")
        _trilu_k(node, state, sdfg)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        k = _trilu_k(node, state, sdfg)
        steps = node_builder(node, state, sdfg, drop=("k",) if input_edge(node, state, "k") is not None else ())
        shape = onnx_shape(steps.desc("input"))
        if math.prod(shape) == 0:
            return steps.sdfg
        dtype = steps.desc("output").dtype
        params = index_params(len(shape))
        row, column = params[-2:]
        kept = f"{column} - {row} {'>=' if node.upper else '<='} {k}"
        steps.flat_map(
            "trilu",
            index_ranges(params, shape),
            {"v": Memlet(f"input[{subscript(params)}]")},
            f"out = v if {kept} else {literal(0, dtype)}",
            {"out": Memlet(f"output[{subscript(params)}]")},
        )
        return steps.sdfg


class CanonicalEyeLike(CanonicalForward):
    """Canonical EyeLike: a matrix shaped like ``input`` (its values are not read: the input is disconnected)
    with ones on the diagonal ``k`` (``output[i, j] = 1`` where ``j - i == k``) and zeros elsewhere, of
    ``dtype`` (default: the input's). One flat map writes the output, row-major.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        rank = len(input_shape(node, state, sdfg, "input"))
        if rank != 2:
            raise unsupported(node, f"input rank {rank} (a matrix)")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg, drop=("input",))
        desc = steps.desc("output")
        shape = onnx_shape(desc)
        if math.prod(shape) == 0:
            return steps.sdfg
        row, column = index_params(2)
        one, zero = literal(1, desc.dtype), literal(0, desc.dtype)
        steps.flat_map(
            "eye",
            index_ranges([row, column], shape),
            {},
            f"out = {one} if {column} - {row} == {int(node.k)} else {zero}",
            {"out": Memlet(f"output[{row}, {column}]")},
        )
        return steps.sdfg


def _block_size(node, state: SDFGState, sdfg: SDFG, data: str, divided: int) -> int:
    """The ``blocksize`` of DepthToSpace or SpaceToDepth, checked against the N x C x H x W ``data``: the channels
    (DepthToSpace, ``divided`` 1) or the height and width (SpaceToDepth, ``divided`` 2 and 3) must divide by
    it (by its square for the channels)."""
    shape = input_shape(node, state, sdfg, data)
    block = int(node.blocksize)
    if len(shape) != 4 or block < 1:
        raise unsupported(node, f"input {list(shape)}, blocksize {block} (N x C x H x W, a positive block)")
    sizes = [shape[1] % (block * block)] if divided == 1 else [shape[2] % block, shape[3] % block]
    if any(sizes):
        raise unsupported(node, f"blocksize {block} does not divide the input {list(shape)}")
    return block


def _mode(node) -> str:
    """The ``mode`` of DepthToSpace or SpaceToDepth: DCR (the default) or CRD; any other is refused."""
    mode = getattr(node, "mode", None) or "DCR"
    if mode not in ("DCR", "CRD"):
        raise unsupported(node, f"mode='{node.mode}'")
    return mode


def _rearranged(steps: ExpansionBuilder, label: str, source: str, ranges: dict, read: list, written: list) -> None:
    """One flat map over ``ranges`` copying ``source[read]`` to ``output[written]`` (the output produced in the
    order of ``ranges``), reading an input another task produces from a REORDER buffer."""
    operand = steps.operand(source, reused=True, reason=BufferReason.REORDER)
    steps.flat_map(
        label,
        ranges,
        {"v": Memlet(f"{operand}[{subscript(read)}]")},
        "out = v",
        {"out": Memlet(f"output[{subscript(written)}]")},
    )


class CanonicalDepthToSpace(CanonicalForward):
    """Canonical DepthToSpace (``blocksize`` b, ``mode`` DCR or CRD) of an N x C x H x W input into N x C/b² x
    H·b x W·b: ``output[n, c, h·b + i, w·b + j] = input[n, (i·b + j)·C/b² + c, h, w]`` (DCR, the default) or
    ``input[n, c·b² + i·b + j, h, w]`` (CRD).

    One flat map over (n, c, h, i, w, j): the output produced row-major, the input read in permuted order
    (a REORDER buffer if another task produces it).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _block_size(node, state, sdfg, "input", 1)
        _mode(node)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        block = _block_size(node, state, sdfg, "input", 1)
        steps = node_builder(node, state, sdfg)
        batch, channels, height, width = onnx_shape(steps.desc("input"))
        if batch * channels * height * width == 0:
            return steps.sdfg
        out_channels = channels // (block * block)
        n, c, h, i, w, j = index_params(6)
        ranges = index_ranges([n, c, h, i, w, j], [batch, out_channels, height, block, width, block])
        if _mode(node) == "DCR":
            channel = f"({i} * {block} + {j}) * {out_channels} + {c}"
        else:
            channel = f"{c} * {block * block} + {i} * {block} + {j}"
        written = [n, c, f"{h} * {block} + {i}", f"{w} * {block} + {j}"]
        _rearranged(steps, "depth_to_space", "input", ranges, [n, channel, h, w], written)
        return steps.sdfg


class CanonicalSpaceToDepth(CanonicalForward):
    """Canonical SpaceToDepth (``blocksize`` b, ``mode`` DCR or CRD) of an N x C x H x W input into N x C·b² x
    H/b x W/b: ``output[n, (i·b + j)·C + c, h, w]`` (DCR, the default) or ``output[n, c·b² + i·b + j, h, w]``
    (CRD) ``= input[n, c, h·b + i, w·b + j]``.

    One flat map over (n, i, j, c, h, w) (DCR) or (n, c, i, j, h, w) (CRD): the output produced row-major, the
    input read in permuted order (a REORDER buffer if another task produces it).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _block_size(node, state, sdfg, "input", 2)
        _mode(node)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        block = _block_size(node, state, sdfg, "input", 2)
        steps = node_builder(node, state, sdfg)
        batch, channels, height, width = onnx_shape(steps.desc("input"))
        if batch * channels * height * width == 0:
            return steps.sdfg
        n, i, j, c, h, w = index_params(6)
        if _mode(node) == "DCR":
            order, sizes = [n, i, j, c, h, w], [batch, block, block, channels]
            channel = f"({i} * {block} + {j}) * {channels} + {c}"
        else:
            order, sizes = [n, c, i, j, h, w], [batch, channels, block, block]
            channel = f"{c} * {block * block} + {i} * {block} + {j}"
        ranges = index_ranges(order, [*sizes, height // block, width // block])
        read = [n, c, f"{h} * {block} + {i}", f"{w} * {block} + {j}"]
        _rearranged(steps, "space_to_depth", "input", ranges, read, [n, channel, h, w])
        return steps.sdfg


IMPLEMENTATIONS = (
    _copy_implementation("Reshape", "data", "reshaped", ("shape",)),
    _copy_implementation("Flatten", "input", "output", ()),
    _copy_implementation("Squeeze", "data", "squeezed", ("axes",)),
    _copy_implementation("Unsqueeze", "data", "expanded", ("axes",)),
    Implementation("Transpose", CANONICAL, CanonicalTranspose),
    Implementation("Concat", CANONICAL, CanonicalConcat),
    Implementation("Slice", CANONICAL, CanonicalSlice),
    Implementation("Gather", CANONICAL, CanonicalGather),
    Implementation("Split", CANONICAL, CanonicalSplit),
    Implementation("Expand", CANONICAL, CanonicalExpand),
    Implementation("Tile", CANONICAL, CanonicalTile),
    Implementation("Range", CANONICAL, CanonicalRange),
    Implementation("Shape", CANONICAL, CanonicalShape),
    Implementation("Size", CANONICAL, CanonicalSize),
    Implementation("ConstantOfShape", CANONICAL, CanonicalConstantOfShape),
    Implementation("Trilu", CANONICAL, CanonicalTrilu),
    Implementation("EyeLike", CANONICAL, CanonicalEyeLike),
    Implementation("DepthToSpace", CANONICAL, CanonicalDepthToSpace),
    Implementation("SpaceToDepth", CANONICAL, CanonicalSpaceToDepth),
)
