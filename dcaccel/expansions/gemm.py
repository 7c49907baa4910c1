"""Matrix products through the canonical MMM node: ONNX ``Gemm``, ``MatMul`` and ``Einsum``, and DaCe's ``MatMul``.

Each expands into a nested SDFG in one state holding one MMM node with the chosen shape (``mv``,
``op``, ``lmv``), which expands in turn into its task maps:

- ``Gemm`` — Y = alpha · A' · B' + beta · C (A' = Aᵀ if transA, B' = Bᵀ if transB, C broadcast to
  N×M): ``TransA`` / ``TransB`` tasks write the transposed operands row by row, one MMM computes the
  product, and an epilogue task (``AddBias`` with C, ``Scale`` for alpha alone) reads it row by row;
  without C and with alpha = 1 the MMM writes Y itself.
- ``MatMul`` — numpy semantics: 1-D operands are vectors (a row on the left, a column on the right),
  leading dimensions are batch dimensions broadcast against each other; one batched MMM node, whose
  task map ranges over the batch and the task index (Y[b] = A[b]·B[b], see
  :mod:`dcaccel.expansions.mmm.operands`).
- ``Einsum`` of two floating-point operands in a matrix-product form (``bij,bjk->bik``, ``bhqd,bhkd->bhqk``,
  ``bid,jd->bij``, ...; see :func:`einsum_product`): ``TransA`` / ``TransB`` tasks write an operand whose matrix
  dimensions are swapped in the equation transposed, row by row, then one batched MMM node writes the output.
  Any other equation (one operand, inner or outer products, three operands and more, integer types, empty
  dimensions) is one map over its labels with a WCR sum over the summed ones
  (:class:`dcaccel.expansions.einsum.EinsumMap`), under every MMM shape alike.
- DaCe's ``dace.libraries.blas`` ``MatMul`` (what ``@`` becomes in a ``@dace.program``, on 2-D and on
  batched 3-D operands alike) lowers like ONNX MatMul, symbolic batch sizes included; implementations
  ``mv``, ``op``, ``lmv`` are registered on that class.

The marks of the transients around the MMM follow from the orders the shape declares
(:func:`dcaccel.expansions.mmm.buffer_reason_between`): the transposes produce rows, the epilogue
reads rows. Every implementation checks its node (``check``) before it builds anything.
"""

from dataclasses import dataclass

import dace
import dace.library
from dace import Memlet
from dace.libraries.blas.nodes.matmul import MatMul
from dace.sdfg.utils import in_desc_with_name, in_edge_with_name, out_desc_with_name, out_edge_with_name
from dace.transformation.transformation import ExpandTransformation

from dcaccel.buffers import BufferReason
from dcaccel.errors import UnsupportedOpError
from dcaccel.expansions.builder import FLOAT_TYPES, ExpansionBuilder, is_broadcast, whole
from dcaccel.expansions.einsum import EINSUM_TYPES, EinsumMap, einsum_terms
from dcaccel.expansions.implementation import Implementation
from dcaccel.expansions.mmm import MMM, Order, buffer_reason_between
from dcaccel.expansions.node import (
    CanonicalForward,
    input_shape,
    node_builder,
    ordered_inputs,
    output_shape,
    unsupported,
    wrong_shape,
)


@dataclass(frozen=True)
class Operand:
    """A tensor of the nested SDFG: its name, shape and element strides (None: row-major contiguous)."""

    name: str
    shape: tuple
    strides: tuple | None = None


def _builder(name: str, dtype: dace.typeclass, *operands: Operand) -> ExpansionBuilder:
    builder = ExpansionBuilder(name)
    for operand in operands:
        builder.argument(operand.name, dace.data.Array(dtype, operand.shape, strides=operand.strides))
    return builder


