"""Canonical sampling ops: GridSample, RoiAlign and DeformConv, which read their input at coordinates that are data.

An output element samples a plane of the input at a point given by another input (GridSample's grid, RoiAlign's
regions, DeformConv's offsets): which elements it reads is known only when it runs. Each op is lowered in two
kinds of steps, so that every task reads equal volumes from its inputs (the DAG contract):

- ``taps``: per point and tap, the tap's weight and its index in the plane (double and int64 containers),
  computed from the point's coordinates;
- the weighted sum: per output element, its taps' weights and indices and as many elements of the plane, read
  through a dynamic memlet over the whole plane (the idiom of :mod:`dcaccel.expansions.gather`), in C++.

A plane read at data-dependent positions, and an input read again (a coordinate per tap, a region per bin), is
copied into a REUSE buffer first when another task produces it
(:meth:`~dcaccel.expansions.builder.ExpansionBuilder.operand`).

The taps along one axis at pixel coordinate ``x`` (:func:`_tap`, ONNX's GridSample reference): ``nearest`` reads
``rint(x)``; ``linear`` reads ``floor(x)`` and ``floor(x) + 1`` weighted ``1 - t`` and ``t`` (``t = x - floor(x)``);
``cubic`` reads ``floor(x) - 1`` … ``floor(x) + 2`` weighted by Keys' cubic convolution (``a = -0.75``). A tap
outside the axis weighs zero (``zeros``), reads the nearest border element (``border``) or the element reflected
into the axis (``reflection``). Coordinates and weights are computed in double precision.
"""

import math

import dace
from dace import SDFG, Memlet, SDFGState
from dace.sdfg.utils import in_desc_with_name

from dcaccel.buffers import BufferReason, mark_buffer
from dcaccel.expansions.builder import ExpansionBuilder, connector, index_params, index_ranges, subscript
from dcaccel.expansions.conv import ConvGeometry, add_im2col_steps
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.mmm import MMM
from dcaccel.expansions.node import CanonicalForward, input_edge, input_shape, node_builder, output_shape, unsupported

TAPS = {"nearest": 1, "linear": 2, "cubic": 4}
"""Taps per axis of each interpolation mode."""

MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic", "nearest": "nearest"}
"""GridSample's modes (opset 16 names them ``bilinear`` and ``bicubic``) by the interpolation they denote."""

PADDINGS = ("zeros", "border", "reflection")

CUBIC_A = -0.75

SAMPLED_TYPES = (dace.float32, dace.float64)
"""The element types of the sampled inputs and coordinates (computed in double precision)."""


def _reflect(var: str, low: float, high: float) -> list[str]:
    """C++ lines reflecting the double ``var`` at the borders ``low`` and ``high`` until it lies between them (ONNX's
    ``_gs_reflect``); an axis of one point (``low == high``) reflects every coordinate onto it."""
    span = high - low
    if span <= 0:
        return [f"{var} = {low!r};"]
    lo, hi = repr(low), repr(high)

    def reflected(distance: str, near: str, far: str, sign: str) -> list[str]:
        return [
            f"    const double __dx = {distance};",
            f"    const long __n = (long)(__dx / {span!r});",
            f"    const double __r = __dx - __n * {span!r};",
            f"    {var} = __n % 2 == 0 ? {near} {sign} __r : {far} {'-' if sign == '+' else '+'} __r;",
        ]

    return [
        f"if ({var} < {lo}) {{",
        *reflected(f"{lo} - {var}", lo, hi, "+"),
        f"}} else if ({var} > {hi}) {{",
        *reflected(f"{var} - {hi}", hi, lo, "-"),
        "}",
    ]


