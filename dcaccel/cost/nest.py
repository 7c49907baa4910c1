"""The loop nest of a multiply-accumulate layer with the affine accesses of its three operands.

A layer is a perfect loop nest of named loops (``K`` output channels, ``C`` input channels, ``OY``/``OX``
output rows/columns, ``FY``/``FX`` kernel rows/columns, ``B`` batch, ``G`` groups; for a matrix product
``K``, ``C``, ``D``) around one multiply-accumulate ``O[...] += W[...] · I[...]``. Every index of an
operand is an affine form Σ a·loop of the loops (a Conv's input row is ``stride·OY + dilation·FY``), so

- a loop is *relevant* to an operand when some index of it has a non-zero coefficient on the loop;
- the *footprint* of an operand over a tile (an extent per loop) is the number of elements the tile
  touches: per index, the smaller of its span Σ |a|·(extent − 1) + 1 (the sliding window of a Conv's
  input) and the number of points of the loops it sums (a stride larger than the window skips
  columns), the product over its indices — exact for every index of the layers built here, never
  below the elements touched (padding rows are counted as read).

:func:`layer_nest` builds the nest of an ONNX ``Conv``, ``Gemm`` or ``MatMul`` node from its attributes and
its operands' shapes (:mod:`dcaccel.mapping.layers` reads them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from dcaccel.errors import DcaccelError

#: The operands of a multiply-accumulate layer: weights, input activations, outputs (partial sums).
OPERANDS = ("W", "I", "O")

#: One index of an operand: (loop, coefficient) pairs of its affine form.
Index = tuple[tuple[str, int], ...]


def _distinct(span, points):
    """Values an affine index takes over a box: at most its span (max − min + 1) and at most the box's points
    (a 1×1 Conv of stride 2 reads every other column: its 14 columns span 27)."""
    return min(span, points)


@dataclass(frozen=True)
class LayerNest:
    """A loop nest ``loops`` (name -> extent) and each operand's indices as affine forms of the loops."""

    name: str
    loops: Mapping[str, int]
    accesses: Mapping[str, tuple[Index, ...]]

    def __post_init__(self):
        for operand, indices in self.accesses.items():
            for index in indices:
                for loop, _ in index:
                    if loop not in self.loops:
                        raise DcaccelError(f"layer {self.name}: operand {operand} indexes unknown loop '{loop}'")

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the layer: the product of its loop extents."""
        return math.prod(self.loops.values())

    @cached_property
    def _relevant(self) -> dict[str, frozenset[str]]:
        return {
            operand: frozenset(loop for index in indices for loop, coefficient in index if coefficient)
            for operand, indices in self.accesses.items()
        }

    @cached_property
    def _touches(self) -> dict[tuple[str, str], tuple[tuple[int, int], ...]]:
        """(operand, loop) -> the (index position, |coefficient|) pairs of the loop in the operand's indices."""
        touches: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for operand, indices in self.accesses.items():
            for position, index in enumerate(indices):
                for loop, coefficient in index:
                    touches.setdefault((operand, loop), []).append((position, abs(coefficient)))
        return {key: tuple(value) for key, value in touches.items()}

    def relevant(self, operand: str, loop: str) -> bool:
        """Whether ``loop`` indexes ``operand`` (iterating it visits other elements of the operand)."""
        return loop in self._relevant[operand]

    def footprint(self, operand: str, extents: Mapping[str, int]) -> int:
        """Elements of ``operand`` touched by a tile of ``extents`` (loops not named: extent 1)."""
        size = 1
        for index in self.accesses[operand]:
            size *= _distinct(
                1 + sum(abs(coefficient) * (extents.get(loop, 1) - 1) for loop, coefficient in index),
                math.prod(extents.get(loop, 1) for loop, _ in index),
            )
        return size

    def footprints(self, operand: str, start: Mapping[str, int], steps) -> list[int]:
        """The footprint over ``start`` and then after each ``(loop, factor)`` of ``steps`` multiplies its loop's
        extent: ``len(steps) + 1`` values, computed incrementally."""
        extents = dict(start)
        indices = self.accesses[operand]
        spans = [1 + sum(abs(c) * (extents.get(loop, 1) - 1) for loop, c in index) for index in indices]
        points = [math.prod(extents.get(loop, 1) for loop, _ in index) for index in indices]
        touches = self._touches
        table = [math.prod(map(_distinct, spans, points))]
        for loop, factor in steps:
            touched = touches.get((operand, loop), ())
            if not touched:
                table.append(table[-1])
                continue
            old = extents.get(loop, 1)
            extents[loop] = old * factor
            for position, coefficient in touched:
                spans[position] += coefficient * (old * factor - old)
                points[position] *= factor
            table.append(math.prod(map(_distinct, spans, points)))
        return table

    def size(self, operand: str) -> int:
        """Elements of ``operand`` over the whole nest."""
        return self.footprint(operand, self.loops)