def add_mmm(builder: ExpansionBuilder, implementation: str, a: Memlet, b: Memlet, c: Memlet) -> MMM:
    """An MMM node ``MMM`` with shape ``implementation`` computing c = a · b."""
    mmm = MMM("MMM")
    mmm.implementation = implementation
    return builder.library_node(mmm, {"_a": a, "_b": b}, {"_c": c})


def add_transpose(
    builder: ExpansionBuilder, label: str, source: str, shape: tuple, dtype, reason: BufferReason | None
) -> str:
    """A task writing the transpose of the last two dimensions of ``source`` (``shape``: the result's, batch
    dimensions first, then rows × columns) row by row into a new transient, one matrix after the other,
    marked as a buffer for ``reason`` (None: it streams into the MMM)."""
    transposed = builder.transient(f"{source}_t", shape, dtype, reason)
    batch = [f"__b{d}" for d in range(len(shape) - 2)]
    builder.flat_map(
        label,
        {
            **{p: f"0:{size}" for p, size in zip(batch, shape, strict=False)},
            "__i": f"0:{shape[-2]}",
            "__j": f"0:{shape[-1]}",
        },
        {"v": Memlet(f"{source}[{', '.join([*batch, '__j', '__i'])}]")},
        "out = v",
        {"out": Memlet(f"{transposed}[{', '.join([*batch, '__i', '__j'])}]")},
    )
    return transposed


def _broadcast_index(shape: tuple, indices: list[str]) -> str:
    """Subset of the element of a tensor of ``shape`` broadcast (numpy rules) to the trailing ``indices``."""
    aligned = indices[len(indices) - len(shape) :] if shape else []
    return ", ".join("0" if size == 1 else index for size, index in zip(shape, aligned, strict=True)) or "0"


def build_gemm_sdfg(
    n,
    k,
    m,
    dtype: dace.typeclass,
    implementation: str,
    trans_a: bool = False,
    trans_b: bool = False,
    alpha: float = 1.0,
    beta: float = 1.0,
    c_shape: tuple | None = None,
    name: str = "gemm",
) -> dace.SDFG:
    """Y[N×M] = alpha · A'[N×K] · B'[K×M] + beta · C as a nested SDFG (inputs A, B, C if ``c_shape``, output Y).

    One state: ``TransA`` / ``TransB`` (when transposed) → MMM with ``implementation`` → ``AddBias``
    (C present, beta ≠ 0) or ``Scale`` (alpha ≠ 1), which reads the product row by row; the product
    streams into it unless the MMM produces it in another order (then it is a buffer).
    """
    operands = [Operand("A", (k, n) if trans_a else (n, k)), Operand("B", (m, k) if trans_b else (k, m))]
    operands.append(Operand("Y", (n, m)))
    if c_shape is not None:
        operands.append(Operand("C", c_shape))
    builder = _builder(name, dtype, *operands)
    uses_c = c_shape is not None and beta != 0
    expansion = MMM.implementations[implementation]
    a_reason, b_reason = (buffer_reason_between(Order.ROW, c) for c in (expansion.consumes_a, expansion.consumes_b))
    a = add_transpose(builder, "TransA", "A", (n, k), dtype, a_reason) if trans_a else "A"
    b = add_transpose(builder, "TransB", "B", (k, m), dtype, b_reason) if trans_b else "B"
    a_memlet, b_memlet = Memlet(f"{a}[0:{n}, 0:{k}]"), Memlet(f"{b}[0:{k}, 0:{m}]")
    if not uses_c and alpha == 1:
        add_mmm(builder, implementation, a_memlet, b_memlet, Memlet(f"Y[0:{n}, 0:{m}]"))
        return builder.sdfg
    product = builder.transient("Y_mm", (n, m), dtype, buffer_reason_between(expansion.produces, Order.ROW))
    add_mmm(builder, implementation, a_memlet, b_memlet, Memlet(f"{product}[0:{n}, 0:{m}]"))
    scaled = "v" if alpha == 1 else f"{alpha!r} * v"
    inputs = {"v": Memlet(f"{product}[__i, __j]")}
    if uses_c:
        inputs["bias"] = Memlet(f"C[{_broadcast_index(tuple(c_shape), ['__i', '__j'])}]")
        code = f"out = {scaled} + " + ("bias" if beta == 1 else f"{beta!r} * bias")
    else:
        code = f"out = {scaled}"
    builder.flat_map(
        "AddBias" if uses_c else "Scale",
        {"__i": f"0:{n}", "__j": f"0:{m}"},
        inputs,
        code,
        {"out": Memlet("Y[__i, __j]")},
    )
    return builder.sdfg