def _tap(mode: str, padding: str, d: int, size: int, bounds: tuple[float, float]) -> tuple[list[str], str | None]:
    """C++ lines declaring, from the pixel coordinate ``__p{d}`` on axis ``d`` (of ``size``) and the tap ``__k{d}``
    (a map parameter), the tap's index ``__j{d}`` after ``padding`` and, unless ``nearest``, its weight ``__w{d}``;
    with ``zeros`` padding also the condition that the tap lies inside the axis."""
    p, k = f"__p{d}", f"__k{d}"
    if mode == "nearest":
        lines = [f"const long __n{d} = (long)std::nearbyint({p});"]
    else:
        t = f"__t{d}"
        lines = [f"const double __f{d} = std::floor({p});", f"const double {t} = {p} - __f{d};"]
        lines.append(f"const long __n{d} = (long)__f{d} + {k}{' - 1' if mode == 'cubic' else ''};")
        if mode == "linear":
            weights = [f"1 - {t}", t]
        else:
            a = CUBIC_A
            near = "(({a2!r} * {x} - {a3!r}) * {x} * {x} + 1)"
            far = "((({a!r} * {x} - {a5!r}) * {x} + {a8!r}) * {x} - {a4!r})"
            constants = {"a": a, "a2": a + 2, "a3": a + 3, "a4": 4 * a, "a5": 5 * a, "a8": 8 * a}
            weights = [
                far.format(x=f"({t} + 1)", **constants),
                near.format(x=t, **constants),
                near.format(x=f"(1 - {t})", **constants),
                far.format(x=f"(2 - {t})", **constants),
            ]
        weight = weights[-1]
        for tap in reversed(range(len(weights) - 1)):
            weight = f"({k} == {tap} ? {weights[tap]} : {weight})"
        lines.append(f"const double __w{d} = {weight};")
    if padding == "border":
        return [*lines, f"const long __j{d} = std::min(std::max(__n{d}, 0L), {size - 1}L);"], None
    if padding == "reflection":
        lines += [f"double __q{d} = __n{d};", *_reflect(f"__q{d}", *bounds)]
        return [*lines, f"const long __j{d} = (long)__q{d};"], None
    return [*lines, f"const long __j{d} = __n{d};"], f"__j{d} >= 0 && __j{d} < {size}"


def _add_taps(
    steps: ExpansionBuilder,
    label: str,
    ranges: dict[str, str],
    inputs: dict[str, Memlet],
    coordinates: list[str],
    sampling: tuple[str, str, tuple, list],
    outputs: tuple[str, str],
) -> None:
    """The step ``label`` over ``ranges`` (which include the taps ``__k0, __k1, ...``) writing the weight and the
    row-major index in the sampled plane of one tap: ``outputs`` are the subscripted weight and index. ``coordinates``
    are the C++ lines declaring the pixel coordinates ``__p0, __p1, ...`` from ``inputs``; ``sampling`` is the
    mode, padding, plane sizes and reflection borders. A tap outside the plane under ``zeros`` weighs 0 at
    index 0."""
    mode, padding, sizes, bounds = sampling
    lines, weights, inside = list(coordinates), [], []
    for d, size in enumerate(sizes):
        tap, condition = _tap(mode, padding, d, size, bounds[d] if bounds else (0.0, 0.0))
        lines += tap
        weights += [] if mode == "nearest" else [f"__w{d}"]
        inside += [condition] if condition else []
    weight = " * ".join(weights) or "1.0"
    index = " + ".join(f"__j{d} * {math.prod(sizes[d + 1 :])}" for d in range(len(sizes)))
    if inside:
        condition = " && ".join(inside)
        lines += [f"__weight = ({condition}) ? {weight} : 0.0;", f"__index = ({condition}) ? {index} : 0;"]
    else:
        lines += [f"__weight = {weight};", f"__index = {index};"]
    weight_memlet, index_memlet = outputs
    steps.flat_map(
        label,
        ranges,
        inputs,
        "\n".join(lines),
        {"weight": Memlet(weight_memlet), "index": Memlet(index_memlet)},
        language=dace.Language.CPP,
    )


