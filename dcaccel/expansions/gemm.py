"""Matrix products through the canonical MMM node: ONNX ``Gemm`` and ``MatMul``, and DaCe's ``MatMul``.

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
- DaCe's ``dace.libraries.blas`` ``MatMul`` (what ``@`` becomes in a ``@dace.program``, on 2-D and on
  batched 3-D operands alike) lowers like ONNX MatMul, symbolic batch sizes included; implementations
  ``mv``, ``op``, ``lmv`` are registered on that class.

The marks of the transients around the MMM follow from the orders the shape declares
(:func:`dcaccel.expansions.mmm.buffer_reason_between`): the transposes produce rows, the epilogue
reads rows.
"""

from dataclasses import dataclass

import dace
from dace.libraries.blas.nodes.matmul import MatMul
from dace.libraries.onnx.forward_implementation_abc import ONNXForward
from dace.libraries.onnx.op_implementations.utils import op_implementation
from dace.sdfg.utils import in_desc_with_name, in_edge_with_name, out_desc_with_name, out_edge_with_name
from dace.transformation.transformation import ExpandTransformation

from dcaccel.errors import UnsupportedOpError
from dcaccel.expansions.mmm import MMM, Order, buffer_reason_between
from dcaccel.expansions.mmm.expansions.common import add_flat_map, add_transient_matrix, expansion_state

FLOAT_TYPES = (dace.float16, dace.float32, dace.float64)


@dataclass(frozen=True)
class Operand:
    """A tensor of the nested SDFG: its name, shape and element strides (None: row-major contiguous)."""

    name: str
    shape: tuple
    strides: tuple | None = None


def _add_operands(sdfg: dace.SDFG, dtype: dace.typeclass, *operands: Operand) -> None:
    for operand in operands:
        sdfg.add_array(operand.name, operand.shape, dtype, strides=operand.strides)


def _add_mmm(state, implementation: str, label: str, a, a_subset: str, b, b_subset: str, c, c_subset: str) -> MMM:
    """An MMM node with shape ``implementation`` computing c[c_subset] = a[a_subset] · b[b_subset]."""
    mmm = MMM(label)
    mmm.implementation = implementation
    state.add_node(mmm)
    state.add_edge(a, None, mmm, "_a", dace.Memlet(data=a.data, subset=a_subset))
    state.add_edge(b, None, mmm, "_b", dace.Memlet(data=b.data, subset=b_subset))
    state.add_edge(mmm, "_c", c, None, dace.Memlet(data=c.data, subset=c_subset))
    return mmm