def build_matmul_sdfg(
    a: Operand, b: Operand, y: Operand, dtype: dace.typeclass, implementation: str, name: str = "matmul"
) -> dace.SDFG:
    """Y = A @ B (numpy semantics) as a nested SDFG holding one MMM node with ``implementation``: 1-D
    operands are vectors (a row for A, a column for B), the leading dimensions of Y are the batch of the
    MMM (one task per batch element and task index), those of A and B broadcast against them."""
    builder = _builder(name, dtype, a, b, y)
    memlets = (Memlet(data=operand.name, subset=whole(operand.shape)) for operand in (a, b, y))
    add_mmm(builder, implementation, *memlets)
    return builder.sdfg


def check_matmul_shapes(node, a: tuple, b: tuple, y: tuple) -> None:
    """Raise :class:`UnsupportedOpError` unless A @ B = Y under numpy rules, with at most one vector operand."""
    if len(a) == 1 and len(b) == 1:
        raise unsupported(node, "a dot product of two vectors")
    batch = tuple(y[: len(y) - (len(a) > 1) - (len(b) > 1)])
    for name, shape in (("A", a), ("B", b)):
        leading = _without_leading_ones(shape[: max(len(shape) - 2, 0)])
        aligned = batch[len(batch) - len(leading) :] if leading else ()
        if len(leading) > len(batch) or any(s != 1 and s != t for s, t in zip(leading, aligned, strict=True)):
            raise unsupported(node, f"{name} {tuple(shape)} does not broadcast to the batch {batch} of Y {tuple(y)}")


def _without_leading_ones(sizes: tuple) -> tuple:
    while sizes and not dace.symbolic.issymbolic(sizes[0]) and sizes[0] == 1:
        sizes = sizes[1:]
    return sizes


def _check_element_types(node, state, sdfg, *connectors: str) -> dace.typeclass:
    """The common floating-point element type of ``connectors``; :class:`UnsupportedOpError` if none."""
    types = {in_desc_with_name(node, state, sdfg, c).dtype for c in connectors}
    if len(types) != 1 or not types <= set(FLOAT_TYPES):
        raise unsupported(node, f"element types {', '.join(sorted(map(str, types)))} (one floating-point type)")
    return types.pop()


class _OnnxGemm(CanonicalForward):
    """ONNX Gemm through MMM; subclasses fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        _check_element_types(node, state, sdfg, "A", "B", *(["C"] if "C" in node.in_connectors else []))

    @classmethod
    def forward(cls, node, state, sdfg):
        a = in_desc_with_name(node, state, sdfg, "A")
        y = out_desc_with_name(node, state, sdfg, "Y")
        n, m = y.shape
        k = a.shape[0] if node.transA else a.shape[1]
        c_shape = (
            (tuple(in_desc_with_name(node, state, sdfg, "C").shape) or (1,)) if "C" in node.in_connectors else None
        )
        return build_gemm_sdfg(
            n,
            k,
            m,
            a.dtype,
            cls.mmm_implementation,
            trans_a=bool(node.transA),
            trans_b=bool(node.transB),
            alpha=1.0 if node.alpha is None else float(node.alpha),
            beta=1.0 if node.beta is None else float(node.beta),
            c_shape=c_shape,
            name=f"{node.label}_gemm_{cls.mmm_implementation}",
        )


def _shapes(node, state, sdfg) -> tuple[tuple, tuple, tuple]:
    return tuple(
        tuple(desc.shape)
        for desc in (
            in_desc_with_name(node, state, sdfg, "A"),
            in_desc_with_name(node, state, sdfg, "B"),
            out_desc_with_name(node, state, sdfg, "Y"),
        )
    )


class _OnnxMatMul(CanonicalForward):
    """ONNX MatMul through MMM; subclasses fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        _check_element_types(node, state, sdfg, "A", "B")
        check_matmul_shapes(node, *_shapes(node, state, sdfg))

    @classmethod
    def forward(cls, node, state, sdfg):
        a, b, y = _shapes(node, state, sdfg)
        return build_matmul_sdfg(
            Operand("A", a),
            Operand("B", b),
            Operand("Y", y),
            in_desc_with_name(node, state, sdfg, "A").dtype,
            cls.mmm_implementation,
            f"{node.label}_matmul_{cls.mmm_implementation}",
        )


