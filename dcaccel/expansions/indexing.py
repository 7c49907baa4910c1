"""Canonical ops that place elements by index: OneHot, Compress, Col2Im and MaxUnpool.

Their output shapes come from constant inputs (``depth``, the ``condition``, ``image_shape`` and
``block_shape``, ``output_shape``), which the import gives the output (:mod:`dcaccel.frontend.shapes`); the
constants are folded into the expansion. An op whose output shape would depend on the data is refused at
import.
"""

import copy
import math

import dace
import numpy as np
from dace import SDFG, Memlet, SDFGState

from dcaccel.expansions.builder import WCR_SUM, at_axis, connector, index_params, index_ranges, literal, subscript
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    constant_input,
    constant_int,
    input_shape,
    node_builder,
    normalize_axis,
    onnx_shape,
    output_shape,
    unsupported,
    wrong_shape,
)


def _constant(node, state: SDFGState, sdfg: SDFG, name: str) -> np.ndarray:
    """The value of the constant input ``name``; :class:`UnsupportedOpError` if it is data."""
    value = constant_input(node, state, sdfg, name)
    if value is None:
        raise unsupported(node, f"input '{name}' must be a constant")
    return value


def _depth(node, state: SDFGState, sdfg: SDFG) -> int:
    """OneHot's ``depth`` (a constant of one element, any numeric type)."""
    return constant_int(node, state, sdfg, "depth", "the number of classes")


class CanonicalOneHot(CanonicalForward):
    """Canonical OneHot: ``y[a, k, b] = on if k == indices[a, b] else off`` along ``axis`` (``k`` in
    ``[0, depth)``, negative indices wrapped by ``depth``, an index outside ``[-depth, depth)`` all ``off``).

    ``depth`` is a constant; ``values`` (``[off, on]``) is folded when constant, else every element reads the
    one it writes (a dynamic memlet). One flat map over the output, produced row-major; each index is read
    ``depth`` times.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        rank = len(input_shape(node, state, sdfg, "indices"))
        axis = node.axis if node.axis >= 0 else node.axis + rank + 1
        if not 0 <= axis <= rank:
            raise unsupported(node, f"axis {node.axis} out of range for rank {rank + 1}")
        depth = _depth(node, state, sdfg)
        out_shape = output_shape(node, state, sdfg, "output")
        if len(out_shape) != rank + 1 or out_shape[axis] != depth:
            raise wrong_shape(node, f"imported output shape {list(out_shape)} does not have depth {depth} at {axis}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        depth = _depth(node, state, sdfg)
        values = constant_input(node, state, sdfg, "values")
        steps = node_builder(node, state, sdfg, drop=("depth", *(("values",) if values is not None else ())))
        out_shape = onnx_shape(steps.desc("output"))
        dtype = steps.desc("output").dtype
        if math.prod(out_shape) == 0:
            return steps.sdfg
        axis = node.axis if node.axis >= 0 else node.axis + len(out_shape)
        params = index_params(len(out_shape))
        indices = steps.operand("indices", reused=depth > 1)
        inputs = {"j": Memlet(f"{indices}[{subscript(params[:axis] + params[axis + 1 :])}]")}
        match = f"w = dace.int64(j)\nhot = (w if w >= 0 else w + {depth}) == {params[axis]}\n"
        if values is None:
            source = steps.operand("values", reused=True)
            inputs["pair"] = Memlet(data=source, subset="0:2", volume=1, dynamic=True)
            code = match + "out = pair[1 if hot else 0]"
        else:
            off, on = (literal(v, dtype) for v in values.reshape(-1)[:2])
            code = match + f"out = {on} if hot else {off}"
        tasklet = steps.flat_map(
            "onehot",
            index_ranges(params, out_shape),
            inputs,
            code,
            {"out": Memlet(f"output[{subscript(params)}]")},
        )
        if values is None:
            tasklet.in_connectors[connector("pair")] = dace.pointer(steps.desc(source).dtype)
        return steps.sdfg


def _kept(node, state: SDFGState, sdfg: SDFG) -> tuple[int | None, np.ndarray]:
    """Compress's axis (None: the flattened input) and the positions along it its constant condition keeps."""
    shape = input_shape(node, state, sdfg, "input")
    axis = None if node.axis is None else normalize_axis(node.axis, len(shape), node)
    length = math.prod(shape) if axis is None else shape[axis]
    condition = _constant(node, state, sdfg, "condition").reshape(-1)[:length]
    return axis, np.flatnonzero(condition)


def _runs(kept: np.ndarray) -> list[tuple[int, int, int, int]]:
    """``kept`` split greedily into arithmetic runs: ``(output offset, first, step, length)`` each."""
    runs, start = [], 0
    while start < kept.size:
        step = int(kept[start + 1] - kept[start]) if start + 1 < kept.size else 1
        end = start + 1
        while end < kept.size and kept[end] - kept[end - 1] == step:
            end += 1
        runs.append((start, int(kept[start]), step, end - start))
        start = end
    return runs


