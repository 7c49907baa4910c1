"""Canonical linear algebra of ``@dace.program`` workloads (PUSCH-MIMO): DaCe's ``linalg`` library nodes; and
the ONNX op Det (:class:`CanonicalDet`).

The ``"canonical"`` implementation of ``dace.libraries.linalg`` nodes (``IMPLEMENTATIONS``, registered by
:func:`dcaccel.expansions.register`):

- ``Cholesky``: A = L·Lᴴ, right-looking, one column per step;
- ``Inv``: A⁻¹ = L⁻ᴴ·L⁻¹ through Cholesky, forward substitution (L·Y = I) and back
  substitution (Lᴴ·X = Y);
- ``Solve``: A·X = B the same way, with B in place of I;
- ``Transpose``: a permuting copy.

Cholesky, and therefore ``Inv`` and ``Solve`` here, require a Hermitian (real: symmetric)
positive definite matrix, as the Gram matrices of MMSE detection are; the result for another
matrix is meaningless. The factorisation and the substitutions are sequences of dependent steps
over the matrix size n, so they are unrolled into flat maps (about 6n tasks): n must be a
number when the node is expanded (specialise the program's symbols first).

The intermediate matrices are stored in the coordinates of the full matrix, shifted by the step
(``A_j`` holds rows and columns j..n-1 of the j-th trailing matrix).
"""

import dace
import dace.library
from dace import SDFG, Memlet, SDFGState
from dace.libraries.linalg import Cholesky, Inv, Solve, Transpose
from dace.symbolic import issymbolic
from dace.transformation.transformation import ExpandTransformation

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import ExpansionBuilder, index_params, index_ranges, is_complex, literal, subscript
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    input_shape,
    node_builder,
    onnx_shape,
    streams_into,
    unsupported,
)


def _shift(param: str, offset: int) -> str:
    return param if offset == 0 else f"{param} - {offset}"


def _conj(expression: str, dtype: dace.typeclass) -> str:
    return f"conj({expression})" if is_complex(dtype) else expression


def _operand_dims(node, connector: str, sizes: list, rank: int) -> list[int]:
    """The dimensions of a memlet subset that make a ``rank``-dimensional operand.

    Dimensions of size 1 are dropped (a matrix of a batch of matrices), except the trailing ones
    the operand needs (a 1×1 matrix stays a matrix).
    """
    kept = [d for d, size in enumerate(sizes) if size != 1]
    if len(kept) > rank:
        raise unsupported(node, f"{connector} has shape {tuple(map(str, sizes))}, not {rank}-dimensional")
    fill = [d for d in reversed(range(len(sizes))) if d not in kept][: rank - len(kept)]
    return sorted(kept + fill)


def _edges(node, state: SDFGState) -> list:
    return [(e, e.dst_conn) for e in state.in_edges(node)] + [(e, e.src_conn) for e in state.out_edges(node)]


def _operands(node, state: SDFGState, sdfg: SDFG, ranks: dict[str, int]) -> dict[str, dace.data.Array]:
    """The operand of each connector of a linalg node, of rank ``ranks[connector]``: shaped and strided like
    the part of the outer container its memlet selects."""
    operands = {}
    for edge, connector in _edges(node, state):
        outer = sdfg.arrays[edge.data.data]
        sizes = edge.data.subset.size()
        dims = _operand_dims(node, connector, sizes, ranks[connector])
        strides = [outer.strides[d] for d in dims]
        operands[connector] = dace.data.Array(
            outer.dtype, tuple(sizes[d] for d in dims), strides=strides, storage=outer.storage
        )
    return operands


def _node_steps(node, state: SDFGState, sdfg: SDFG, ranks: dict[str, int]) -> tuple[ExpansionBuilder, dict]:
    """The builder of a linalg node's nested SDFG: one argument per connector (see :func:`_operands`).

    Returns the builder and the shape of every argument.
    """
    steps = ExpansionBuilder(f"{node.label}_expansion", prefix=node.label)
    operands = _operands(node, state, sdfg, ranks)
    for edge, connector in _edges(node, state):
        streamed = edge.dst is node and streams_into(node, state, sdfg, edge)
        steps.argument(connector, operands[connector], streamed=streamed)
    return steps, {connector: tuple(desc.shape) for connector, desc in operands.items()}