@dataclass(frozen=True)
class EinsumProduct:
    """An Einsum equation that is a (batched) matrix product Y[..., i, j] = Σ_k A'[..., i, k]·B'[..., k, j],
    with A' = A or A with its last two dimensions swapped (``transpose_a``), likewise B'."""

    transpose_a: bool
    transpose_b: bool


def einsum_product(node, equation: str, ranks: tuple[int, int]) -> EinsumProduct:
    """``equation`` over operands of ``ranks`` as a batched matrix product, or :class:`UnsupportedOpError`
    naming the equation.

    The matrix-product forms: the output's last two labels are a row label ``i`` of A only and a column label
    ``j`` of B only, one label ``k`` of A and B is summed over, and each operand is its batch labels (the
    trailing ones of the output's, in its order; missing ones broadcast) followed by ``i, k`` or ``k, i``
    (A), ``k, j`` or ``j, k`` (B). E.g. ``ij,jk->ik``, ``bij,bjk->bik``, ``bhqd,bhkd->bhqk``, ``bid,jd->bij``.
    """
    try:
        (a, b), y = einsum_terms(equation, ranks)
    except ValueError as error:
        raise unsupported(node, f"equation '{equation}': {error}") from None
    summed = [label for label in a if label in b and label not in y]
    forms = "operands [batch..., i, k] and [batch..., k, j] (either pair transposed) -> [batch..., i, j]"
    if (
        any(len(set(term)) != len(term) for term in (a, b, y))
        or len(summed) != 1
        or len(y) < 2
        or not (y[-2] in a and y[-2] not in b and y[-1] in b and y[-1] not in a)
    ):
        raise unsupported(node, f"equation '{equation}' is not a matrix product ({forms})")
    row, inner, column, batch = y[-2], summed[0], y[-1], y[:-2]
    matrices = {
        "A": (a, {(row, inner): False, (inner, row): True}),
        "B": (b, {(inner, column): False, (column, inner): True}),
    }
    transposed = {}
    for name, (term, orders) in matrices.items():
        leading = term[:-2]
        if tuple(term[-2:]) not in orders or leading != batch[len(batch) - len(leading) :]:
            raise unsupported(node, f"equation '{equation}': operand {name} is not {forms}")
        transposed[name] = orders[tuple(term[-2:])]
    return EinsumProduct(transposed["A"], transposed["B"])


EINSUM_INPUTS = ("Inputs__0", "Inputs__1")


def _swap_last(shape: tuple) -> tuple:
    return (*shape[:-2], shape[-1], shape[-2])


