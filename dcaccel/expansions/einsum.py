"""ONNX Einsum's equations, and the one map that computes any of them.

:func:`einsum_terms` reads an equation into the labels of each operand and of the output (ellipsis dimensions
labelled apart, the implicit output of an equation without ``->``); :class:`EinsumMap` gives every label its size
and builds the map. An equation of two operands that is a (batched) matrix product goes through the MMM node
instead (:mod:`dcaccel.expansions.gemm`); every other one — one operand (transpose, diagonal, sum, trace), inner
and outer products, three operands and more, size-0 dimensions, the scalar ``->`` — is :meth:`EinsumMap.build`.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import dace
from dace import Memlet

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import WCR_SUM, ExpansionBuilder, index_ranges, literal, subscript


def einsum_terms(equation: str, ranks: Sequence[int]) -> tuple[list[list[str]], list[str]]:
    """The labels of each input term and of the output of ``equation`` (whitespace ignored). An ellipsis
    stands for the dimensions its operand has beyond its letters, labelled ``...0``, ``...1``, ... aligned from
    the right across the operands (numpy broadcasting); without ``->`` the output is the ellipsis, then the
    letters used once, in alphabetical order (numpy's implicit mode). Raises ValueError if malformed."""
    equation = "".join(equation.split())
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"{len(terms)} terms for {len(ranks)} operands")
    ellipsis_ranks = [rank - len(term.replace("...", "")) for term, rank in zip(terms, ranks, strict=True)]
    widest = max([r for r, t in zip(ellipsis_ranks, terms, strict=True) if "..." in t], default=0)

    def labels(term: str, ellipsis_rank: int) -> list[str]:
        before, dots, after = term.partition("...")
        if (
            not all(c.isalpha() for c in before + after)
            or "..." in after
            or (ellipsis_rank < 0 if dots else ellipsis_rank != 0)
        ):
            raise ValueError(f"term '{term}' does not fit its operand")
        covered = [f"...{d}" for d in range(widest - ellipsis_rank, widest)] if dots else []
        return [*before, *covered, *after]

    operands = [labels(t, r) for t, r in zip(terms, ellipsis_ranks, strict=True)]
    if not arrow:
        letters = [label for term in operands for label in term if not label.startswith("...")]
        once = sorted(label for label in set(letters) if letters.count(label) == 1)
        return operands, [f"...{d}" for d in range(widest)] + once
    return operands, labels(output, widest if "..." in output else 0)