def _shapes(node, state: SDFGState, sdfg: SDFG, ranks: dict[str, int]) -> dict[str, tuple]:
    return {connector: tuple(desc.shape) for connector, desc in _operands(node, state, sdfg, ranks).items()}


def _square(node, steps_shapes: dict[str, tuple], *connectors: str) -> None:
    """Check that the operands ``connectors`` are square matrices of one size."""
    shapes = {steps_shapes[c] for c in connectors}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2 or len(set(next(iter(shapes)))) != 1:
        raise unsupported(node, f"expected square matrices of one size, got {[steps_shapes[c] for c in connectors]}")


def _size(node, shape: tuple) -> int:
    if any(issymbolic(s) for s in shape):
        raise unsupported(node, f"symbolic matrix size {tuple(map(str, shape))}: specialise the symbols first")
    return int(shape[0])


def add_cholesky(steps: ExpansionBuilder, source: str, n: int, dtype: dace.typeclass) -> str:
    """Add the steps of the Cholesky factor L of the n×n matrix ``source``; returns L's container.

    For each column j (right-looking):

    - ``column_j``: ``L[i, j] = A_j[i, j] / sqrt(A_j[j, j])`` for i ≥ j (column j of L, top down);
    - ``update_j`` (j < n-1): ``A_{j+1}[i, k] = A_j[i, k] - L[i, j]·conj(L[k, j])`` for i, k > j,
      row-major (the whole Hermitian trailing matrix, both triangles).

    Only the lower triangle of L is written. L and every ``A_j`` are REUSE buffers: ``L[:, j]``
    is re-read for every element of the trailing update, the pivot ``A_j[j, j]`` for every
    element of column j, which is also read in another order than the update wrote it.
    """
    factor = steps.transient("cholesky_factor", (n, n), dtype, BufferReason.REUSE)
    current, offset = source, 0
    for j in range(n):
        steps.flat_map(
            f"column_{j}",
            {"__i": f"{j}:{n}"},
            {
                "a": Memlet(f"{current}[{_shift('__i', offset)}, {j - offset}]"),
                "d": Memlet(f"{current}[{j - offset}, {j - offset}]"),
            },
            "l = a / sqrt(d)",
            {"l": Memlet(f"{factor}[__i, {j}]")},
        )
        if j == n - 1:
            break
        trailing = steps.transient(f"trailing_{j + 1}", (n - j - 1, n - j - 1), dtype, BufferReason.REUSE)
        steps.flat_map(
            f"update_{j}",
            {"__i": f"{j + 1}:{n}", "__k": f"{j + 1}:{n}"},
            {
                "a": Memlet(f"{current}[{_shift('__i', offset)}, {_shift('__k', offset)}]"),
                "li": Memlet(f"{factor}[__i, {j}]"),
                "lk": Memlet(f"{factor}[__k, {j}]"),
            },
            f"out = a - li * {_conj('lk', dtype)}",
            {"out": Memlet(f"{trailing}[{_shift('__i', j + 1)}, {_shift('__k', j + 1)}]")},
        )
        current, offset = trailing, j + 1
    return factor