def build_einsum_sdfg(
    a: Operand, b: Operand, y: Operand, product: EinsumProduct, dtype: dace.typeclass, implementation: str, name: str
) -> dace.SDFG:
    """Y = A'·B' (an Einsum's :class:`EinsumProduct`) as a nested SDFG: ``TransA`` / ``TransB`` (when that
    operand is transposed) write A' / B' row by row, matrix after matrix, then one batched MMM node with
    ``implementation`` writes Y, in the shape's order. A transposed operand is a buffer when the MMM consumes
    it in another order (REORDER), or reads it once per batch element it is broadcast over (REUSE: ``mv``'s
    ``BcastA``, ``lmv``'s ``BcastB``); ``op`` and the other operands copy it into a buffer of their own."""
    builder = _builder(name, dtype, a, b, y)
    expansion = MMM.implementations[implementation]
    operands = []
    for operand, label, transposed, consumed in (
        (a, "TransA", product.transpose_a, expansion.consumes_a),
        (b, "TransB", product.transpose_b, expansion.consumes_b),
    ):
        shape = _swap_last(operand.shape) if transposed else operand.shape
        reason = buffer_reason_between(Order.ROW, consumed)
        if reason is None and consumed is not Order.ANY and is_broadcast(shape[:-2], y.shape[:-2]):
            reason = BufferReason.REUSE
        source = add_transpose(builder, label, operand.name, shape, dtype, reason) if transposed else operand.name
        operands.append(Memlet(data=source, subset=whole(shape)))
    add_mmm(builder, implementation, *operands, Memlet(data=y.name, subset=whole(y.shape)))
    return builder.sdfg


def _einsum_product(node, state, sdfg) -> tuple[Operand, Operand, Operand, EinsumProduct] | None:
    """The operands A, B, Y of the Einsum ``node`` and the product its equation makes of them, or None unless it
    is a matrix product (:func:`einsum_product`) of two floating-point operands without an empty dimension, whose
    inner dimensions are equal (a summed label of size 1 in one operand broadcasts: the general map)."""
    if sorted(node.in_connectors) != list(EINSUM_INPUTS):
        return None
    try:
        _check_element_types(node, state, sdfg, *EINSUM_INPUTS)
        a, b = (input_shape(node, state, sdfg, c) for c in EINSUM_INPUTS)
        y = output_shape(node, state, sdfg, "Output")
        product = einsum_product(node, node.equation, (len(a), len(b)))
        a_matrix = _swap_last(a) if product.transpose_a else a
        b_matrix = _swap_last(b) if product.transpose_b else b
        check_matmul_shapes(node, a_matrix, b_matrix, y)
    except UnsupportedOpError:
        return None
    if 0 in (*a, *b) or a_matrix[-1] != b_matrix[-2]:  # an inner label of size 1 broadcasts: not an MMM
        return None
    return Operand(EINSUM_INPUTS[0], a), Operand(EINSUM_INPUTS[1], b), Operand("Output", y), product


def einsum_map(node, state, sdfg) -> EinsumMap:
    """The :class:`EinsumMap` of the Einsum ``node`` (its operands in order); :class:`UnsupportedOpError` naming
    the equation if malformed or not of the imported output shape, or for a type outside :data:`EINSUM_TYPES`."""
    inputs = ordered_inputs(node, state)
    types = {in_desc_with_name(node, state, sdfg, c).dtype for c in inputs}
    if len(types) != 1 or not types <= set(EINSUM_TYPES):
        raise unsupported(node, f"element types {', '.join(sorted(map(str, types)))} (one numeric type)")
    try:
        spec = EinsumMap.of(node.equation, [input_shape(node, state, sdfg, c) for c in inputs])
    except ValueError as error:
        raise unsupported(node, f"equation '{node.equation}': {error}") from None
    imported = output_shape(node, state, sdfg, "Output")
    if tuple(imported) != spec.out_shape:
        raise wrong_shape(node, f"equation '{node.equation}': output {tuple(imported)}, expected {spec.out_shape}")
    return spec