def _add_weighted_sum(
    steps: ExpansionBuilder, label: str, ranges: dict[str, str], inputs: dict[str, Memlet], taps: int, output: str
) -> None:
    """The step ``label`` over ``ranges``: ``output = Σ weight[t] · x[index[t]]`` over its ``taps`` taps, whose
    weights and indices the memlets ``inputs["weight"]`` and ``inputs["index"]`` hold and whose plane
    ``inputs["x"]`` is (a dynamic memlet of ``taps`` reads)."""
    if taps == 1:
        code = "__out = __weight * __x[__index];"
    else:
        code = f"double __acc = 0;\nfor (long __t = 0; __t < {taps}; ++__t) __acc += __weight[__t] * __x[__index[__t]];"
        code += "\n__out = __acc;"
    tasklet = steps.flat_map(label, ranges, inputs, code, {"out": Memlet(output)}, language=dace.Language.CPP)
    _pointer_inputs(tasklet, steps, x=inputs["x"].data)


def _tap_buffers(steps: ExpansionBuilder, shape: tuple, reason: BufferReason | None) -> tuple[str, str]:
    """The containers of the weights (double) and indices (int64) of taps, of ``shape``, marked ``reason``."""
    return steps.transient("weight", shape, dace.float64, reason), steps.transient("index", shape, dace.int64, reason)


def _plane(source: str, subset: str, taps: int) -> Memlet:
    """The dynamic memlet of ``taps`` reads at data-dependent positions of ``source[subset]``."""
    return Memlet(data=source, subset=subset, volume=taps, dynamic=True)


def _float_types(node, state: SDFGState, sdfg: SDFG, *connectors: str) -> None:
    """:class:`UnsupportedOpError` unless the inputs on ``connectors`` are float32 or float64."""
    for name in connectors:
        dtype = in_desc_with_name(node, state, sdfg, name).dtype
        if dtype not in SAMPLED_TYPES:
            raise unsupported(node, f"{name} of element type {dtype.to_string()} (supported: float32, float64)")


def _pointer_inputs(tasklet, steps: ExpansionBuilder, **sources: str) -> None:
    """Make the connectors ``sources`` (name -> container) of ``tasklet`` pointers into their containers."""
    for name, source in sources.items():
        tasklet.in_connectors[connector(name)] = dace.pointer(steps.desc(source).dtype)


# ---------------------------------------------------------------------------------------------
# GridSample


def _grid_sample_attributes(node) -> tuple[str, str, bool]:
    """GridSample's interpolation (``nearest``, ``linear``, ``cubic``), padding mode and align_corners."""
    mode = MODES.get(node.mode or "linear")
    if mode is None:
        raise unsupported(node, f"mode='{node.mode}'")
    padding = node.padding_mode or "zeros"
    if padding not in PADDINGS:
        raise unsupported(node, f"padding_mode='{padding}'")
    return mode, padding, bool(node.align_corners)


def _denormalized(g: str, size: int, align_corners: bool) -> str:
    """C++: the pixel coordinate of the normalized grid coordinate ``g`` on an axis of ``size``."""
    return f"({g} + 1) * {(size - 1) / 2!r}" if align_corners else f"(({g} + 1) * {size} - 1) / 2"