def add_substitutions(
    steps: ExpansionBuilder, factor: str, rhs: str | None, n: int, m: int, dtype: dace.typeclass, vector: bool = False
) -> str:
    """Add the steps solving L·Lᴴ·X = B for X (n×m) given the factor L; returns X's container.

    ``rhs`` is B's container (a vector if ``vector``), or None for B = I (the inverse).

    Forward substitution L·Y = B, for each row k top down:

    - ``forward_row_k``: ``Y[k, :] = B_k[k, :] / L[k, k]``;
    - ``forward_update_k`` (k < n-1): ``B_{k+1}[i, :] = B_k[i, :] - L[i, k]·Y[k, :]`` for i > k.

    Back substitution Lᴴ·X = Y, for each row k bottom up (``C_{n-1} = Y``):

    - ``backward_row_k``: ``X[k, :] = C_k[k, :] / conj(L[k, k])``;
    - ``backward_update_k`` (k > 0): ``C_{k-1}[i, :] = C_k[i, :] - conj(L[k, i])·X[k, :]`` for i < k.

    Every step runs row-major. Y and X are REUSE buffers (row k is re-read by every element of
    the following update); the ``B_k`` and ``C_k`` are each read once, in the order written, and
    stream. With B = I, the identity is not stored: its elements are written into the tasklets.
    """
    one, zero = literal(1, dtype), literal(0, dtype)
    forward = steps.transient("forward", (n, m), dtype, BufferReason.REUSE)
    current, offset = rhs, 0
    for k in range(n):
        inputs = {"d": Memlet(f"{factor}[{k}, {k}]")}
        if current is None:
            value = f"({one} if __c == {k} else {zero})"
        else:
            row = k - offset
            index = f"{row}" if vector and current == rhs else f"{row}, __c"
            inputs["b"] = Memlet(f"{current}[{index}]")
            value = "b"
        steps.flat_map(
            f"forward_row_{k}", {"__c": f"0:{m}"}, inputs, f"y = {value} / d", {"y": Memlet(f"{forward}[{k}, __c]")}
        )
        if k == n - 1:
            break
        following = steps.transient(f"forward_rhs_{k + 1}", (n - k - 1, m), dtype)
        inputs = {"l": Memlet(f"{factor}[__i, {k}]"), "y": Memlet(f"{forward}[{k}, __c]")}
        if current is None:
            value = f"({one} if __i == __c else {zero})"
        else:
            index = _shift("__i", offset) if vector and current == rhs else f"{_shift('__i', offset)}, __c"
            inputs["b"] = Memlet(f"{current}[{index}]")
            value = "b"
        steps.flat_map(
            f"forward_update_{k}",
            {"__i": f"{k + 1}:{n}", "__c": f"0:{m}"},
            inputs,
            f"out = {value} - l * y",
            {"out": Memlet(f"{following}[{_shift('__i', k + 1)}, __c]")},
        )
        current, offset = following, k + 1

    solution = steps.transient("solution", (n, m), dtype, BufferReason.REUSE)
    current = forward
    for k in reversed(range(n)):
        steps.flat_map(
            f"backward_row_{k}",
            {"__c": f"0:{m}"},
            {"b": Memlet(f"{current}[{k}, __c]"), "d": Memlet(f"{factor}[{k}, {k}]")},
            f"x = b / {_conj('d', dtype)}",
            {"x": Memlet(f"{solution}[{k}, __c]")},
        )
        if k == 0:
            break
        preceding = steps.transient(f"backward_rhs_{k - 1}", (k, m), dtype)
        steps.flat_map(
            f"backward_update_{k}",
            {"__i": f"0:{k}", "__c": f"0:{m}"},
            {
                "b": Memlet(f"{current}[__i, __c]"),
                "l": Memlet(f"{factor}[{k}, __i]"),
                "x": Memlet(f"{solution}[{k}, __c]"),
            },
            f"out = b - {_conj('l', dtype)} * x",
            {"out": Memlet(f"{preceding}[__i, __c]")},
        )
        current = preceding
    return solution


def _copy_out(steps: ExpansionBuilder, source: str, target: str, shape: tuple, vector: bool = False) -> None:
    """Copy the n×m ``source`` into the output ``target``, row-major (the output is produced in order)."""
    n, m = shape[0], shape[1] if len(shape) > 1 else 1
    index = "__i" if vector else "__i, __c"
    steps.flat_map(
        "output",
        {"__i": f"0:{n}", "__c": f"0:{m}"},
        {"v": Memlet(f"{source}[__i, __c]")},
        "out = v",
        {"out": Memlet(f"{target}[{index}]")},
    )


