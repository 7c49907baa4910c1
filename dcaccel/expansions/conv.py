"""Canonical implementations of ONNX ``Conv`` (im2col + MMM ``mv``, ``op``, ``lmv``; ``direct``) and ``ConvTranspose``.

Progressive lowering: the Conv node expands into a nested SDFG of canonical steps, in one state

    ``Wr``          weight reshape W → W_col [G, F/G, K]   (K = C/G · kernel size), a WEIGHTS buffer;
    ``Xr``          im2col X → X_col [G, K, M]              (M = batch · output size), column by column;
    ``MMM``         Y_col[g] = W_col[g] · X_col[g]          one MMM node in the chosen shape, batched over groups;
    ``AddBias``     Y_col_bias = Y_col + B (row by row)     a LAYER_OUTPUT buffer (absent without bias);
    ``ReshapeOut``  Y_col_bias → Y [batch, F, out...]

and the MMM node expands in turn into its task maps. One group is a single product; more groups (incl.
depthwise) are one batched MMM whose batch dimension is the group (one task per group and task of the shape,
the shape's single tasks ``BcastA``/``BcastB``/``Gather``/``Reduce`` once over all groups), so a depthwise
convolution with hundreds of groups is one node to expand and inline. The batch of the convolution is folded
into the columns of X_col (M = batch · output size). The marks of X_col and Y_col follow from the orders the
MMM shape declares (:func:`dcaccel.expansions.mmm.buffer_reason_between`): X_col is produced column by column,
Y_col is read row by row by ``AddBias``. Without a bias, ``ReshapeOut`` reads Y_col, which is then the layer
output (LAYER_OUTPUT). Any number of spatial dimensions, pads (explicit or ``auto_pad``), strides and
dilations are supported; padded input positions read a clamped element and are masked to zero.

``ConvTranspose`` (implementations ``mv``, ``op``, ``lmv``) is lowered as the adjoint of im2col, col2im
(:func:`build_col2im_sdfg`): Y_col[g] = W_col[g] · X_col[g] (one MMM, batched over the groups) with W_col [G,
F/G·kernel size, C/G] and X_col [G, C/G, batch·in size], then a ``Col2im`` task adds every column of Y_col
into the kernel-sized output window of its input position (WCR into an ACCUMULATE buffer), so no multiply-add
by an inserted zero is counted (as the zero-inserted-input im2col would, stride^dims times more). Strides,
pads (explicit, ``auto_pad`` or from an ``output_shape``), dilations, output_padding, groups, bias and batch
are supported. There is no ``direct`` ConvTranspose: with a stride, the number of inputs an output reads
depends on its position, which one flat map's memlets cannot count exactly.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import dace
from dace import Memlet
from dace.sdfg.utils import in_desc_with_name, out_desc_with_name

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import FLOAT_TYPES, WCR_SUM, ExpansionBuilder, literal
from dcaccel.expansions.implementation import Implementation
from dcaccel.expansions.mmm import MMM, Order, buffer_reason_between
from dcaccel.expansions.node import CanonicalForward, onnx_pads, unsupported


@dataclass(frozen=True)
class _ConvSizes:
    """The sizes a convolution and a transposed convolution share, with explicit begin pads."""

    batch: int
    channels: int
    filters: int
    groups: int
    in_sizes: tuple[int, ...]
    kernel: tuple[int, ...]
    out_sizes: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]

    @property
    def channels_per_group(self) -> int:
        return self.channels // self.groups

    @property
    def filters_per_group(self) -> int:
        return self.filters // self.groups

    @property
    def dims(self) -> range:
        return range(len(self.kernel))

    def kernel_params(self) -> list[str]:
        return [f"__y{d}" for d in self.dims]

    #: Whether the columns of X_col / Y_col walk the output positions (a convolution, parameters ``__o``)
    #: or the input positions (a transposed convolution, parameters ``__i``).
    WALKS_OUTPUT: ClassVar[bool] = True

    @property
    def walked_sizes(self) -> tuple[int, ...]:
        """The spatial sizes the columns walk; the other side is the one a position reaches."""
        return self.out_sizes if self.WALKS_OUTPUT else self.in_sizes

    @property
    def reached_sizes(self) -> tuple[int, ...]:
        return self.in_sizes if self.WALKS_OUTPUT else self.out_sizes

    @property
    def columns(self) -> int:
        """M: the number of columns of X_col and Y_col, batch × walked size."""
        return self.batch * math.prod(self.walked_sizes)

    def walked_params(self) -> list[str]:
        return [f"{'__o' if self.WALKS_OUTPUT else '__i'}{d}" for d in self.dims]

    def column_index(self) -> str:
        """Column of X_col / Y_col of batch element ``b`` and walked position ``o...`` (or ``i...``)."""
        return _flat_index(["__b", *self.walked_params()], (self.batch, *self.walked_sizes))

    def position(self, d: int) -> str:
        """The coordinate on the other side, in spatial dimension ``d``, of walked position ``o_d`` (or
        ``i_d``) and kernel offset ``y_d``: ``stride·walked + dilation·y - pad``."""
        walked = self.walked_params()[d]
        return f"{self.strides[d]} * {walked} + {self.dilations[d]} * __y{d} - {self.pads_begin[d]}"

    def reaches_outside(self, d: int) -> bool:
        """Whether some (walked position, kernel offset) pair falls outside the other side in dimension ``d``."""
        last = self.strides[d] * (self.walked_sizes[d] - 1) + self.dilations[d] * (self.kernel[d] - 1)
        return self.pads_begin[d] > 0 or last - self.pads_begin[d] >= self.reached_sizes[d]


@dataclass(frozen=True)
class ConvGeometry(_ConvSizes):
    """Sizes of a convolution ``Y = conv(X, W) + B`` with explicit begin pads; the columns of X_col
    walk the output positions."""

    @property
    def patch(self) -> int:
        """K: the length of one patch (a column of X_col), channels per group × kernel size."""
        return self.channels_per_group * math.prod(self.kernel)

    def patch_index(self) -> str:
        """Row of X_col (and column of W_col) of channel ``c`` and kernel offset ``y...``."""
        return _flat_index(["__c", *self.kernel_params()], (self.channels_per_group, *self.kernel))

    out_params = _ConvSizes.walked_params
    input_position = _ConvSizes.position  # the input coordinate an output reads
    is_padded = _ConvSizes.reaches_outside  # some output reads outside the input


def _flat_index(params: list[str], sizes: tuple[int, ...]) -> str:
    """Row-major linear index of ``params`` in an array of ``sizes``."""
    terms = [f"{math.prod(sizes[i + 1 :])} * {p}" for i, p in enumerate(params)]
    return " + ".join(terms)


def _ints(values, default: int, count: int) -> tuple[int, ...]:
    return tuple(int(v) for v in values) if values else (default,) * count


def conv_geometry(node, state: dace.SDFGState, sdfg: dace.SDFG) -> ConvGeometry:
    """The geometry of the ONNX Conv ``node``; :class:`UnsupportedOpError` for what it cannot lower."""
    x = in_desc_with_name(node, state, sdfg, "X")
    w = in_desc_with_name(node, state, sdfg, "W")
    y = out_desc_with_name(node, state, sdfg, "Y")
    if x.dtype not in FLOAT_TYPES or w.dtype != x.dtype:
        raise unsupported(node, f"element types X {x.dtype}, W {w.dtype}")
    return conv_geometry_of(node, x, w, y)


def conv_geometry_of(node, x: dace.data.Data, w: dace.data.Data, y: dace.data.Data) -> ConvGeometry:
    """The geometry of the convolution ``node`` (Conv's attributes) of input ``x``, weights ``w`` and output ``y``
    (descriptors of any element type: ``ConvInteger`` and ``QLinearConv`` name their connectors otherwise);
    :class:`UnsupportedOpError` for what it cannot lower."""
    if len(x.shape) < 3 or len(w.shape) != len(x.shape):
        raise unsupported(node, f"X shape {tuple(x.shape)} with W shape {tuple(w.shape)}")
    try:
        shapes = [tuple(int(s) for s in desc.shape) for desc in (x, w, y)]
    except TypeError:
        raise unsupported(node, "symbolic tensor sizes") from None
    (batch, channels, *in_sizes), (filters, channels_per_group, *kernel), (_, _, *out_sizes) = shapes
    n_dims = len(kernel)
    groups = int(node.group or 1)
    if channels != channels_per_group * groups or filters % groups:
        raise unsupported(node, f"{channels} channels and {filters} filters do not split into {groups} groups")
    strides = _ints(node.strides, 1, n_dims)
    dilations = _ints(node.dilations, 1, n_dims)
    pads_begin, _ = onnx_pads(node, in_sizes, out_sizes, kernel, strides, dilations)
    return ConvGeometry(
        batch,
        channels,
        filters,
        groups,
        tuple(in_sizes),
        tuple(kernel),
        tuple(out_sizes),
        strides,
        dilations,
        pads_begin,
    )


def _map_ranges(params: list[str], sizes) -> dict[str, str]:
    return {p: f"0:{s}" for p, s in zip(params, sizes, strict=True)}


def _add_weight_reshape(builder: ExpansionBuilder, geometry: ConvGeometry) -> None:
    """``Wr``: W[g·F/G + f, c, y...] → W_col[g, f, c·kernel size + y...], in W's row-major order."""
    kernel_params = geometry.kernel_params()
    builder.flat_map(
        "Wr",
        _map_ranges(
            ["__g", "__f", "__c", *kernel_params],
            (geometry.groups, geometry.filters_per_group, geometry.channels_per_group, *geometry.kernel),
        ),
        {"v": Memlet(f"W[{geometry.filters_per_group} * __g + __f, __c, {', '.join(kernel_params)}]")},
        "out = v",
        {"out": Memlet(f"W_col[__g, __f, {geometry.patch_index()}]")},
    )


def _add_im2col(builder: ExpansionBuilder, geometry: ConvGeometry, dtype) -> None:
    """``Xr``: X_col[g, c·kernel size + y..., b·out size + o...] = X[b, g·C/G + c, stride·o + dilation·y - pad],
    zero where that position is padding; one column (patch) after the other within each group."""
    positions, inside = [], []
    for d in geometry.dims:
        position = geometry.input_position(d)
        if geometry.is_padded(d):
            inside.append(f"({position} >= 0) and ({position} < {geometry.in_sizes[d]})")
            position = f"max(0, min({geometry.in_sizes[d] - 1}, {position}))"
        positions.append(position)
    code = f"out = v if ({' and '.join(inside)}) else dace.{dtype.to_string()}(0)" if inside else "out = v"
    builder.flat_map(
        "Xr",
        _map_ranges(
            ["__g", "__b", *geometry.out_params(), "__c", *geometry.kernel_params()],
            (geometry.groups, geometry.batch, *geometry.out_sizes, geometry.channels_per_group, *geometry.kernel),
        ),
        {"v": Memlet(f"X[__b, {geometry.channels_per_group} * __g + __c, {', '.join(positions)}]")},
        code,
        {"out": Memlet(f"X_col[__g, {geometry.patch_index()}, {geometry.column_index()}]")},
    )


def _add_bias(builder: ExpansionBuilder, filters_per_group: int, ranges: dict, index: str, source: str, target: str):
    """``AddBias``: target[index] = source[index] + B[g·F/G + f] over ``ranges`` (which include ``__g`` and ``__f``),
    in the order the source is produced."""
    builder.flat_map(
        "AddBias",
        ranges,
        {"v": Memlet(f"{source}[{index}]"), "bias": Memlet(f"B[{filters_per_group} * __g + __f]")},
        "out = v + bias",
        {"out": Memlet(f"{target}[{index}]")},
    )


def _add_grouped_mmm(builder: ExpansionBuilder, implementation: str, groups: int, sizes: tuple[int, int, int]) -> None:
    """``MMM``: Y_col[g] = W_col[g] · X_col[g] for every group g, one ``MMM`` node with ``implementation``.

    ``sizes`` are (N, K, M) of one group's product. One group is a single product of the group's matrices;
    more groups are one batched product with the group as the batch dimension (one task per group and task
    of the shape, the shape's single tasks once over all groups), so that a depthwise convolution is one
    node to expand, however many groups it has.
    """
    n, k, m = sizes
    group = f"0:{groups}" if groups > 1 else "0"
    mmm = MMM("MMM")
    mmm.implementation = implementation
    builder.library_node(
        mmm,
        {"_a": Memlet(f"W_col[{group}, 0:{n}, 0:{k}]"), "_b": Memlet(f"X_col[{group}, 0:{k}, 0:{m}]")},
        {"_c": Memlet(f"Y_col[{group}, 0:{n}, 0:{m}]")},
    )


def _add_output_reshape(builder: ExpansionBuilder, geometry: ConvGeometry, y_col: str) -> None:
    """``ReshapeOut``: Y[b, g·F/G + f, o...] = Y_col[g, f, b·out size + o...], reading Y_col row by row."""
    out_params = geometry.out_params()
    builder.flat_map(
        "ReshapeOut",
        _map_ranges(
            ["__g", "__f", "__b", *out_params],
            (geometry.groups, geometry.filters_per_group, geometry.batch, *geometry.out_sizes),
        ),
        {"v": Memlet(f"{y_col}[__g, __f, {geometry.column_index()}]")},
        "out = v",
        {"out": Memlet(f"Y[__b, {geometry.filters_per_group} * __g + __f, {', '.join(out_params)}]")},
    )


def im2col_marks(implementation: str, has_bias: bool) -> dict[str, BufferReason | None]:
    """Buffer reasons of the im2col transients under the MMM shape ``implementation`` (None: streams)."""
    expansion = MMM.implementations[implementation]
    y_col = buffer_reason_between(expansion.produces, Order.ROW) if has_bias else BufferReason.LAYER_OUTPUT
    marks = {
        "W_col": BufferReason.WEIGHTS,
        "X_col": buffer_reason_between(Order.COLUMN, expansion.consumes_b),
        "Y_col": y_col,
    }
    if has_bias:
        marks["Y_col_bias"] = BufferReason.LAYER_OUTPUT
    return marks


def _builder_with(name: str, dtype: dace.typeclass, shapes: dict[str, tuple]) -> ExpansionBuilder:
    """A builder with one argument of element type ``dtype`` per entry of ``shapes`` (name -> shape)."""
    builder = ExpansionBuilder(name)
    for argument, shape in shapes.items():
        builder.argument(argument, dace.data.Array(dtype, shape))
    return builder


def _conv_builder(geometry: ConvGeometry, dtype: dace.typeclass, has_bias: bool, name: str) -> ExpansionBuilder:
    """A builder with the convolution's arguments ``X``, ``W`` (``B`` with a bias) and ``Y``."""
    shapes = {
        "X": (geometry.batch, geometry.channels, *geometry.in_sizes),
        "W": (geometry.filters, geometry.channels_per_group, *geometry.kernel),
        "Y": (geometry.batch, geometry.filters, *geometry.out_sizes),
    }
    if has_bias:
        shapes["B"] = (geometry.filters,)
    return _builder_with(name, dtype, shapes)


def build_im2col_sdfg(
    geometry: ConvGeometry, dtype: dace.typeclass, implementation: str, has_bias: bool, name: str = "conv_im2col"
) -> dace.SDFG:
    """The im2col lowering of a convolution as a nested SDFG with inputs ``X``, ``W`` (and ``B``), output ``Y``.

    One state: ``Wr`` and ``Xr`` → one ``MMM`` node (batched over the groups) with ``implementation`` → ``AddBias`` →
    ``ReshapeOut`` (see the module docstring); the transients carry the marks of :func:`im2col_marks`.
    """
    builder = _conv_builder(geometry, dtype, has_bias, name)
    add_im2col_steps(builder, geometry, dtype, implementation, has_bias, _add_im2col)
    return builder.sdfg


def add_im2col_steps(
    builder: ExpansionBuilder,
    geometry: ConvGeometry,
    dtype: dace.typeclass,
    implementation: str,
    has_bias: bool,
    columns: Callable[[ExpansionBuilder, ConvGeometry, dace.typeclass], None],
) -> None:
    """The steps of :func:`build_im2col_sdfg` in ``builder`` (arguments ``X``, ``W``, ``B`` with a bias, ``Y``), with
    ``columns(builder, geometry, dtype)`` adding the step that writes X_col (``Xr``; DeformConv samples it)."""
    g, fg, k, m = geometry.groups, geometry.filters_per_group, geometry.patch, geometry.columns
    shapes = {"W_col": (g, fg, k), "X_col": (g, k, m), "Y_col": (g, fg, m), "Y_col_bias": (g, fg, m)}
    for container, reason in im2col_marks(implementation, has_bias).items():
        builder.transient(container, shapes[container], dtype, reason)
    _add_weight_reshape(builder, geometry)
    columns(builder, geometry, dtype)
    _add_grouped_mmm(builder, implementation, g, (fg, k, m))
    layer_output = "Y_col"
    if has_bias:
        layer_output = "Y_col_bias"
        ranges = _map_ranges(["__g", "__f", "__m"], (g, fg, m))
        _add_bias(builder, geometry.filters_per_group, ranges, "__g, __f, __m", "Y_col", layer_output)
    _add_output_reshape(builder, geometry, layer_output)


def _direct_conv_code(geometry: ConvGeometry, dtype: dace.typeclass) -> str:
    """C++ tasklet code of one output of the direct convolution (see :func:`build_direct_sdfg`).

    The connectors ``__w`` and ``__x`` point at the filter's weights and at the group's input plane (or
    are scalars when that window is one element); indices are linear in the row-major layouts of W and X.
    """
    cg, kernel_params = geometry.channels_per_group, geometry.kernel_params()
    w_strides = [math.prod(geometry.kernel[d + 1 :]) for d in geometry.dims]
    x_strides = [math.prod(geometry.in_sizes[d + 1 :]) for d in geometry.dims]
    kernel_size, plane_size = math.prod(geometry.kernel), math.prod(geometry.in_sizes)
    lines = [f"{dtype.ctype} __acc = 0;"]
    for loop_var, size in zip(["__c", *kernel_params], (cg, *geometry.kernel), strict=True):
        lines.append(f"for (long {loop_var} = 0; {loop_var} < {size}; ++{loop_var})")
    lines.append("{")
    inside = []
    for d in geometry.dims:
        lines.append(f"    const long __p{d} = {geometry.input_position(d)};")
        inside.append(f"__p{d} >= 0 && __p{d} < {geometry.in_sizes[d]}")
    w_index = " + ".join([f"__c * {kernel_size}"] + [f"__y{d} * {w_strides[d]}" for d in geometry.dims])
    x_index = " + ".join([f"__c * {plane_size}"] + [f"__p{d} * {x_strides[d]}" for d in geometry.dims])
    weight = f"__w[{w_index}]" if geometry.patch > 1 else "__w"
    image = f"__x[{x_index}]" if cg * plane_size > 1 else "__x"
    guard = f"if ({' && '.join(inside)}) " if any(geometry.is_padded(d) for d in geometry.dims) else ""
    lines.append(f"    {guard}__acc += {weight} * {image};")
    lines.append("}")
    lines.append("__out = __acc;")
    return "\n".join(lines)


def build_direct_sdfg(geometry: ConvGeometry, dtype: dace.typeclass, has_bias: bool, name: str = "conv_direct"):
    """The direct convolution as a nested SDFG with inputs ``X``, ``W`` (and ``B``), output ``Y``.

    A flat map ``Conv`` over the outputs (b, g, f, o...) in row-major order of Y; the tasklet of output
    (b, g·F/G + f, o...) sums W[f, c, y...]·X[b, g·C/G + c, stride·o + dilation·y - pad] over the channels
    c of group g and the kernel offsets y (padding masked): no accumulation into the output, so no
    initialisation task. Each output reads the C/G · kernel size weights of its filter and as many input
    elements (the memlet volumes count these accesses; the input memlet's subset is the group's whole
    input plane). With a bias, ``Conv`` writes ``Y_conv`` (streams: written and read once, row-major) and
    an ``AddBias`` task adds B[f] to every output: one bias read per output in a task of its own, as a
    task's in-edges carry equal volumes.
    """
    builder = _conv_builder(geometry, dtype, has_bias, name)
    cg, fg, out_params = geometry.channels_per_group, geometry.filters_per_group, geometry.out_params()
    in_plane = ", ".join(f"0:{s}" for s in geometry.in_sizes)
    kernel_window = ", ".join(f"0:{s}" for s in geometry.kernel)
    output = builder.transient("Y_conv", builder.desc("Y").shape, dtype) if has_bias else "Y"
    ranges = _map_ranges(["__b", "__g", "__f", *out_params], (geometry.batch, geometry.groups, fg, *geometry.out_sizes))
    index = f"__b, {fg} * __g + __f, {', '.join(out_params)}"
    builder.flat_map(
        "Conv",
        ranges,
        {
            "x": Memlet(data="X", subset=f"__b, {cg} * __g:{cg} * __g + {cg}, {in_plane}", volume=geometry.patch),
            "w": Memlet(data="W", subset=f"{fg} * __g + __f, 0:{cg}, {kernel_window}", volume=geometry.patch),
        },
        _direct_conv_code(geometry, dtype),
        {"out": Memlet(f"{output}[{index}]")},
        language=dace.Language.CPP,
    )
    if has_bias:
        _add_bias(builder, geometry.filters_per_group, ranges, index, output, "Y")
    return builder.sdfg


def _element_type(node, state, sdfg) -> dace.typeclass:
    return in_desc_with_name(node, state, sdfg, "X").dtype


class _Im2colConv(CanonicalForward):
    """im2col + MMM lowering of Conv; subclasses fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        conv_geometry(node, state, sdfg)

    @classmethod
    def forward(cls, node, state, sdfg):
        return build_im2col_sdfg(
            conv_geometry(node, state, sdfg),
            _element_type(node, state, sdfg),
            cls.mmm_implementation,
            "B" in node.in_connectors,
            f"{node.label}_im2col_{cls.mmm_implementation}",
        )


def _im2col_conv(shape: str) -> type[_Im2colConv]:
    """The im2col Conv whose MMM has ``shape``."""
    doc = f"Conv as im2col + MMM ``{shape}``; the im2col containers are marked by :func:`im2col_marks`."
    return type(f"ConvIm2col{shape.upper()}", (_Im2colConv,), {"mmm_implementation": shape, "__doc__": doc})


class DirectConv(CanonicalForward):
    """Conv as one task, then a bias task (see :func:`build_direct_sdfg`)."""

    @staticmethod
    def check(node, state, sdfg) -> None:
        conv_geometry(node, state, sdfg)

    @staticmethod
    def forward(node, state, sdfg):
        return build_direct_sdfg(
            conv_geometry(node, state, sdfg),
            _element_type(node, state, sdfg),
            "B" in node.in_connectors,
            f"{node.label}_direct",
        )


@dataclass(frozen=True)
class ConvTransposeGeometry(_ConvSizes):
    """Sizes of a transposed convolution ``Y = convᵀ(X, W) + B`` with explicit begin pads.

    Input position ``i`` and kernel offset ``y`` contribute to output position
    ``stride·i + dilation·y - pad`` (dropped when outside the output). W is (C, F/G, kernel...).
    """

    WALKS_OUTPUT = False

    @property
    def rows(self) -> int:
        """The rows of W_col and Y_col: filters per group × kernel size."""
        return self.filters_per_group * math.prod(self.kernel)

    def row_index(self) -> str:
        """Row of W_col / Y_col of filter ``f`` (within its group) and kernel offset ``y...``."""
        return _flat_index(["__f", *self.kernel_params()], (self.filters_per_group, *self.kernel))

    in_params = _ConvSizes.walked_params
    output_position = _ConvSizes.position  # the output coordinate an input adds to
    is_cropped = _ConvSizes.reaches_outside  # some input adds outside the output


def conv_transpose_geometry(node, state: dace.SDFGState, sdfg: dace.SDFG) -> ConvTransposeGeometry:
    """The geometry of the ONNX ConvTranspose ``node``; :class:`UnsupportedOpError` for what it cannot lower
    (symbolic sizes, non-float types, output sizes that are not the attributes')."""
    x = in_desc_with_name(node, state, sdfg, "X")
    w = in_desc_with_name(node, state, sdfg, "W")
    y = out_desc_with_name(node, state, sdfg, "Y")
    if x.dtype not in FLOAT_TYPES or w.dtype != x.dtype:
        raise unsupported(node, f"element types X {x.dtype}, W {w.dtype}")
    if len(x.shape) < 3 or len(w.shape) != len(x.shape):
        raise unsupported(node, f"X shape {tuple(x.shape)} with W shape {tuple(w.shape)}")
    try:
        shapes = [tuple(int(s) for s in desc.shape) for desc in (x, w, y)]
    except TypeError:
        raise unsupported(node, "symbolic tensor sizes") from None
    (batch, channels, *in_sizes), (w_channels, filters_per_group, *kernel), (_, filters, *out_sizes) = shapes
    n_dims = len(kernel)
    groups = int(node.group or 1)
    if w_channels != channels or channels % groups or filters != filters_per_group * groups:
        raise unsupported(node, f"X {shapes[0]}, W {shapes[1]}, Y {shapes[2]} do not split into {groups} groups")
    strides = _ints(node.strides, 1, n_dims)
    dilations = _ints(node.dilations, 1, n_dims)
    pads_begin = _transposed_pads_begin(node, in_sizes, out_sizes, kernel, strides, dilations)
    return ConvTransposeGeometry(
        batch,
        channels,
        filters,
        groups,
        tuple(in_sizes),
        tuple(kernel),
        tuple(out_sizes),
        strides,
        dilations,
        pads_begin,
    )


def _transposed_pads_begin(node, in_sizes, out_sizes, kernel, strides, dilations) -> tuple[int, ...]:
    """The begin pads per spatial axis of the ONNX ConvTranspose ``node``, whose output has ``out_sizes``.

    The full output of an axis is ``stride·(in - 1) + output_padding + dilation·(kernel - 1) + 1`` positions.
    By the ONNX rule (which onnxruntime follows): with ``auto_pad`` NOTSET and no ``output_shape``, the
    explicit ``pads`` crop it; VALID keeps it whole; with an ``output_shape`` (its last sizes are the spatial
    ones; ``pads`` are then ignored) or SAME_UPPER / SAME_LOWER (output size ``in·stride``, at most the full
    one), the total padding ``max(0, full - out)`` is split in two halves, the larger one at the end for
    SAME_UPPER and at the beginning otherwise. An output larger than the full one ends in zeros (plus bias).
    Raises :class:`UnsupportedOpError` when these sizes are not the inferred ones of Y.
    """
    dims = len(kernel)
    auto_pad = node.auto_pad or "NOTSET"
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise unsupported(node, f"auto_pad='{auto_pad}'")
    output_padding = _ints(node.output_padding, 0, dims)
    pads = _ints(node.pads, 0, 2 * dims)
    full = tuple(
        strides[d] * (in_sizes[d] - 1) + output_padding[d] + dilations[d] * (kernel[d] - 1) + 1 for d in range(dims)
    )
    if node.output_shape:
        expected = tuple(int(size) for size in node.output_shape)[-dims:]
    elif auto_pad == "NOTSET":
        expected = tuple(full[d] - pads[d] - pads[dims + d] for d in range(dims))
    elif auto_pad == "VALID":
        expected = full
    else:
        expected = tuple(min(full[d], in_sizes[d] * strides[d]) for d in range(dims))
    if expected != tuple(out_sizes):
        raise unsupported(node, f"output sizes {tuple(out_sizes)} are not the attributes' {expected}")
    if not node.output_shape and auto_pad == "NOTSET":
        return pads[:dims]
    totals = [max(0, full[d] - out_sizes[d]) for d in range(dims)]
    return tuple(t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in totals)


def conv_transpose_marks(implementation: str) -> dict[str, BufferReason | None]:
    """Buffer reasons of the col2im transients under the MMM shape ``implementation`` (None: streams)."""
    expansion = MMM.implementations[implementation]
    return {
        "W_col": BufferReason.WEIGHTS,
        "X_col": buffer_reason_between(Order.ROW, expansion.consumes_b),
        "Y_col": buffer_reason_between(expansion.produces, Order.ROW),
        "Y_acc": BufferReason.ACCUMULATE,
    }


def _add_transposed_weight_reshape(builder: ExpansionBuilder, geometry: ConvTransposeGeometry) -> None:
    """``Wr``: W[g·C/G + c, f, y...] → W_col[g, f·kernel size + y..., c], row by row of W_col."""
    kernel_params = geometry.kernel_params()
    builder.flat_map(
        "Wr",
        _map_ranges(
            ["__g", "__f", *kernel_params, "__c"],
            (geometry.groups, geometry.filters_per_group, *geometry.kernel, geometry.channels_per_group),
        ),
        {"v": Memlet(f"W[{geometry.channels_per_group} * __g + __c, __f, {', '.join(kernel_params)}]")},
        "out = v",
        {"out": Memlet(f"W_col[__g, {geometry.row_index()}, __c]")},
    )


def _add_input_reshape(builder: ExpansionBuilder, geometry: ConvTransposeGeometry) -> None:
    """``Xr``: X[b, g·C/G + c, i...] → X_col[g, c, b·in size + i...], row by row of X_col."""
    in_params = geometry.in_params()
    builder.flat_map(
        "Xr",
        _map_ranges(
            ["__g", "__c", "__b", *in_params],
            (geometry.groups, geometry.channels_per_group, geometry.batch, *geometry.in_sizes),
        ),
        {"v": Memlet(f"X[__b, {geometry.channels_per_group} * __g + __c, {', '.join(in_params)}]")},
        "out = v",
        {"out": Memlet(f"X_col[__g, __c, {geometry.column_index()}]")},
    )


def _add_col2im(builder: ExpansionBuilder, geometry: ConvTransposeGeometry, dtype) -> None:
    """``Col2im``: Y_acc[b, g·F/G + f, stride·i + dilation·y - pad] += Y_col[g, f·kernel size + y..., b·in size +
    i...], reading Y_col row by row; a position outside the output adds zero to a clamped element."""
    positions, inside = [], []
    for d in geometry.dims:
        position = geometry.output_position(d)
        if geometry.is_cropped(d):
            inside.append(f"({position} >= 0) and ({position} < {geometry.out_sizes[d]})")
            position = f"max(0, min({geometry.out_sizes[d] - 1}, {position}))"
        positions.append(position)
    code = f"out = v if ({' and '.join(inside)}) else dace.{dtype.to_string()}(0)" if inside else "out = v"
    builder.flat_map(
        "Col2im",
        _map_ranges(
            ["__g", "__f", *geometry.kernel_params(), "__b", *geometry.in_params()],
            (geometry.groups, geometry.filters_per_group, *geometry.kernel, geometry.batch, *geometry.in_sizes),
        ),
        {"v": Memlet(f"Y_col[__g, {geometry.row_index()}, {geometry.column_index()}]")},
        code,
        {"out": Memlet(f"Y_acc[__b, {geometry.filters_per_group} * __g + __f, {', '.join(positions)}]", wcr=WCR_SUM)},
    )


def build_col2im_sdfg(
    geometry: ConvTransposeGeometry,
    dtype: dace.typeclass,
    implementation: str,
    has_bias: bool,
    name: str = "conv_transpose_col2im",
) -> dace.SDFG:
    """The col2im lowering of a transposed convolution as a nested SDFG with inputs ``X``, ``W`` (and ``B``),
    output ``Y``.

    The transposed convolution is the adjoint of im2col: every input column (one input position of one batch
    element) times the weights gives the contribution of that position to a kernel-sized window of the output,
    and col2im adds these windows up. In one state (after an initialisation state setting ``Y_acc`` to zero):

    - ``Wr``: W → W_col [G, F/G·kernel size, C/G] (row by row; a WEIGHTS buffer);
    - ``Xr``: X → X_col [G, C/G, batch·in size] (row by row: streams into every MMM shape);
    - one ``MMM`` node batched over the groups, Y_col[g] = W_col[g] · X_col[g] with ``implementation`` (K = C/G);
    - ``Col2im``: Y_col, read row by row (a REORDER buffer when the MMM produces it column by column), is
      added with WCR into ``Y_acc`` [batch, F, out...] (an ACCUMULATE buffer);
    - ``AddBias`` (Y = Y_acc + B[f]) or, without a bias, ``WriteOut`` (Y = Y_acc), row-major.

    Unlike the zero-inserted-input im2col, no multiplication by an inserted zero is counted: the MMM does
    C/G · F/G · kernel size · batch · in size multiply-adds per group, as many as the op has.
    """
    g, rows, cg, columns = geometry.groups, geometry.rows, geometry.channels_per_group, geometry.columns
    shapes = {
        "X": (geometry.batch, geometry.channels, *geometry.in_sizes),
        "W": (geometry.channels, geometry.filters_per_group, *geometry.kernel),
        "Y": (geometry.batch, geometry.filters, *geometry.out_sizes),
    }
    if has_bias:
        shapes["B"] = (geometry.filters,)
    builder = _builder_with(name, dtype, shapes)
    transients = {"W_col": (g, rows, cg), "X_col": (g, cg, columns), "Y_col": (g, rows, columns), "Y_acc": shapes["Y"]}
    for container, reason in conv_transpose_marks(implementation).items():
        builder.transient(container, transients[container], dtype, reason)
    _add_transposed_weight_reshape(builder, geometry)
    _add_input_reshape(builder, geometry)
    _add_grouped_mmm(builder, implementation, g, (rows, cg, columns))
    builder.init("Y_acc", literal(0, dtype))
    _add_col2im(builder, geometry, dtype)
    out_params = [f"__o{d}" for d in geometry.dims]
    ranges = _map_ranges(
        ["__b", "__g", "__f", *out_params], (geometry.batch, g, geometry.filters_per_group, *geometry.out_sizes)
    )
    index = f"__b, {geometry.filters_per_group} * __g + __f, {', '.join(out_params)}"
    if has_bias:
        _add_bias(builder, geometry.filters_per_group, ranges, index, "Y_acc", "Y")
    else:
        builder.flat_map(
            "WriteOut", ranges, {"v": Memlet(f"Y_acc[{index}]")}, "out = v", {"out": Memlet(f"Y[{index}]")}
        )
    return builder.sdfg


class _Col2imConvTranspose(CanonicalForward):
    """col2im + MMM lowering of ConvTranspose; subclasses fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        conv_transpose_geometry(node, state, sdfg)

    @classmethod
    def forward(cls, node, state, sdfg):
        return build_col2im_sdfg(
            conv_transpose_geometry(node, state, sdfg),
            _element_type(node, state, sdfg),
            cls.mmm_implementation,
            "B" in node.in_connectors,
            f"{node.label}_col2im_{cls.mmm_implementation}",
        )


def _col2im_conv_transpose(shape: str) -> type[_Col2imConvTranspose]:
    """The col2im ConvTranspose whose MMM has ``shape``."""
    doc = (
        f"ConvTranspose as MMM ``{shape}`` + col2im (see :func:`build_col2im_sdfg`); the containers are marked by "
        ":func:`conv_transpose_marks`."
    )
    return type(
        f"ConvTransposeCol2im{shape.upper()}", (_Col2imConvTranspose,), {"mmm_implementation": shape, "__doc__": doc}
    )


IMPLEMENTATIONS = (
    *(Implementation("Conv", shape, _im2col_conv(shape)) for shape in MMM.implementations),
    Implementation("Conv", "direct", DirectConv),
    *(Implementation("ConvTranspose", shape, _col2im_conv_transpose(shape)) for shape in MMM.implementations),
)