class _OnnxEinsum(CanonicalForward):
    """ONNX Einsum, any equation over any number of operands; subclasses fix the MMM shape.

    Two floating-point operands in a matrix-product form (:func:`einsum_product`, no empty dimension) are one
    batched MMM node of the shape (:func:`build_einsum_sdfg`); every other equation is one map over all of its
    labels (:meth:`EinsumMap.build`: the output's labels outermost, the summed ones innermost, a WCR sum when
    labels are summed away), the same under every shape.
    """

    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        if _einsum_product(node, state, sdfg) is None:
            einsum_map(node, state, sdfg)

    @classmethod
    def forward(cls, node, state, sdfg):
        product = _einsum_product(node, state, sdfg)
        if product is None:
            steps = node_builder(node, state, sdfg)
            einsum_map(node, state, sdfg).build(steps, ordered_inputs(node, state), "Output")
            return steps.sdfg
        dtype = in_desc_with_name(node, state, sdfg, EINSUM_INPUTS[0]).dtype
        name = f"{node.label}_einsum_{cls.mmm_implementation}"
        return build_einsum_sdfg(*product, dtype, cls.mmm_implementation, name)


def _blas_operands(node, state, sdfg) -> tuple[Operand, Operand, Operand]:
    """The windows of the memlets on ``_a``, ``_b``, ``_c`` with the strides of their containers."""
    edges = [in_edge_with_name(node, state, "_a"), in_edge_with_name(node, state, "_b")]
    edges.append(out_edge_with_name(node, state, "_c"))
    return tuple(
        Operand(conn, tuple(edge.data.subset.size()), tuple(sdfg.arrays[edge.data.data].strides))
        for conn, edge in zip(("_a", "_b", "_c"), edges, strict=True)
    )


class _BlasMatMulExpansion(ExpandTransformation):
    """DaCe's ``MatMul`` library node (``@`` in a ``@dace.program``) through MMM; subclasses fix the shape.

    The operands keep the windows of the node's memlets and the strides of their containers."""

    environments = []
    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        """Raise :class:`UnsupportedOpError` unless ``node`` computes C = A @ B of matrices (batched) or a
        matrix and a vector."""
        if len(state.in_edges(node)) != 2 or node.beta != 0 or node.alpha != 1 or node.transA or node.transB:
            raise unsupported(node, "alpha, beta or transposes (only C = A @ B is lowered)")
        check_matmul_shapes(node, *(operand.shape for operand in _blas_operands(node, state, sdfg)))

    @classmethod
    def expansion(cls, node, parent_state, parent_sdfg):
        """Build the nested SDFG of ``node`` (connectors ``_a``, ``_b``, ``_c``): one (batched) MMM node."""
        cls.check(node, parent_state, parent_sdfg)
        a, b, c = _blas_operands(node, parent_state, parent_sdfg)
        dtype = parent_sdfg.arrays[out_edge_with_name(node, parent_state, "_c").data.data].dtype
        return build_matmul_sdfg(a, b, c, dtype, cls.mmm_implementation, f"{node.label}_{cls.mmm_implementation}")


def _by_shape(base: type, prefix: str, summary: str) -> dict[str, type]:
    """One subclass of ``base`` per MMM shape, named ``<prefix><SHAPE>``."""
    return {
        shape: type(
            f"{prefix}{shape.upper()}", (base,), {"mmm_implementation": shape, "__doc__": f"{summary} ``{shape}``."}
        )
        for shape in MMM.implementations
    }


IMPLEMENTATIONS = (
    *(Implementation("Gemm", s, cls) for s, cls in _by_shape(_OnnxGemm, "Gemm", "ONNX Gemm as MMM").items()),
    *(Implementation("MatMul", s, cls) for s, cls in _by_shape(_OnnxMatMul, "MatMul", "ONNX MatMul as MMM").items()),
    *(Implementation("Einsum", s, cls) for s, cls in _by_shape(_OnnxEinsum, "Einsum", "ONNX Einsum as MMM").items()),
    *(
        Implementation("MatMul", s, dace.library.expansion(cls), MatMul)
        for s, cls in _by_shape(_BlasMatMulExpansion, "BlasMatMul", "``@`` as MMM").items()
    ),
)
