"""Canonical ops of the ``ai.onnx.ml`` domain: Binarizer and ArrayFeatureExtractor.

DaCe builds node classes for these ops (its op registry holds every schema onnx ships, of every domain), so their
implementations register like the default domain's; :mod:`dcaccel.frontend.ml_domain` makes DaCe's importer build
them from a model.
"""

import dace
from dace import SDFG, Memlet, SDFGState

from dcaccel.expansions.builder import connector, index_params, index_ranges, subscript
from dcaccel.expansions.elementwise import ElementwiseOp, check_elementwise, expand_elementwise
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import CanonicalForward, input_shape, node_builder, onnx_shape, unsupported

BINARIZER = ElementwiseOp(
    "Binarizer",
    lambda x, T, node: f"({T}(1) if {x['X']} > {float(node.threshold or 0)!r} else {T}(0))",
    "Y = 1 where X > threshold, else 0",
)


class CanonicalBinarizer(CanonicalForward):
    """Canonical Binarizer: ``Y = 1`` where ``X > threshold``, else 0, in X's type. One flat map over the output;
    the output is produced row-major."""

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        check_elementwise(BINARIZER, node, state, sdfg)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        return expand_elementwise(BINARIZER, node, state, sdfg)


class CanonicalArrayFeatureExtractor(CanonicalForward):
    """Canonical ArrayFeatureExtractor: ``Z[..., k] = X[..., Y[k]]``, the features ``Y`` of every row of ``X`` (a
    1-D ``X`` is one row: ``Z`` is ``[1, len(Y)]``).

    One flat map over the output, produced row-major; each element reads its index and one element of its row of
    ``X`` at that position (a dynamic memlet of volume 1; ``X`` is copied into a REUSE buffer first when another
    task produces it). Indices outside the row are refused by onnxruntime and undefined here.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        if len(input_shape(node, state, sdfg, "X")) == 0 or len(input_shape(node, state, sdfg, "Y")) != 1:
            raise unsupported(
                node,
                f"X {input_shape(node, state, sdfg, 'X')} with indices {input_shape(node, state, sdfg, 'Y')} "
                "(supported: X of rank 1 or more, indices of rank 1)",
            )

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape, out_shape = onnx_shape(steps.desc("X")), onnx_shape(steps.desc("Z"))
        if 0 in out_shape:
            return steps.sdfg
        params = index_params(len(out_shape))
        rows = params[:-1] if len(shape) > 1 else []
        source = steps.operand("X", reused=True)
        row = Memlet(data=source, subset=subscript([*rows, f"0:{shape[-1]}"]), volume=1, dynamic=True)
        tasklet = steps.flat_map(
            "extract",
            index_ranges(params, out_shape),
            {"row": row, "j": Memlet(f"Y[{params[-1]}]")},
            "out = row[j]",
            {"out": Memlet(f"Z[{subscript(params)}]")},
        )
        tasklet.in_connectors[connector("row")] = dace.pointer(steps.desc(source).dtype)
        return steps.sdfg


IMPLEMENTATIONS = (
    Implementation("Binarizer", CANONICAL, CanonicalBinarizer),
    Implementation("ArrayFeatureExtractor", CANONICAL, CanonicalArrayFeatureExtractor),
)