def _add_transpose(state, label: str, source, rows, columns, dtype, consumed: Order):
    """A task writing sourceᵀ (rows × columns) row by row into a new transient; a buffer when the MMM
    consumes it in another order (see :func:`buffer_reason_between`)."""
    reason = buffer_reason_between(Order.ROW, consumed)
    transposed = state.add_access(add_transient_matrix(state.sdfg, f"{source.data}_t", (rows, columns), dtype, reason))
    add_flat_map(
        state,
        label,
        {"__i": f"0:{rows}", "__j": f"0:{columns}"},
        {"__in": (source, "__j, __i")},
        "__out = __in",
        {"__out": (transposed, "__i, __j")},
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
    sdfg = dace.SDFG(name)
    _add_operands(sdfg, dtype, Operand("A", (k, n) if trans_a else (n, k)), Operand("B", (m, k) if trans_b else (k, m)))
    _add_operands(sdfg, dtype, Operand("Y", (n, m)))
    uses_c = c_shape is not None and beta != 0
    if c_shape is not None:
        _add_operands(sdfg, dtype, Operand("C", c_shape))
    state = expansion_state(sdfg, name, __file__)
    expansion = MMM.implementations[implementation]
    a, b = state.add_read("A"), state.add_read("B")
    if trans_a:
        a = _add_transpose(state, "TransA", a, n, k, dtype, expansion.consumes_a)
    if trans_b:
        b = _add_transpose(state, "TransB", b, k, m, dtype, expansion.consumes_b)
    y = state.add_write("Y")
    if not uses_c and alpha == 1:
        _add_mmm(state, implementation, "MMM", a, f"0:{n}, 0:{k}", b, f"0:{k}, 0:{m}", y, f"0:{n}, 0:{m}")
        return sdfg
    product_name = add_transient_matrix(
        sdfg, "Y_mm", (n, m), dtype, buffer_reason_between(expansion.produces, Order.ROW)
    )
    product = state.add_access(product_name)
    _add_mmm(state, implementation, "MMM", a, f"0:{n}, 0:{k}", b, f"0:{k}, 0:{m}", product, f"0:{n}, 0:{m}")
    scaled = "__in" if alpha == 1 else f"{alpha!r} * __in"
    inputs = {"__in": (product, "__i, __j")}
    if uses_c:
        inputs["__bias"] = (state.add_read("C"), _broadcast_index(tuple(c_shape), ["__i", "__j"]))
        code = f"__out = {scaled} + " + ("__bias" if beta == 1 else f"{beta!r} * __bias")
    else:
        code = f"__out = {scaled}"
    add_flat_map(
        state,
        "AddBias" if uses_c else "Scale",
        {"__i": f"0:{n}", "__j": f"0:{m}"},
        inputs,
        code,
        {"__out": (y, "__i, __j")},
    )
    return sdfg


def build_matmul_sdfg(
    a: Operand, b: Operand, y: Operand, dtype: dace.typeclass, implementation: str, name: str = "matmul"
) -> dace.SDFG:
    """Y = A @ B (numpy semantics) as a nested SDFG holding one MMM node with ``implementation``: 1-D
    operands are vectors (a row for A, a column for B), the leading dimensions of Y are the batch of the
    MMM (one task per batch element and task index), those of A and B broadcast against them."""
    sdfg = dace.SDFG(name)
    _add_operands(sdfg, dtype, a, b, y)
    state = expansion_state(sdfg, name, __file__)
    a_node, b_node, y_node = state.add_read(a.name), state.add_read(b.name), state.add_write(y.name)
    a_whole, b_whole, y_whole = (_whole(operand.shape) for operand in (a, b, y))
    _add_mmm(state, implementation, "MMM", a_node, a_whole, b_node, b_whole, y_node, y_whole)
    return sdfg


def _whole(shape: tuple) -> str:
    return ", ".join(f"0:{size}" for size in shape)


def _element_type(node, state, sdfg, *connectors: str) -> dace.typeclass | None:
    """The common floating-point element type of ``connectors``, None if they differ or are not float."""
    types = {in_desc_with_name(node, state, sdfg, c).dtype for c in connectors}
    return types.pop() if len(types) == 1 and types <= set(FLOAT_TYPES) else None


class _OnnxGemm(ONNXForward):
    """ONNX Gemm through MMM; subclasses fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def forward_can_be_applied(node, state, sdfg) -> bool:
        connectors = ["A", "B"] + (["C"] if "C" in node.in_connectors else [])
        return _element_type(node, state, sdfg, *connectors) is not None

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


class _OnnxMatMul(ONNXForward):
    """ONNX MatMul through MMM; subclasses fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def forward_can_be_applied(node, state, sdfg) -> bool:
        a = in_desc_with_name(node, state, sdfg, "A")
        b = in_desc_with_name(node, state, sdfg, "B")
        vectors_only = len(a.shape) == 1 and len(b.shape) == 1
        return _element_type(node, state, sdfg, "A", "B") is not None and not vectors_only

    @classmethod
    def forward(cls, node, state, sdfg):
        a = in_desc_with_name(node, state, sdfg, "A")
        b = in_desc_with_name(node, state, sdfg, "B")
        y = out_desc_with_name(node, state, sdfg, "Y")
        return build_matmul_sdfg(
            Operand("A", tuple(a.shape)),
            Operand("B", tuple(b.shape)),
            Operand("Y", tuple(y.shape)),
            a.dtype,
            cls.mmm_implementation,
            f"{node.label}_matmul_{cls.mmm_implementation}",
        )


@op_implementation(op="Gemm", name="mv")
class GemmMV(_OnnxGemm):
    """ONNX Gemm as MMM ``mv``."""

    mmm_implementation = "mv"


@op_implementation(op="Gemm", name="op")
class GemmOP(_OnnxGemm):
    """ONNX Gemm as MMM ``op``."""

    mmm_implementation = "op"


@op_implementation(op="Gemm", name="lmv")
class GemmLMV(_OnnxGemm):
    """ONNX Gemm as MMM ``lmv``."""

    mmm_implementation = "lmv"


@op_implementation(op="MatMul", name="mv")
class MatMulMV(_OnnxMatMul):
    """ONNX MatMul as a batched MMM ``mv``."""

    mmm_implementation = "mv"


@op_implementation(op="MatMul", name="op")
class MatMulOP(_OnnxMatMul):
    """ONNX MatMul as a batched MMM ``op``."""

    mmm_implementation = "op"


@op_implementation(op="MatMul", name="lmv")
class MatMulLMV(_OnnxMatMul):
    """ONNX MatMul as a batched MMM ``lmv``."""

    mmm_implementation = "lmv"


class _BlasMatMulExpansion(ExpandTransformation):
    """DaCe's ``MatMul`` library node (``@`` in a ``@dace.program``) through MMM; subclasses fix the shape.

    The operands keep the windows of the node's memlets and the strides of their containers."""

    environments = []
    mmm_implementation: str

    @classmethod
    def expansion(cls, node, parent_state, parent_sdfg):
        """Build the nested SDFG of ``node`` (connectors ``_a``, ``_b``, ``_c``): one (batched) MMM node."""
        if len(parent_state.in_edges(node)) != 2 or node.beta != 0 or node.alpha != 1 or node.transA or node.transB:
            raise UnsupportedOpError("MatMul", node.label, "alpha, beta or transposes (only C = A @ B is lowered)")
        edges = [
            in_edge_with_name(node, parent_state, "_a"),
            in_edge_with_name(node, parent_state, "_b"),
            out_edge_with_name(node, parent_state, "_c"),
        ]
        a, b, c = (
            Operand(conn, tuple(edge.data.subset.size()), tuple(parent_sdfg.arrays[edge.data.data].strides))
            for conn, edge in zip(("_a", "_b", "_c"), edges, strict=True)
        )
        if len(a.shape) == 1 and len(b.shape) == 1:
            raise UnsupportedOpError("MatMul", node.label, "a dot product of two vectors")
        dtype = parent_sdfg.arrays[edges[2].data.data].dtype
        return build_matmul_sdfg(a, b, c, dtype, cls.mmm_implementation, f"{node.label}_{cls.mmm_implementation}")


@dace.library.register_expansion(MatMul, "mv")
class BlasMatMulMV(_BlasMatMulExpansion):
    """``@`` as MMM ``mv``."""

    mmm_implementation = "mv"


@dace.library.register_expansion(MatMul, "op")
class BlasMatMulOP(_BlasMatMulExpansion):
    """``@`` as MMM ``op``."""

    mmm_implementation = "op"


@dace.library.register_expansion(MatMul, "lmv")
class BlasMatMulLMV(_BlasMatMulExpansion):
    """``@`` as MMM ``lmv``."""

    mmm_implementation = "lmv"