class CanonicalGridSample(CanonicalForward):
    """Canonical GridSample: ``Y[n, c, o...] = X[n, c]`` sampled at the point ``grid[n, o...]`` (normalized to
    [-1, 1], its last dimension the coordinates of the spatial axes in reverse order), nearest, linear or cubic,
    with zeros, border or reflection padding (the module docstring), any number of spatial axes. With ``border``
    padding a point outside the plane is clamped to it, except under ``cubic``, which clamps its taps only
    (onnxruntime's and PyTorch's rule; ONNX's reference clamps the point too).

    Two flat maps:

    1. ``taps`` over the points and their ``T = taps ** axes`` taps (``n, o..., k...``): each reads its point's
       coordinates and writes the tap's weight and index in the plane, point by point (a REUSE buffer when
       there is more than one channel: every channel reads them);
    2. ``grid_sample`` over the output, produced row-major: each element reads its point's ``T`` weights and
       indices and ``T`` elements of the plane ``X[n, c]`` (a dynamic memlet), and sums their products.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _grid_sample_attributes(node)
        _float_types(node, state, sdfg, "X", "grid")
        x, grid = input_shape(node, state, sdfg, "X"), input_shape(node, state, sdfg, "grid")
        if len(x) < 3 or len(grid) != len(x) or grid[-1] != len(x) - 2 or grid[0] != x[0]:
            raise unsupported(node, f"X {x} with grid {grid}")
        if 0 in x[2:]:
            raise unsupported(node, f"X {x}: an empty plane has nothing to sample")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        mode, padding, align_corners = _grid_sample_attributes(node)
        steps = node_builder(node, state, sdfg)
        (_, channels, *sizes), out_shape = input_shape(node, state, sdfg, "X"), output_shape(node, state, sdfg, "Y")
        if 0 in out_shape:
            return steps.sdfg
        rank, taps = len(sizes), TAPS[mode] ** len(sizes)
        params = index_params(len(out_shape))
        n, c, points = params[0], params[1], params[2:]
        grid = steps.operand("grid", reused=taps > 1)
        lines = []
        for d, size in enumerate(sizes):
            lines.append(f"double __p{d} = {_denormalized(f'__grid[{rank - 1 - d}]', size, align_corners)};")
        bounds = [(0.0, float(size - 1)) if align_corners else (-0.5, size - 0.5) for size in sizes]
        if mode == "nearest":
            lines += [f"__p{d} = std::nearbyint(__p{d});" for d in range(rank)]
        for d, (size, (low, high)) in enumerate(zip(sizes, bounds, strict=True)):
            if padding == "border" and mode != "cubic":
                lines.append(f"__p{d} = std::min(std::max(__p{d}, 0.0), {float(size - 1)!r});")
            elif padding == "reflection":
                lines += _reflect(f"__p{d}", low, high)
        tap_params = [f"__k{d}" for d in range(rank)]
        tap = " + ".join(f"{TAPS[mode] ** (rank - 1 - d)} * {k}" for d, k in enumerate(tap_params))
        point = [n, *points]
        weight, index = _tap_buffers(
            steps, (out_shape[0], *out_shape[2:], taps), BufferReason.REUSE if channels > 1 else None
        )
        _add_taps(
            steps,
            "taps",
            {**index_ranges(point, [out_shape[0], *out_shape[2:]]), **{k: f"0:{TAPS[mode]}" for k in tap_params}},
            {"grid": Memlet(f"{grid}[{subscript([*point, f'0:{rank}'])}]")},
            lines,
            (mode, padding, tuple(sizes), bounds),
            (f"{weight}[{subscript([*point, tap])}]", f"{index}[{subscript([*point, tap])}]"),
        )
        every_tap = subscript([*point, f"0:{taps}"])
        _add_weighted_sum(
            steps,
            "grid_sample",
            index_ranges(params, out_shape),
            {
                "weight": Memlet(f"{weight}[{every_tap}]"),
                "index": Memlet(f"{index}[{every_tap}]"),
                "x": _plane(steps.operand("X", reused=True), subscript([n, c, *(f"0:{s}" for s in sizes)]), taps),
            },
            taps,
            f"Y[{subscript(params)}]",
        )
        return steps.sdfg


# ---------------------------------------------------------------------------------------------
# RoiAlign


def _roi_align_attributes(node) -> tuple[str, bool, int]:
    """RoiAlign's mode (``avg``, ``max``), whether it uses the half-pixel coordinates, and its sampling ratio."""
    mode = node.mode or "avg"
    if mode not in ("avg", "max"):
        raise unsupported(node, f"mode='{mode}'")
    transformation = getattr(node, "coordinate_transformation_mode", None) or "output_half_pixel"
    if transformation not in ("half_pixel", "output_half_pixel"):
        raise unsupported(node, f"coordinate_transformation_mode='{transformation}'")
    ratio = int(node.sampling_ratio or 0)
    if ratio <= 0:
        raise unsupported(node, f"sampling_ratio={ratio} (adaptive: the number of samples a bin reads is data)")
    return mode, transformation == "half_pixel", ratio