@dace.library.expansion
class ExpandCholeskyCanonical(ExpandTransformation):
    """Canonical Cholesky: the factor L (``lower``) or Lᴴ (upper) of a Hermitian positive definite matrix.

    The steps of :func:`add_cholesky`, then ``output``: a copy task writing the factor row-major,
    zeros in the other triangle. An input produced by another task is first copied into a REUSE
    buffer (its first column is read top down and its pivot re-read).
    """

    environments = []
    ranks = {"_a": 2, "_b": 2}

    @classmethod
    def check(cls, node, state: SDFGState, sdfg: SDFG) -> None:
        """Raise :class:`UnsupportedOpError` unless A and L are square matrices of one numeric size."""
        shapes = _shapes(node, state, sdfg, cls.ranks)
        _square(node, shapes, "_a", "_b")
        _size(node, shapes["_a"])

    @classmethod
    def expansion(cls, node, parent_state: SDFGState, parent_sdfg: SDFG) -> SDFG:
        """Check ``node`` and build its nested SDFG."""
        cls.check(node, parent_state, parent_sdfg)
        steps, shapes = _node_steps(node, parent_state, parent_sdfg, cls.ranks)
        n = _size(node, shapes["_a"])
        dtype = steps.desc("_b").dtype
        source = steps.operand("_a", reused=True)
        factor = add_cholesky(steps, source, n, dtype)
        row, col = ("__i", "Min(__k, __i)") if node.lower else ("Max(__k, __i)", "__i")
        keep = "__k <= __i" if node.lower else "__k >= __i"
        value = "v" if node.lower else _conj("v", dtype)
        steps.flat_map(
            "output",
            {"__i": f"0:{n}", "__k": f"0:{n}"},
            {"v": Memlet(f"{factor}[{row}, {col}]")},
            f"out = {value} if {keep} else {literal(0, dtype)}",
            {"out": Memlet("_b[__i, __k]")},
        )
        return steps.sdfg


@dace.library.expansion
class ExpandInvCanonical(ExpandTransformation):
    """Canonical Inv of a Hermitian positive definite matrix: A⁻¹ = L⁻ᴴ·L⁻¹.

    The steps of :func:`add_cholesky` and :func:`add_substitutions` with B = I, then ``output``
    copies the inverse into the output row-major. An input produced by another task is first
    copied into a REUSE buffer.
    """

    environments = []
    ranks = {"_ain": 2, "_aout": 2}

    @classmethod
    def check(cls, node, state: SDFGState, sdfg: SDFG) -> None:
        """Raise :class:`UnsupportedOpError` for ``overwrite_a`` or unless A and its inverse are square
        matrices of one numeric size."""
        if node.overwrite:
            raise unsupported(node, "overwrite_a=True")
        shapes = _shapes(node, state, sdfg, cls.ranks)
        _square(node, shapes, "_ain", "_aout")
        _size(node, shapes["_ain"])

    @classmethod
    def expansion(cls, node, parent_state: SDFGState, parent_sdfg: SDFG) -> SDFG:
        """Check ``node`` and build its nested SDFG."""
        cls.check(node, parent_state, parent_sdfg)
        steps, shapes = _node_steps(node, parent_state, parent_sdfg, cls.ranks)
        n = _size(node, shapes["_ain"])
        dtype = steps.desc("_aout").dtype
        factor = add_cholesky(steps, steps.operand("_ain", reused=True), n, dtype)
        inverse = add_substitutions(steps, factor, None, n, n, dtype)
        _copy_out(steps, inverse, "_aout", (n, n))
        return steps.sdfg


def _rhs_rank(node, state: SDFGState) -> int:
    """Whether Solve's right-hand side is a vector (1) or a matrix (2), from the memlets' sizes.

    Dimensions of size 1 are ambiguous; B is a matrix when two dimensions are larger than 1, or
    when its last dimension differs from A's size.
    """
    (a,) = [e.data.subset.size() for e in state.in_edges(node) if e.dst_conn == "_ain"]
    (b,) = [e.data.subset.size() for e in state.in_edges(node) if e.dst_conn == "_bin"]
    larger = [size for size in b if size != 1]
    n = [size for size in a if size != 1] or [1]
    return 2 if len(larger) > 1 or (larger and larger[0] != n[0]) else 1


