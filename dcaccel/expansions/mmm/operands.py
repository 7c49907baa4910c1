"""The matrix operands of an MMM node, read from the memlets on its connectors.

An operand memlet may address a slice of a larger container (e.g. one group's ``W_col[g, :, :]``):
its last two dimensions are the matrix, a one-dimensional operand is a vector (a row for ``_a``, a
column for ``_b``). The leading dimensions of ``_c``'s subset whose size is not 1 are the **batch**
of the product, C[b] = A[b]·B[b]: the leading dimensions of ``_a`` and ``_b`` are aligned with
the leading dimensions of ``_c`` from the right (numpy rules, over any number of batch dimensions)
and either have the size of the batch dimension they face or size 1 (broadcast: the same matrix for
every batch element); every other leading dimension must have size 1. The nested SDFG
declares the whole container (its shape and strides) and addresses the window inside it, so that
DaCe integrates and inlines it as that container, without a view.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import dace
from dace import symbolic

from dcaccel.errors import DcaccelError

CONNECTORS = ("_a", "_b", "_c")


@dataclass(frozen=True)
class MatrixView:
    """One operand: the container its memlet addresses (shape, strides, element type), where the memlet's
    window starts in it, which container dimensions are the matrix rows and columns (None: a vector
    operand, size one there) and, per batch dimension of the product, the container dimension indexed by
    the batch index (None: broadcast, the window's start for every batch element)."""

    shape: tuple
    strides: tuple
    dtype: dace.typeclass
    window: tuple
    start: tuple
    row_axis: int | None
    column_axis: int | None
    batch_axes: tuple[int | None, ...] = ()

    @property
    def rows(self):
        return 1 if self.row_axis is None else self.window[self.row_axis]

    @property
    def columns(self):
        return 1 if self.column_axis is None else self.window[self.column_axis]

    def index(self, row: str, column: str, batch: Sequence[str] = ()) -> str:
        """Subset expression, in the container, of element (``row``, ``column``) of batch element ``batch``
        of the matrix; ``row``, ``column`` and the batch indices may be ranges ("0:N") or index expressions
        relative to the window (``batch`` may be empty when the view has no batch axes: the first element)."""
        index = [str(s) for s in self.start]
        axes = [(self.row_axis, row), (self.column_axis, column), *zip(self.batch_axes, batch, strict=False)]
        for axis, value in axes:
            if axis is not None:
                index[axis] = _shift(value, self.start[axis])
        return ", ".join(index)

    def whole(self, batch: Sequence) -> str:
        """Subset expression of the whole window: every row, column and (non-broadcast) batch element;
        ``batch`` holds the sizes of the product's batch dimensions."""
        return self.index(f"0:{self.rows}", f"0:{self.columns}", [f"0:{size}" for size in batch])

    def compact(self, batch: Sequence) -> "MatrixView":
        """A new contiguous row-major container holding this operand's matrices: one per non-broadcast batch
        index (the product's ``batch`` sizes), in batch order, each rows × columns."""
        kept = [size for size, axis in zip(batch, self.batch_axes, strict=True) if axis is not None]
        shape = (*kept, self.rows, self.columns)
        strides = _row_major_strides(shape)
        positions = iter(range(len(kept)))
        axes = tuple(None if axis is None else next(positions) for axis in self.batch_axes)
        return MatrixView(shape, strides, self.dtype, shape, (0,) * len(shape), len(kept), len(kept) + 1, axes)

    @classmethod
    def matrix(cls, rows, columns, dtype: dace.typeclass, batch: Sequence = ()) -> "MatrixView":
        """A whole contiguous row-major rows × columns matrix, or a batch of them (``batch`` sizes first)."""
        shape = (*batch, rows, columns)
        strides = _row_major_strides(shape)
        rank = len(batch)
        return cls(shape, strides, dtype, shape, (0,) * len(shape), rank, rank + 1, tuple(range(rank)))


def _row_major_strides(shape: tuple) -> tuple:
    return tuple(math.prod(shape[d + 1 :]) for d in range(len(shape)))


def _shift(expression: str, start) -> str:
    """``expression`` (an index or a ``begin:end`` range) moved by ``start``."""
    if start == 0:
        return expression
    return ":".join(f"{start} + {part}" for part in expression.split(":"))


@dataclass(frozen=True)
class MMMOperands:
    """C[b][N×M] = A[b][N×K]·B[b][K×M] for every index b of the batch (possibly empty): the three operand
    views, keyed by connector ``_a``, ``_b``, ``_c``."""

    a: MatrixView
    b: MatrixView
    c: MatrixView

    @classmethod
    def contiguous(cls, n, k, m, dtype: dace.typeclass = dace.float32, batch: Sequence = ()) -> "MMMOperands":
        """Operands that are whole row-major matrices of sizes N×K, K×M, N×M, or batches of them."""
        return cls(
            MatrixView.matrix(n, k, dtype, batch),
            MatrixView.matrix(k, m, dtype, batch),
            MatrixView.matrix(n, m, dtype, batch),
        )

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
    def batch(self) -> tuple:
        """Sizes of the batch dimensions of the product (empty for a single product)."""
        return tuple(self.c.window[axis] for axis in self.c.batch_axes)

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


def _leading_axes(sizes: tuple, orientation: str) -> list[int]:
    """The dimensions of a subset of ``sizes`` before its matrix (or vector) dimensions."""
    axes = _AXES[orientation](len(sizes))
    return [d for d in range(len(sizes)) if d not in axes and all(a is None or d < a for a in axes)]


def _is_one(size) -> bool:
    return not symbolic.issymbolic(size) and size == 1


@dataclass(frozen=True)
class Batch:
    """The batch of a product: the ``sizes`` of its batch dimensions and, per leading dimension of the output's
    subset (before its matrix or vector dimensions), the batch dimension it is (None: a dimension of size 1)."""

    sizes: tuple
    positions: tuple[int | None, ...]

    @classmethod
    def of_output(cls, memlet: dace.Memlet, orientation: str) -> "Batch":
        """The batch of a product whose output is ``memlet``: its leading dimensions whose size is not 1."""
        sizes = tuple(memlet.subset.size())
        leading = [sizes[d] for d in _leading_axes(sizes, orientation)]
        batch = [size for size in leading if not _is_one(size)]
        counter = iter(range(len(batch)))
        return cls(tuple(batch), tuple(None if _is_one(size) else next(counter) for size in leading))


def _matrix_view(
    node, connector: str, memlet: dace.Memlet, desc: dace.data.Data, orientation: str, batch: Batch
) -> MatrixView:
    """The matrix a memlet addresses as a "matrix" (its last two dimensions), a "row" or "column" vector
    (its last dimension) or a "scalar", batched over the product's ``batch``: its leading dimensions, aligned
    from the right with the output's (numpy rules), have the size of the batch dimension they face or size 1
    (broadcast); any other dimension of the subset must have size one."""
    sizes = tuple(memlet.subset.size())
    axes = _AXES[orientation](len(sizes))
    valid = all(a is None or a >= 0 for a in axes)
    batch_axes: list[int | None] = [None] * len(batch.sizes)
    if valid:
        for position, axis in enumerate(reversed(_leading_axes(sizes, orientation))):
            facing = len(batch.positions) - 1 - position
            target = batch.positions[facing] if facing >= 0 else None
            if target is not None and symbolic.equal(sizes[axis], batch.sizes[target]) is True:
                batch_axes[target] = axis
            elif not _is_one(sizes[axis]):
                valid = False
    if not valid:
        of_batch = f" of a batch {tuple(batch.sizes)}" if batch.sizes else ""
        raise DcaccelError(
            f"MMM node '{node.label}': operand {connector} ({memlet.data}) must be a {orientation}{of_batch}, "
            f"got subset sizes {sizes}"
        )
    start = tuple(memlet.subset.min_element())
    return MatrixView(tuple(desc.shape), tuple(desc.strides), desc.dtype, sizes, start, *axes, tuple(batch_axes))


def matrix_views(node: dace.nodes.LibraryNode, state: dace.SDFGState) -> dict[str, MatrixView]:
    """The matrix view on each connector ``_a``, ``_b``, ``_c`` of ``node``; a missing one is an error.

    A one-dimensional ``_a`` (after its batch dimensions) is a row vector (1×K), a one-dimensional ``_b``
    a column vector (K×1); ``_c`` is then a row (vector ``_a``), a column (vector ``_b``) or a single
    element (both). The batch is that of ``_c`` (see the module docstring).
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
    batch = Batch.of_output(memlets["_c"], orientations["_c"])
    return {
        c: _matrix_view(node, c, memlets[c], sdfg.arrays[memlets[c].data], orientations[c], batch) for c in CONNECTORS
    }


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