@dataclass(frozen=True)
class EinsumMap:
    """An Einsum equation over operands of known shapes: the labels of each operand and of the output, and the
    size of every label (that of its dimensions other than 1: a dimension of size 1 broadcasts)."""

    operands: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    sizes: dict[str, int]

    @classmethod
    def of(cls, equation: str, shapes: Sequence[Sequence[int]]) -> "EinsumMap":
        """``equation`` over operands of ``shapes``; ValueError if malformed, if a label has two sizes other than
        1, if an output label is repeated or in no operand, or for a symbolic size."""
        operands, output = einsum_terms(equation, [len(shape) for shape in shapes])
        if any(dace.symbolic.issymbolic(size) for shape in shapes for size in shape):
            raise ValueError(f"symbolic sizes {[tuple(shape) for shape in shapes]} (one map over known sizes)")
        sizes: dict[str, int] = {}
        for term, shape in zip(operands, shapes, strict=True):
            for label, size in zip(term, map(int, shape), strict=True):
                known = sizes.setdefault(label, size)
                if known != size and 1 not in (known, size):
                    raise ValueError(f"label '{label}' of sizes {known} and {size}")
                sizes[label] = size if known == 1 else known
        if len(set(output)) != len(output) or not set(output) <= set(sizes):
            raise ValueError(f"output labels {''.join(output)} repeated or in no operand")
        return cls(
            tuple(map(tuple, operands)), tuple(output), tuple(tuple(int(s) for s in shape) for shape in shapes), sizes
        )

    @property
    def summed(self) -> tuple[str, ...]:
        """The labels summed away (in no output), in order of first appearance."""
        return tuple(dict.fromkeys(label for term in self.operands for label in term if label not in self.output))

    @property
    def labels(self) -> tuple[str, ...]:
        """The map's dimensions, outermost first: the output's labels, then the summed ones."""
        return (*self.output, *self.summed)

    @property
    def out_shape(self) -> tuple[int, ...]:
        """The output's shape: the sizes of its labels."""
        return tuple(self.sizes[label] for label in self.output)

    def params(self) -> dict[str, str]:
        """The map parameter of every label: ``__e0``, ``__e1``... in the order of :attr:`labels`."""
        return {label: f"__e{k}" for k, label in enumerate(self.labels)}

    def subset(self, k: int) -> str:
        """The element of operand ``k`` read at the map's point: a repeated label (a diagonal) indexes both of its
        dimensions, a dimension of size 1 broadcast against a larger label is read at 0."""
        params = self.params()
        return subscript(
            [
                "0" if size == 1 and self.sizes[label] != 1 else params[label]
                for label, size in zip(self.operands[k], self.shapes[k], strict=True)
            ]
        )

    def reread(self, k: int) -> BufferReason | None:
        """Why the map reads operand ``k`` from a buffer: REUSE when it reads some element more than once (a label
        of the map the operand lacks or broadcasts), REORDER when it reads every element once but not row-major (a
        transpose), None when it reads it once, row-major (each dimension's label no earlier in the map than the
        previous dimension's), and when it reads nothing (an empty dimension)."""
        if math.prod(self.sizes.values()) == 0:
            return None
        read = {label for label, size in zip(self.operands[k], self.shapes[k], strict=True) if size != 1}
        if math.prod(self.sizes[label] for label in self.labels if label not in read) > 1:
            return BufferReason.REUSE
        positions = [self.labels.index(label) for label in self.operands[k] if label in read]
        return None if positions == sorted(positions) else BufferReason.REORDER

    def build(self, steps: ExpansionBuilder, inputs: Sequence[str], output: str) -> None:
        """Add the steps computing ``output`` from ``inputs`` (containers of ``steps``, in the operands' order).

        One flat map over every label, the output's first (in its order) then the summed ones, whose tasklet
        multiplies one element of each operand. Without summed labels it writes the output, row-major. With them
        (a sum, a trace, an inner product, a contraction) it is ``reduce``, accumulating with a WCR sum into an
        ACCUMULATE buffer shaped like the output set to zero first, each output element's terms in turn, then
        ``output`` copies the buffer into the output, row-major. An operand the map reads more than once or out of
        order comes from an operand buffer (:meth:`ExpansionBuilder.operand`, :meth:`reread`). With an empty label
        there is nothing to multiply: an empty output gets no step, another one ``zeros``, writing 0 row-major.
        """
        dtype = steps.desc(output).dtype
        params = self.params()
        element = subscript([params[label] for label in self.output])
        out_ranges = index_ranges([params[label] for label in self.output], self.out_shape)
        if math.prod(self.sizes.values()) == 0:  # no product to sum: an empty output, or zeros
            if math.prod(self.out_shape):
                steps.flat_map(
                    "zeros", out_ranges, {}, f"out = {literal(0, dtype)}", {"out": Memlet(f"{output}[{element}]")}
                )
            return
        ranges = index_ranges([params[label] for label in self.labels], [self.sizes[label] for label in self.labels])
        memlets = {}
        for k, name in enumerate(inputs):
            reason = self.reread(k)
            memlets[f"v{k}"] = Memlet(
                f"{steps.operand(name, reason is not None, reason or BufferReason.REUSE)}[{self.subset(k)}]"
            )
        code = "out = " + " * ".join(memlets)
        if not self.summed:
            steps.flat_map("einsum", ranges, memlets, code, {"out": Memlet(f"{output}[{element}]")})
            return
        accumulator = steps.transient("accumulator", self.out_shape, dtype, BufferReason.ACCUMULATE)
        steps.init(accumulator, literal(0, dtype))
        steps.flat_map("reduce", ranges, memlets, code, {"out": Memlet(f"{accumulator}[{element}]", wcr=WCR_SUM)})
        steps.flat_map(
            "output",
            out_ranges,
            {"a": Memlet(f"{accumulator}[{element}]")},
            "out = a",
            {"out": Memlet(f"{output}[{element}]")},
        )


EINSUM_TYPES = (
    dace.float16,
    dace.float32,
    dace.float64,
    dace.int8,
    dace.int16,
    dace.int32,
    dace.int64,
    dace.uint8,
    dace.uint16,
    dace.uint32,
    dace.uint64,
)
"""The element types :meth:`EinsumMap.build` computes in (ONNX Einsum's numeric types DaCe represents)."""