class CanonicalCompress(CanonicalForward):
    """Canonical Compress of a constant ``condition``: the slices along ``axis`` (elements of the flattened
    input without one) whose condition is true, in order; a gather with constant indices.

    The kept positions are split into runs of one step (``first + step * j``), copied by tasks of equal size
    (static memlets), as Concat's: ``g`` kept positions each, ``g`` the greatest common divisor of the runs'
    lengths; a run of ``g`` is one flat map, a longer one a task map of one task per ``g`` positions (of the
    flattened input: one flat map per ``g`` positions). The output is produced run by run, row-major within a
    task.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        axis, kept = _kept(node, state, sdfg)
        shape = input_shape(node, state, sdfg, "input")
        expected = [len(kept)] if axis is None else at_axis(shape, axis, len(kept))
        if list(output_shape(node, state, sdfg, "output")) != expected:
            raise wrong_shape(node, f"imported output shape is not the kept {expected}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        axis, kept = _kept(node, state, sdfg)
        steps = node_builder(node, state, sdfg, drop=("condition",))
        shape, out_shape = onnx_shape(steps.desc("input")), onnx_shape(steps.desc("output"))
        if math.prod(out_shape) == 0:
            return steps.sdfg
        params = index_params(len(out_shape))
        strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
        runs = _runs(kept)
        slab = math.gcd(*(length for *_, length in runs))
        chosen = params[0] if axis is None else params[axis]
        for number, (offset, first, step, length) in enumerate(runs):
            if axis is None:  # a slab of a run one flat map each (a task map's memlets would divide its parameter)
                for k in range(length // slab):
                    start = first + step * slab * k
                    position = f"{start} + {step} * {chosen}"
                    index = [f"(({position}) // {s}) % {n}" for s, n in zip(strides, shape, strict=True)]
                    steps.flat_map(
                        f"compress{number}_{k}" if length > slab else f"compress{number}",
                        {chosen: f"0:{slab}"},
                        {"v": Memlet(f"input[{subscript(index)}]")},
                        "out = v",
                        {"out": Memlet(f"output[{offset + slab * k} + {chosen}]")},
                    )
                continue
            kept_index = chosen if length == slab else f"__s * {slab} + {chosen}"
            index = at_axis(params, axis, f"{first} + {step} * ({kept_index})")
            target = [f"{offset} + {kept_index}" if p == chosen else p for p in params]
            body = index_ranges(params, [slab if p == chosen else n for p, n in zip(params, out_shape, strict=True)])
            read, write = {"v": Memlet(f"input[{subscript(index)}]")}, {"out": Memlet(f"output[{subscript(target)}]")}
            if length == slab:
                steps.flat_map(f"compress{number}", body, read, "out = v", write)
            else:
                slabs = {"__s": f"0:{length // slab}"}
                steps.task_map(f"compress{number}", slabs, "slab", body, read, "out = v", write)
        return steps.sdfg


def _col2im_geometry(node, state: SDFGState, sdfg: SDFG) -> tuple[list[int], list[int], list[int], list, list, list]:
    """Col2Im's image and block shapes (constants), the number of blocks along each axis, strides, begin pads
    and dilations; :class:`UnsupportedOpError` when the columns of the input are not that many blocks."""
    image = [int(v) for v in _constant(node, state, sdfg, "image_shape").reshape(-1)]
    block = [int(v) for v in _constant(node, state, sdfg, "block_shape").reshape(-1)]
    dims = len(image)
    strides = list(node.strides or [1] * dims)
    dilations = list(node.dilations or [1] * dims)
    pads = list(node.pads or [0] * (2 * dims))
    counts = [
        (image[d] + pads[d] + pads[d + dims] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(dims)
    ]
    batch, rows, columns = input_shape(node, state, sdfg, "input")
    if rows % math.prod(block) or columns != math.prod(counts):
        raise unsupported(node, f"input ({batch}, {rows}, {columns}) is not blocks {block} of {counts} positions")
    return image, block, counts, strides, pads[:dims], dilations


class CanonicalCol2Im(CanonicalForward):
    """Canonical Col2Im: ``output[n, c, y] = sum_b input[n, c * B + b, l]`` over the block positions ``b`` whose
    column ``l`` covers image position ``y`` (``y + pad - b * dilation = l * stride`` on every axis).

    ``image_shape`` and ``block_shape`` are constants. The output is zeroed first; one flat map over the output
    positions and the block positions (block innermost) accumulates with a WCR sum, each reading the element
    of its row of ``input`` that covers it (a dynamic memlet), or 0. The output is produced row-major.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        image, *_ = _col2im_geometry(node, state, sdfg)
        out_shape = output_shape(node, state, sdfg, "output")
        if list(out_shape[2:]) != image:
            raise wrong_shape(node, f"imported output shape {list(out_shape)} is not of image shape {image}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        image, block, counts, strides, pads, dilations = _col2im_geometry(node, state, sdfg)
        steps = node_builder(node, state, sdfg, drop=("image_shape", "block_shape"))
        out_shape = onnx_shape(steps.desc("output"))
        dtype = steps.desc("output").dtype
        steps.init("output", literal(0, dtype))
        if math.prod(out_shape) == 0 or math.prod(block) == 0:
            return steps.sdfg
        dims = len(image)
        params = index_params(len(out_shape))
        blocks = index_params(dims, "__b")
        channel = " + ".join(
            [f"{params[1]} * {math.prod(block)}"] + [f"{b} * {math.prod(block[d + 1 :])}" for d, b in enumerate(blocks)]
        )
        source = steps.operand("input", reused=True)
        row = Memlet(data=source, subset=f"{params[0]}, {channel}, 0:{math.prod(counts)}", volume=1, dynamic=True)
        lines = [f"t{d} = {params[2 + d]} + {pads[d]} - {b} * {dilations[d]}" for d, b in enumerate(blocks)]
        covered = " and ".join(
            f"t{d} >= 0 and t{d} % {strides[d]} == 0 and t{d} // {strides[d]} < {counts[d]}" for d in range(dims)
        )
        column = " + ".join(f"(t{d} // {strides[d]}) * {math.prod(counts[d + 1 :])}" for d in range(dims))
        lines.append(f"out = row[{column}] if {covered} else {literal(0, dtype)}")
        tasklet = steps.flat_map(
            "col2im",
            {**index_ranges(params, out_shape), **index_ranges(blocks, block)},
            {"row": row},
            "\n".join(lines),
            {"out": Memlet(f"output[{subscript(params)}]", wcr=WCR_SUM)},
        )
        tasklet.in_connectors[connector("row")] = dace.pointer(steps.desc(source).dtype)
        return steps.sdfg


def _unpooled_shape(node, in_shape: tuple) -> list[int]:
    """MaxUnpool's output shape from its attributes: ``(in - 1) * stride - pads + kernel`` per spatial axis (the
    shape MaxPool's indices are positions in)."""
    kernel = list(node.kernel_shape)
    dims = len(kernel)
    strides = list(node.strides or [1] * dims)
    pads = list(node.pads or [0] * (2 * dims))
    spatial = [(in_shape[2 + d] - 1) * strides[d] - pads[d] - pads[d + dims] + kernel[d] for d in range(dims)]
    return [*in_shape[:2], *spatial]


class CanonicalMaxUnpool(CanonicalForward):
    """Canonical MaxUnpool: ``output`` zeroed, then ``output[p] = X[i]`` for every input element, ``p`` the
    position ``I[i]`` (an index MaxPool gives, into the flattened unpooled shape of the attributes) names in
    that shape; ``output_shape`` (a constant) may extend it (the extra positions stay zero).

    Two flat maps: ``zero`` writes the output row-major, then the sequential ``unpool`` over ``X`` row-major writes
    each element into it at a data-dependent position (a dynamic memlet; it reads the zeroed output, as a scatter
    does, so that the output is a new version).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        in_shape = input_shape(node, state, sdfg, "X")
        if in_shape != input_shape(node, state, sdfg, "I"):
            raise unsupported(node, "X and I differ in shape")
        unpooled, shape = _unpooled_shape(node, in_shape), output_shape(node, state, sdfg, "output")
        if len(shape) != len(unpooled) or any(u > s for u, s in zip(unpooled, shape, strict=True)):
            raise wrong_shape(node, f"imported output shape {list(shape)} does not hold the unpooled {unpooled}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg, drop=("output_shape",))
        in_shape, out_shape = onnx_shape(steps.desc("X")), onnx_shape(steps.desc("output"))
        unpooled = _unpooled_shape(node, in_shape)
        dtype = steps.desc("output").dtype
        every = index_params(len(out_shape))
        if math.prod(out_shape):
            zero = {"out": Memlet(f"output[{subscript(every)}]")}
            steps.flat_map("zero", index_ranges(every, out_shape), {}, f"out = {literal(0, dtype)}", zero)
        if math.prod(in_shape) == 0:
            return steps.sdfg
        params = index_params(len(in_shape))
        target = ", ".join(
            f"(j // {math.prod(unpooled[d + 1 :])}) % {n}" for d, n in enumerate(unpooled) if out_shape[d] != 1
        )
        whole = Memlet(data="output", subset=subscript([f"0:{n}" for n in out_shape]), volume=1, dynamic=True)
        tasklet = steps.flat_map(
            "unpool",
            index_ranges(params, in_shape),
            {"x": Memlet(f"X[{subscript(params)}]"), "j": Memlet(f"I[{subscript(params)}]"), "prev": whole},
            f"out[{target}] = x" if target else "out = x",
            {"out": copy.deepcopy(whole)},
        )
        tasklet.in_connectors[connector("prev")] = dace.pointer(dtype)
        tasklet.out_connectors[connector("out")] = dace.pointer(dtype)
        steps.state.entry_node(tasklet).map.schedule = dace.ScheduleType.Sequential
        return steps.sdfg


IMPLEMENTATIONS = (
    Implementation("OneHot", CANONICAL, CanonicalOneHot),
    Implementation("Compress", CANONICAL, CanonicalCompress),
    Implementation("Col2Im", CANONICAL, CanonicalCol2Im),
    Implementation("MaxUnpool", CANONICAL, CanonicalMaxUnpool),
)