def conv_nest(name: str, attributes: dict, weight: tuple[int, ...], output: tuple[int, ...]) -> LayerNest:
    groups = int(attributes.get("group", 1))
    spatial = len(weight) - 2
    if spatial not in (1, 2):
        raise DcaccelError(f"layer {name}: a {spatial}-D Conv has no loop nest here (1-D and 2-D only)")
    strides = list(attributes.get("strides", [1] * spatial))
    dilations = list(attributes.get("dilations", [1] * spatial))
    out_rows, out_cols = (1, output[2]) if spatial == 1 else output[2:]
    kernel_rows, kernel_cols = (1, weight[2]) if spatial == 1 else weight[2:]
    stride_y, stride_x = ([1] + strides) if spatial == 1 else strides
    dilation_y, dilation_x = ([1] + dilations) if spatial == 1 else dilations
    loops = {
        "B": output[0],
        "G": groups,
        "K": weight[0] // groups,
        "C": weight[1],
        "OY": out_rows,
        "OX": out_cols,
        "FY": kernel_rows,
        "FX": kernel_cols,
    }
    channel_in = (("G", weight[1]), ("C", 1))
    accesses = {
        "W": ((("G", weight[0] // groups), ("K", 1)), (("C", 1),), (("FY", 1),), (("FX", 1),)),
        "I": ((("B", 1),), channel_in, (("OY", stride_y), ("FY", dilation_y)), (("OX", stride_x), ("FX", dilation_x))),
        "O": ((("B", 1),), (("G", weight[0] // groups), ("K", 1)), (("OY", 1),), (("OX", 1),)),
    }
    return LayerNest(name, {loop: extent for loop, extent in loops.items()}, accesses)


def product_nest(name: str, features: int, inner: int, rows: int) -> LayerNest:
    """O[D×K] = I[D×C]·W[C×K] (the names ZigZag gives a Gemm's loops): ``K`` output features, ``C`` input
    features, ``D`` rows of the activations."""
    return LayerNest(
        name,
        {"K": features, "C": inner, "D": rows},
        {"W": ((("C", 1),), (("K", 1),)), "I": ((("D", 1),), (("C", 1),)), "O": ((("D", 1),), (("K", 1),))},
    )


def layer_nest(node, shapes: Mapping[str, tuple[int, ...]], attributes: dict) -> LayerNest:
    """The loop nest of the ONNX ``Conv``, ``Gemm`` or 2-D ``MatMul`` ``node`` (static shapes known).

    A Gemm ``Y = A·B`` (``transA``/``transB`` applied) multiplies activations ``A`` (D×C) by weights ``B``
    (C×K)."""
    missing = [value for value in [*node.input[:2], node.output[0]] if value not in shapes]
    if missing:
        raise DcaccelError(f"layer {node.name}: no static shape for {', '.join(missing)}")
    if node.op_type == "Conv":
        return conv_nest(node.name, attributes, shapes[node.input[1]], shapes[node.output[0]])
    a, b = shapes[node.input[0]], shapes[node.input[1]]
    if node.op_type == "Gemm" and len(a) == 2 and len(b) == 2:
        rows, inner = (a[1], a[0]) if attributes.get("transA", 0) else a
        columns = b[0] if attributes.get("transB", 0) else b[1]
        return product_nest(node.name, columns, inner, rows)
    if node.op_type == "MatMul" and len(a) == 2 and len(b) == 2:
        return product_nest(node.name, b[1], a[1], a[0])
    raise DcaccelError(f"layer {node.name}: {node.op_type} with operands {a} and {b} has no loop nest here")