@dace.library.expansion
class ExpandSolveCanonical(ExpandTransformation):
    """Canonical Solve A·X = B for a Hermitian positive definite A (B a vector or a matrix).

    The steps of :func:`add_cholesky` on A and :func:`add_substitutions` on B (read row by row, in
    order, once), then ``output`` copies X into the output row-major. An A produced by another
    task is first copied into a REUSE buffer.
    """

    environments = []

    @staticmethod
    def ranks(node, state: SDFGState) -> dict[str, int]:
        """The rank of each operand: B and X are vectors or matrices (see :func:`_rhs_rank`)."""
        rhs_rank = _rhs_rank(node, state)
        return {"_ain": 2, "_bin": rhs_rank, "_bout": rhs_rank}

    @classmethod
    def check(cls, node, state: SDFGState, sdfg: SDFG) -> None:
        """Raise :class:`UnsupportedOpError` unless A is n×n, B and X are n or n×m, of numeric sizes."""
        shapes = _shapes(node, state, sdfg, cls.ranks(node, state))
        a, b, x = shapes["_ain"], shapes["_bin"], shapes["_bout"]
        if len(set(a)) != 1 or b[0] != a[0] or tuple(x) != tuple(b):
            raise unsupported(node, f"shapes A {a}, B {b}, X {x} (expected n×n, n or n×m, same as B)")
        _size(node, a)
        _size(node, b[1:] or (1,))

    @classmethod
    def expansion(cls, node, parent_state: SDFGState, parent_sdfg: SDFG) -> SDFG:
        """Check ``node`` and build its nested SDFG."""
        cls.check(node, parent_state, parent_sdfg)
        ranks = cls.ranks(node, parent_state)
        steps, shapes = _node_steps(node, parent_state, parent_sdfg, ranks)
        n = _size(node, shapes["_ain"])
        vector = ranks["_bin"] == 1
        m = 1 if vector else _size(node, shapes["_bin"][1:])
        dtype = steps.desc("_bout").dtype
        factor = add_cholesky(steps, steps.operand("_ain", reused=True), n, dtype)
        solution = add_substitutions(steps, factor, "_bin", n, m, dtype, vector=vector)
        _copy_out(steps, solution, "_bout", shapes["_bout"], vector=vector)
        return steps.sdfg


@dace.library.expansion
class ExpandTransposeCanonical(ExpandTransformation):
    """Canonical Transpose of a matrix: ``_out[j, i] = _inp[i, j]``.

    One flat map over the output, produced row-major, reading the input column by column: an
    input produced by another task is first copied into a REORDER buffer.
    """

    environments = []
    ranks = {"_inp": 2, "_out": 2}

    @classmethod
    def check(cls, node, state: SDFGState, sdfg: SDFG) -> None:
        """Raise :class:`UnsupportedOpError` unless the input and output are transposed matrices."""
        shapes = _shapes(node, state, sdfg, cls.ranks)
        rows, cols = shapes["_out"]
        if shapes["_inp"] != (cols, rows):
            raise unsupported(node, f"input {shapes['_inp']} and output {shapes['_out']} are not transposes")

    @classmethod
    def expansion(cls, node, parent_state: SDFGState, parent_sdfg: SDFG) -> SDFG:
        """Check ``node`` and build its nested SDFG."""
        cls.check(node, parent_state, parent_sdfg)
        steps, shapes = _node_steps(node, parent_state, parent_sdfg, cls.ranks)
        rows, cols = shapes["_out"]
        source = steps.operand("_inp", reused=True, reason=BufferReason.REORDER)
        steps.flat_map(
            "transpose",
            {"__j": f"0:{rows}", "__i": f"0:{cols}"},
            {"v": Memlet(f"{source}[__i, __j]")},
            "out = v",
            {"out": Memlet("_out[__j, __i]")},
        )
        return steps.sdfg


DET_MAX_SIZE = 64
"""The largest matrix Det eliminates in one tasklet (its ``n³`` steps run sequentially)."""