def _add_roi_axis(steps: ExpansionBuilder, node, axis: str, rois: str, half_pixel: bool, sizes: tuple) -> tuple:
    """The ``rows`` (``axis`` y) or ``columns`` (x) step of RoiAlign: per region ``__r``, bin ``__o``, sample
    ``__s`` and corner ``__k`` (low, high) along the axis, its weight (0 for a sample more than a pixel outside)
    and index; returns the weight and index containers (REUSE buffers: every bin of the other axis reads them)."""
    regions, channels, height, width = sizes
    ratio = int(node.sampling_ratio)
    bins, size, first = (int(node.output_height), height, 1) if axis == "y" else (int(node.output_width), width, 0)
    scale, offset = float(node.spatial_scale), 0.5 if half_pixel else 0.0
    shape = (regions, bins, ratio, 2)
    weight = steps.transient(f"{axis}_weight", shape, dace.float64, BufferReason.REUSE)
    index = steps.transient(f"{axis}_index", shape, dace.int64, BufferReason.REUSE)
    lines = [
        f"const double __start = __low * {scale!r} - {offset!r};",
        f"double __length = __high * {scale!r} - {offset!r} - __start;",
        *([] if half_pixel else ["__length = std::max(__length, 1.0);"]),
        f"const double __bin = __length / {bins};",
        f"double __p = __start + __o * __bin + (__s + 0.5) * __bin / {ratio};",
        f"const double __inside = (__p >= -1.0 && __p <= {size}) ? 1.0 : 0.0;",
        "__p = std::max(__p, 0.0);",
        "long __lower = (long)__p;",
        "long __upper = __lower + 1;",
        f"if (__lower >= {size - 1}) {{",
        f"    __lower = {size - 1};",
        f"    __upper = {size - 1};",
        f"    __p = {size - 1};",
        "}",
        "const double __l = __p - __lower;",
        "__weight = __inside * (__k == 0 ? 1 - __l : __l);",
        "__index = __k == 0 ? __lower : __upper;",
    ]
    element = "__r, __o, __s, __k"
    steps.flat_map(
        "rows" if axis == "y" else "columns",
        index_ranges(["__r", "__o", "__s", "__k"], shape),
        {"low": Memlet(f"{rois}[__r, {first}]"), "high": Memlet(f"{rois}[__r, {first + 2}]")},
        "\n".join(lines),
        {"weight": Memlet(f"{weight}[{element}]"), "index": Memlet(f"{index}[{element}]")},
        language=dace.Language.CPP,
    )
    return weight, index


def _roi_align_code(mode: str, ratio: int) -> str:
    """C++ code of one output bin of RoiAlign from its samples' weights and indices (see :class:`CanonicalRoiAlign`)."""
    corners = [f"__weight[4 * __s + {k}] * __x[__index[4 * __s + {k}]]" for k in range(4)]
    lines = ["double __acc = 0;", f"for (long __s = 0; __s < {ratio * ratio}; ++__s) {{"]
    lines += [f"    const double __v{k} = {corner};" for k, corner in enumerate(corners)]
    if mode == "avg":
        lines += ["    __acc += __v0 + __v1 + __v2 + __v3;", "}", f"__out = __acc / {ratio * ratio};"]
    else:
        lines += [
            "    const double __v = std::max(std::max(__v0, __v1), std::max(__v2, __v3));",
            "    __acc = __s == 0 ? __v : std::max(__acc, __v);",
            "}",
            "__out = __acc;",
        ]
    return "\n".join(lines)


