"""The matrix operands of an MMM node, read from the memlets on its connectors.

An operand memlet may address a slice of a larger container (e.g. one group's ``W_col[g, :, :]`` or
one batch element's ``A[b, :, :]``): its last two dimensions are the matrix, every leading dimension
must have size one. A one-dimensional operand is a vector (a row for ``_a``, a column for ``_b``).
The nested SDFG declares the whole container (its shape and strides) and addresses the window inside
it, so that DaCe integrates and inlines it as that container, without a view.
"""

from dataclasses import dataclass

import dace
from dace import symbolic

from dcaccel.errors import DcaccelError

CONNECTORS = ("_a", "_b", "_c")


@dataclass(frozen=True)
class MatrixView:
    """One operand: the container its memlet addresses (shape, strides, element type), where the memlet's
    window starts in it, and which container dimensions are the matrix rows and columns (None: a vector
    operand, size one there)."""

    shape: tuple
    strides: tuple
    dtype: dace.typeclass
    window: tuple
    start: tuple
    row_axis: int | None
    column_axis: int | None

    @property
    def rows(self):
        return 1 if self.row_axis is None else self.window[self.row_axis]

    @property
    def columns(self):
        return 1 if self.column_axis is None else self.window[self.column_axis]

    def index(self, row: str, column: str) -> str:
        """Subset expression, in the container, of element (``row``, ``column``) of the matrix; ``row`` and
        ``column`` may be ranges ("0:N") or index expressions relative to the window."""
        index = [str(s) for s in self.start]
        for axis, value in ((self.row_axis, row), (self.column_axis, column)):
            if axis is not None:
                index[axis] = _shift(value, self.start[axis])
        return ", ".join(index)

    @classmethod
    def matrix(cls, rows, columns, dtype: dace.typeclass) -> "MatrixView":
        """A whole contiguous row-major rows × columns matrix."""
        return cls((rows, columns), (columns, 1), dtype, (rows, columns), (0, 0), 0, 1)


def _shift(expression: str, start) -> str:
    """``expression`` (an index or a ``begin:end`` range) moved by ``start``."""
    if start == 0:
        return expression
    return ":".join(f"{start} + {part}" for part in expression.split(":"))


@dataclass(frozen=True)
class MMMOperands:
    """C[N×M] = A[N×K]·B[K×M]: the three operand views, keyed by connector ``_a``, ``_b``, ``_c``."""

    a: MatrixView
    b: MatrixView
    c: MatrixView

    @classmethod
    def contiguous(cls, n, k, m, dtype: dace.typeclass = dace.float32) -> "MMMOperands":
        """Operands that are whole row-major matrices of sizes N×K, K×M, N×M."""
        return cls(MatrixView.matrix(n, k, dtype), MatrixView.matrix(k, m, dtype), MatrixView.matrix(n, m, dtype))

    @property
    def n(self):
        return self.a.rows

    @property
    def k(self):
        return self.a.columns

    @property
    def m(self):
        return self.b.columns

    @property
    def dtype(self) -> dace.typeclass:
        return self.c.dtype

    def view(self, connector: str) -> MatrixView:
        """The view on ``connector`` (``_a``, ``_b`` or ``_c``)."""
        return {"_a": self.a, "_b": self.b, "_c": self.c}[connector]


_AXES = {
    "matrix": lambda n: (n - 2, n - 1),
    "row": lambda n: (None, n - 1),
    "column": lambda n: (n - 1, None),
    "scalar": lambda n: (None, None),
}


def _matrix_view(node, connector: str, memlet: dace.Memlet, desc: dace.data.Data, orientation: str) -> MatrixView:
    """The matrix a memlet addresses as a "matrix" (its last two dimensions), a "row" or "column" vector
    (its last dimension) or a "scalar"; every other dimension of the subset must have size one."""
    sizes = tuple(memlet.subset.size())
    axes = _AXES[orientation](len(sizes))
    if any(axis is not None and axis < 0 for axis in axes) or any(
        size != 1 for axis, size in enumerate(sizes) if axis not in axes
    ):
        raise DcaccelError(
            f"MMM node '{node.label}': operand {connector} ({memlet.data}) must be a {orientation}, "
            f"got subset sizes {sizes}"
        )
    start = tuple(memlet.subset.min_element())
    return MatrixView(tuple(desc.shape), tuple(desc.strides), desc.dtype, sizes, start, *axes)


def matrix_views(node: dace.nodes.LibraryNode, state: dace.SDFGState) -> dict[str, MatrixView]:
    """The matrix view on each connector ``_a``, ``_b``, ``_c`` of ``node``; a missing one is an error.

    A one-dimensional ``_a`` is a row vector (1×K), a one-dimensional ``_b`` a column vector (K×1);
    ``_c`` is then a row (vector ``_a``), a column (vector ``_b``) or a single element (both).
    """
    sdfg = state.sdfg
    memlets = {e.dst_conn: e.data for e in state.in_edges(node) if e.dst_conn in CONNECTORS}
    memlets.update({e.src_conn: e.data for e in state.out_edges(node) if e.src_conn in CONNECTORS})
    missing = [c for c in CONNECTORS if c not in memlets or memlets[c].is_empty()]
    if missing:
        raise DcaccelError(f"MMM node '{node.label}': connector(s) {', '.join(missing)} not connected")
    a_vector, b_vector = memlets["_a"].subset.dims() == 1, memlets["_b"].subset.dims() == 1
    orientations = {
        "_a": "row" if a_vector else "matrix",
        "_b": "column" if b_vector else "matrix",
        "_c": {(False, False): "matrix", (True, False): "row", (False, True): "column"}.get(
            (a_vector, b_vector), "scalar"
        ),
    }
    return {c: _matrix_view(node, c, memlets[c], sdfg.arrays[memlets[c].data], orientations[c]) for c in CONNECTORS}


def mmm_operands(node: dace.nodes.LibraryNode, state: dace.SDFGState) -> MMMOperands:
    """The operand views of the product ``node`` computes, checked for consistency.

    Raises :class:`DcaccelError` naming the node and the mismatching operand shapes.
    """
    views = matrix_views(node, state)
    a, b, c = views["_a"], views["_b"], views["_c"]
    shapes = f"_a {a.rows}x{a.columns}, _b {b.rows}x{b.columns}, _c {c.rows}x{c.columns}"
    if symbolic.equal(a.columns, b.rows) is False:
        raise DcaccelError(f"MMM node '{node.label}': inner dimensions differ ({shapes})")
    if symbolic.equal(c.rows, a.rows) is False or symbolic.equal(c.columns, b.columns) is False:
        raise DcaccelError(f"MMM node '{node.label}': output does not match the operands ({shapes})")
    if not (a.dtype == b.dtype == c.dtype):
        raise DcaccelError(f"MMM node '{node.label}': operand types differ (_a {a.dtype}, _b {b.dtype}, _c {c.dtype})")
    return MMMOperands(a, b, c)