_LU_CODE = """
for (int k = 0; k < {n} * {n}; ++k) {{ __w[k] = __a[k]; }}
for (int c = 0; c < {n}; ++c) {{
    int pivot = c;
    for (int r = 0; r < {n}; ++r) {{
        if (r > c && fabs(__w[r * {n} + c]) > fabs(__w[pivot * {n} + c])) {{ pivot = r; }}
    }}
    if (pivot != c) {{
        for (int k = 0; k < {n}; ++k) {{
            double t = __w[c * {n} + k];
            __w[c * {n} + k] = -__w[pivot * {n} + k];
            __w[pivot * {n} + k] = t;
        }}
    }}
    for (int r = 0; r < {n}; ++r) {{
        if (r > c && __w[c * {n} + c] != 0.0) {{
            double f = __w[r * {n} + c] / __w[c * {n} + c];
            for (int k = 0; k < {n}; ++k) {{ __w[r * {n} + k] = __w[r * {n} + k] - f * __w[c * {n} + k]; }}
        }}
    }}
}}
"""
"""The elimination of one matrix ``__a`` into ``__w`` (see :class:`CanonicalDet`). The loops run over whole rows
and columns (the elements before the pivot's masked), so that their counts are numbers."""

_DIAGONAL_CODE = """
double det = 1.0;
for (int i = 0; i < {n}; ++i) {{ det = det * __u[i * {n} + i]; }}
__y = det;
"""


class CanonicalDet(CanonicalForward):
    """Canonical Det of a real matrix, or of each matrix of a batch (``X`` of shape ``[*, n, n]``, ``Y`` of shape
    ``[*]``; a scalar for one matrix): the product of the diagonal of ``U`` of a Gaussian elimination with partial
    pivoting (in column ``c``, the row at or below ``c`` of the largest magnitude is swapped up and negated,
    which keeps the determinant; a zero pivot leaves a zero on the diagonal), in double precision. Two flat
    maps over the batch, one matrix per iteration, in row-major order of the batch:

    1. ``lu``: reads the whole matrix (row-major) and writes its ``U`` into ``lu`` (an ACCUMULATE buffer: the
       matrix is eliminated in place, sequentially, columns in order and per column the rows in order);
    2. ``det``: reads ``U`` and writes the product of its diagonal, one determinant per matrix.

    Matrices of 1 to :data:`DET_MAX_SIZE` rows.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        shape = input_shape(node, state, sdfg, "X")
        if len(shape) < 2 or shape[-1] != shape[-2] or any(issymbolic(size) for size in shape):
            raise unsupported(node, f"input {list(map(str, shape))} (square matrices of numeric size)")
        if not 1 <= shape[-1] <= DET_MAX_SIZE:
            raise unsupported(node, f"{shape[-1]}x{shape[-1]} matrices (1 to {DET_MAX_SIZE} rows)")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("X"))
        *batch, n, _ = shape
        if 0 in batch:
            return steps.sdfg
        params = index_params(len(batch))
        ranges = index_ranges(params, batch)
        matrix = subscript([*params, f"0:{n}", f"0:{n}"])
        lu = steps.transient("lu", shape, dace.float64, BufferReason.ACCUMULATE)
        eliminate = steps.flat_map(
            "lu",
            ranges,
            {"a": Memlet(f"X[{matrix}]")},
            _LU_CODE.format(n=n),
            {"w": Memlet(f"{lu}[{matrix}]")},
            language=dace.Language.CPP,
        )
        eliminate.in_connectors["__a"] = dace.pointer(steps.desc("X").dtype)
        eliminate.out_connectors["__w"] = dace.pointer(dace.float64)
        diagonal = steps.flat_map(
            "det",
            ranges,
            {"u": Memlet(f"{lu}[{matrix}]")},
            _DIAGONAL_CODE.format(n=n),
            {"y": Memlet(f"Y[{subscript(params)}]")},
            language=dace.Language.CPP,
        )
        diagonal.in_connectors["__u"] = dace.pointer(dace.float64)
        return steps.sdfg


IMPLEMENTATIONS = (
    Implementation("Det", CANONICAL, CanonicalDet),
    Implementation("Cholesky", CANONICAL, ExpandCholeskyCanonical, Cholesky),
    Implementation("Inv", CANONICAL, ExpandInvCanonical, Inv),
    Implementation("Solve", CANONICAL, ExpandSolveCanonical, Solve),
    Implementation("Transpose", CANONICAL, ExpandTransposeCanonical, Transpose),
)