class CanonicalRoiAlign(CanonicalForward):
    """Canonical RoiAlign: ``Y[r, c, i, j]``, the average (``avg``) or maximum (``max``) of ``sampling_ratio²``
    bilinear samples of ``X[batch_indices[r], c]`` spread evenly over bin ``(i, j)`` of region ``rois[r]``
    (``x1, y1, x2, y2`` times ``spatial_scale``, shifted by half a pixel with ``half_pixel``; with
    ``output_half_pixel`` a region is at least one pixel wide). A sample more than one pixel outside the plane
    reads zero, one within is clamped to it, and ``max`` takes the largest of the four weighted corners of each
    sample (onnxruntime's rules). An adaptive ``sampling_ratio`` (0) is refused: the number of samples would be
    data. A batch index outside X's batch is undefined here (onnxruntime refuses it). Four flat maps:

    1. ``rows``: per region, bin row, sample row and corner (low, high), its weight and row (from ``y1, y2``);
    2. ``columns``: the same along x (from ``x1, x2``);
    3. ``taps``: per region, bin, sample and corner, the weight (the product of its row's and column's) and the
       index in X (``batch_indices[r]``'s plane, the row and the column), bin by bin;
    4. ``roi_align`` over the output, produced row-major: each bin reads its ``4·sampling_ratio²`` weights and
       indices and as many elements of X's channel (a dynamic memlet over every batch element's plane).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _roi_align_attributes(node)
        _float_types(node, state, sdfg, "X", "rois")
        x = input_shape(node, state, sdfg, "X")
        if len(x) != 4:
            raise unsupported(node, f"X of shape {x} (supported: N, C, H, W)")
        if 0 in (x[0], *x[2:]):
            raise unsupported(node, f"X {x}: an empty plane has nothing to sample")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        mode, half_pixel, ratio = _roi_align_attributes(node)
        steps = node_builder(node, state, sdfg)
        (batch, channels, height, width), out_shape = (
            input_shape(node, state, sdfg, "X"),
            output_shape(node, state, sdfg, "Y"),
        )
        if 0 in out_shape:
            return steps.sdfg
        regions, _, bins_h, bins_w = out_shape
        rois = steps.operand("rois", reused=True)
        sizes = (regions, channels, height, width)
        y_weight, y_index = _add_roi_axis(steps, node, "y", rois, half_pixel, sizes)
        x_weight, x_index = _add_roi_axis(steps, node, "x", rois, half_pixel, sizes)
        samples = 4 * ratio * ratio
        reason = BufferReason.REUSE if channels > 1 else None
        weight, index = _tap_buffers(steps, (regions, bins_h, bins_w, samples), reason)
        tap = f"4 * ({ratio} * __sy + __sx) + 2 * __ky + __kx"
        steps.flat_map(
            "taps",
            index_ranges(
                ["__r", "__i", "__j", "__sy", "__sx", "__ky", "__kx"],
                (*out_shape[:1], bins_h, bins_w, ratio, ratio, 2, 2),
            ),
            {
                "yw": Memlet(f"{y_weight}[__r, __i, __sy, __ky]"),
                "yi": Memlet(f"{y_index}[__r, __i, __sy, __ky]"),
                "xw": Memlet(f"{x_weight}[__r, __j, __sx, __kx]"),
                "xi": Memlet(f"{x_index}[__r, __j, __sx, __kx]"),
                "batch": Memlet(f"{steps.operand('batch_indices', reused=True)}[__r]"),
            },
            f"__weight = __yw * __xw;\n__index = __batch * {channels * height * width} + __yi * {width} + __xi;",
            {"weight": Memlet(f"{weight}[__r, __i, __j, {tap}]"), "index": Memlet(f"{index}[__r, __i, __j, {tap}]")},
            language=dace.Language.CPP,
        )
        every = f"__r, __i, __j, 0:{samples}"
        plane = steps.operand("X", reused=True)
        tasklet = steps.flat_map(
            "roi_align",
            index_ranges(["__r", "__c", "__i", "__j"], out_shape),
            {
                "weight": Memlet(f"{weight}[{every}]"),
                "index": Memlet(f"{index}[{every}]"),
                "x": _plane(plane, f"0:{batch}, __c, 0:{height}, 0:{width}", samples),
            },
            _roi_align_code(mode, ratio),
            {"out": Memlet("Y[__r, __c, __i, __j]")},
            language=dace.Language.CPP,
        )
        _pointer_inputs(tasklet, steps, x=plane)
        return steps.sdfg


# ---------------------------------------------------------------------------------------------
# DeformConv


def deform_conv_geometry(node, state: SDFGState, sdfg: SDFG) -> tuple[ConvGeometry, int]:
    """The convolution geometry of the 2-D DeformConv ``node`` and its offset groups; :class:`UnsupportedOpError`
    for what it cannot lower."""
    _float_types(node, state, sdfg, "X", "W", "offset")
    x, w = input_shape(node, state, sdfg, "X"), input_shape(node, state, sdfg, "W")
    offset, y = input_shape(node, state, sdfg, "offset"), output_shape(node, state, sdfg, "Y")
    if len(x) != 4 or len(w) != 4:
        raise unsupported(node, f"X {x} with W {w} (supported: 2-D)")
    (batch, channels, *in_sizes), (filters, per_group, *kernel), (*_, out_h, out_w) = x, w, offset
    groups, offset_groups = int(node.group or 1), int(node.offset_group or 1)
    if channels != per_group * groups or filters % groups or channels % offset_groups:
        raise unsupported(node, f"X {x}, W {w} do not split into {groups} groups and {offset_groups} offset groups")
    if node.kernel_shape and tuple(node.kernel_shape) != tuple(kernel):
        raise unsupported(node, f"kernel_shape {list(node.kernel_shape)} is not W's {kernel}")
    if offset[1] != offset_groups * 2 * math.prod(kernel) or tuple(y[2:]) != (out_h, out_w):
        raise unsupported(node, f"offset {offset} for output {y}")
    strides = tuple(int(s) for s in node.strides) if node.strides else (1, 1)
    dilations = tuple(int(s) for s in node.dilations) if node.dilations else (1, 1)
    pads = tuple(int(p) for p in node.pads) if node.pads else (0,) * 4
    geometry = ConvGeometry(
        batch, channels, filters, groups, tuple(in_sizes), tuple(kernel), (out_h, out_w), strides, dilations, pads[:2]
    )
    return geometry, offset_groups


def _add_deformable_im2col(steps: ExpansionBuilder, geometry: ConvGeometry, offset_groups: int, has_mask: bool):
    """``taps`` (the weights and indices of the four bilinear taps of every kernel tap of every offset group at
    every output position, zeros outside X), ``mask`` (the weights times the mask) with a mask, then ``Xr``:
    X_col[g, c·kernel size + y, b·out size + o] = the sum of the four taps of X[b, g·C/G + c] at kernel tap ``y``
    and output position ``o``, one column (patch) after the other within each group."""
    kernel, out, dims = geometry.kernel, geometry.out_params(), geometry.dims
    kernel_params = geometry.kernel_params()
    tap = " + ".join(f"{math.prod(kernel[d + 1 :])} * __y{d}" for d in dims)
    kernel_tap = f"{math.prod(kernel)} * __og + {tap}"  # the offset group's kernel tap, as the offsets count them
    position = ["__b", "__og", *kernel_params, *out]
    shape = (geometry.batch, offset_groups, *kernel, *geometry.out_sizes)
    offset = steps.operand("offset", reused=False)
    weight, index = _tap_buffers(steps, (*shape, 4), None)
    corner = "2 * __k0 + __k1"
    offsets = {f"offset{d}": Memlet(f"{offset}[{subscript(['__b', f'2 * ({kernel_tap}) + {d}', *out])}]") for d in dims}
    _add_taps(
        steps,
        "taps",
        {**index_ranges(position, shape), "__k0": "0:2", "__k1": "0:2"},
        offsets,
        [f"const double __p{d} = {geometry.input_position(d)} + __offset{d};" for d in dims],
        ("linear", "zeros", geometry.in_sizes, []),
        (f"{weight}[{subscript([*position, corner])}]", f"{index}[{subscript([*position, corner])}]"),
    )
    if has_mask:
        masked = steps.transient("masked_weight", (*shape, 4), dace.float64)
        mask = steps.operand("mask", reused=True)
        element = subscript([*position, "__t"])
        steps.flat_map(
            "mask",
            {**index_ranges(position, shape), "__t": "0:4"},
            {"w": Memlet(f"{weight}[{element}]"), "m": Memlet(f"{mask}[{subscript(['__b', kernel_tap, *out])}]")},
            "out = w * m",
            {"out": Memlet(f"{masked}[{element}]")},
        )
        weight = masked
    channels_per_offset_group = geometry.channels // offset_groups
    plane = [f"0:{size}" for size in geometry.in_sizes]
    channel = f"{geometry.channels_per_group} * __g + __c"
    taps_of = subscript(["__b", f"({channel}) // {channels_per_offset_group}", *kernel_params, *out, "0:4"])
    reason = BufferReason.REUSE if channels_per_offset_group > 1 else BufferReason.REORDER
    for container in (weight, index):
        mark_buffer(steps.desc(container), reason)
    _add_weighted_sum(
        steps,
        "Xr",
        index_ranges(
            ["__g", "__b", *out, "__c", *kernel_params],
            (geometry.groups, geometry.batch, *geometry.out_sizes, geometry.channels_per_group, *kernel),
        ),
        {
            "weight": Memlet(f"{weight}[{taps_of}]"),
            "index": Memlet(f"{index}[{taps_of}]"),
            "x": _plane(steps.operand("X", reused=True), subscript(["__b", channel, *plane]), 4),
        },
        4,
        f"X_col[__g, {geometry.patch_index()}, {geometry.column_index()}]",
    )


class _DeformConv(CanonicalForward):
    """DeformConv as a bilinearly sampled im2col + MMM; subclasses fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        deform_conv_geometry(node, state, sdfg)

    @classmethod
    def forward(cls, node, state: SDFGState, sdfg: SDFG) -> SDFG:
        geometry, offset_groups = deform_conv_geometry(node, state, sdfg)
        steps = node_builder(node, state, sdfg)
        has_mask = input_edge(node, state, "mask") is not None

        def columns(builder: ExpansionBuilder, geometry: ConvGeometry, dtype) -> None:
            _add_deformable_im2col(builder, geometry, offset_groups, has_mask)

        dtype = steps.desc("X").dtype
        add_im2col_steps(steps, geometry, dtype, cls.mmm_implementation, "B" in node.in_connectors, columns)
        return steps.sdfg


def _deform_conv(shape: str) -> type[_DeformConv]:
    """The DeformConv whose MMM has ``shape``."""
    doc = (
        "DeformConv as a convolution whose im2col samples X bilinearly at each kernel tap's position plus its "
        "offset (zeros outside X; times ``mask`` if given): ``taps`` (and ``mask``) then ``Xr`` "
        f"(:func:`_add_deformable_im2col`), ``Wr``, MMM ``{shape}``, ``AddBias`` and ``ReshapeOut`` "
        "(:func:`~dcaccel.expansions.conv.add_im2col_steps`)."
    )
    return type(f"DeformConvIm2col{shape.upper()}", (_DeformConv,), {"mmm_implementation": shape, "__doc__": doc})


IMPLEMENTATIONS = (
    Implementation("GridSample", CANONICAL, CanonicalGridSample),
    Implementation("RoiAlign", CANONICAL, CanonicalRoiAlign),
    *(Implementation("DeformConv", shape, _deform_conv(shape)) for shape in MMM.implementations),
)
