"""Canonical ops of the ``ai.onnx.ml`` domain: Binarizer, ArrayFeatureExtractor and TreeEnsemble.

DaCe builds node classes for these ops (its op registry holds every schema onnx ships, of every domain), so their
implementations register like the default domain's; :mod:`dcaccel.frontend.ml_domain` makes DaCe's importer build
them from a model.
"""

import dace
import numpy as np
from dace import SDFG, Memlet, SDFGState
from dace.sdfg.utils import in_desc_with_name

from dcaccel.expansions.builder import connector, index_params, index_ranges, subscript
from dcaccel.expansions.elementwise import ElementwiseOp, elementwise_implementation
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import CanonicalForward, input_shape, node_builder, onnx_shape, unsupported

BINARIZER = ElementwiseOp(
    "Binarizer",
    lambda x, T, node: f"({T}(1) if {x['X']} > {float(node.threshold or 0)!r} else {T}(0))",
    "Y = 1 where X > threshold, else 0, in X's type",
)


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


AGGREGATES = {
    0: ("__acc += {weight} / {trees};", "0.0"),  # AVERAGE
    1: ("__acc += {weight};", "0.0"),  # SUM
    2: ("__acc = std::min(__acc, {weight});", "{highest}"),  # MIN
    3: ("__acc = std::max(__acc, {weight});", "{lowest}"),  # MAX
}
"""TreeEnsemble's ``aggregate_function`` codes: the C++ statement adding a leaf's weight to the target's value, and
the value's start (ONNX's reference: a target no leaf reaches keeps it)."""

COMPARISONS = {0: "<=", 1: "<", 2: ">=", 3: ">", 4: "==", 5: "!="}
"""TreeEnsemble's ``nodes_modes`` codes of a comparison with the split value; 6 is set membership."""

MEMBER = 6


def _tree_code(node, aggregate: str, trees: int) -> tuple[list[str], int]:
    """C++ lines adding the leaf each tree of the TreeEnsemble ``node`` reaches to ``__acc`` (for target ``__k``),
    and the most features one sample reads (the sum of the trees' depths). The trees are unrolled into nested
    ``if``/``else`` from their attributes; the sets of the membership nodes are taken in the order the trees are
    walked, true branch first (ONNX's reference)."""
    members = iter(np.asarray(node.membership_values if node.membership_values is not None else [], float))
    tracks = node.nodes_missing_value_tracks_true or [0] * len(node.nodes_featureids)
    splits, modes = np.asarray(node.nodes_splits, float), [int(m) for m in node.nodes_modes]

    def leaf(index: int, indent: str) -> list[str]:
        weight = repr(float(node.leaf_weights[index]))
        return [f"{indent}if (__k == {int(node.leaf_targetids[index])}) {aggregate.format(weight=weight, trees=trees)}"]

    def branch(index: int, is_leaf: bool, indent: str) -> tuple[list[str], int]:
        if is_leaf:
            return leaf(index, indent), 0
        value = f"(double)__x[{int(node.nodes_featureids[index])}]"
        if modes[index] == MEMBER:
            chosen = []
            while not np.isnan(member := next(members)):
                chosen.append(f"{value} == {float(member)!r}")
            test = " || ".join(chosen) or "false"
        else:
            test = f"{value} {COMPARISONS[modes[index]]} {float(splits[index])!r}"
        if tracks[index]:
            test = f"({test}) || std::isnan({value})"
        true, true_depth = branch(
            int(node.nodes_truenodeids[index]), bool(node.nodes_trueleafs[index]), indent + "    "
        )
        false, false_depth = branch(
            int(node.nodes_falsenodeids[index]), bool(node.nodes_falseleafs[index]), indent + "    "
        )
        lines = [f"{indent}if ({test}) {{", *true, f"{indent}}} else {{", *false, f"{indent}}}"]
        return lines, 1 + max(true_depth, false_depth)

    lines, reads = [], 0
    for root in (int(r) for r in node.tree_roots):
        single_leaf = (
            node.nodes_trueleafs[root]
            and node.nodes_falseleafs[root]
            and node.nodes_truenodeids[root] == node.nodes_falsenodeids[root]
        )
        tree, depth = branch(root, bool(single_leaf), "")  # a single leaf: the leaf at the root's index (reference)
        lines += tree
        reads += depth
    return lines, reads


class CanonicalTreeEnsemble(CanonicalForward):
    """Canonical TreeEnsemble (``ai.onnx.ml`` 5): ``Y[n, k]``, the weights of the leaves the trees reach for sample
    ``X[n]`` whose target is ``k``, aggregated by ``aggregate_function`` (average, sum, min, max; ONNX's reference
    semantics, without ``post_transform``, which it does not apply and which is refused).

    One flat map over the output, produced row-major; each element walks every tree (unrolled into nested
    comparisons from the attributes: the trees are constants) and reads at most the sum of their depths features
    of its sample (a dynamic memlet over the sample).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        if int(node.post_transform or 0):
            raise unsupported(node, f"post_transform={node.post_transform} (supported: 0, none)")
        if int(node.aggregate_function if node.aggregate_function is not None else 1) not in AGGREGATES:
            raise unsupported(node, f"aggregate_function={node.aggregate_function}")
        if any(int(m) not in (*COMPARISONS, MEMBER) for m in node.nodes_modes):
            raise unsupported(node, f"nodes_modes {sorted({int(m) for m in node.nodes_modes})}")
        x = in_desc_with_name(node, state, sdfg, "X")
        if x.dtype not in (dace.float32, dace.float64) or len(onnx_shape(x)) != 2:
            raise unsupported(node, f"X {onnx_shape(x)} of {x.dtype.to_string()} (supported: float32/64 of rank 2)")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        (samples, features), out_shape = onnx_shape(steps.desc("X")), onnx_shape(steps.desc("Y"))
        if 0 in out_shape:
            return steps.sdfg
        dtype = steps.desc("X").dtype
        aggregate, start = AGGREGATES[int(node.aggregate_function if node.aggregate_function is not None else 1)]
        info = np.finfo(dtype.type)
        lines, reads = _tree_code(node, aggregate, len(node.tree_roots))
        start = start.format(highest=repr(float(info.max)), lowest=repr(float(info.min)))
        code = "\n".join([f"double __acc = {start};", *lines, "__out = __acc;"])
        source = steps.operand("X", reused=True)
        x = Memlet(data=source, subset=f"__n, 0:{features}", volume=max(reads, 1), dynamic=True)
        tasklet = steps.flat_map(
            "tree_ensemble",
            {"__n": f"0:{samples}", "__k": f"0:{out_shape[1]}"},
            {"x": x},
            code,
            {"out": Memlet("Y[__n, __k]")},
            language=dace.Language.CPP,
        )
        tasklet.in_connectors[connector("x")] = dace.pointer(dtype)
        return steps.sdfg


IMPLEMENTATIONS = (
    elementwise_implementation(BINARIZER),
    Implementation("ArrayFeatureExtractor", CANONICAL, CanonicalArrayFeatureExtractor),
    Implementation("TreeEnsemble", CANONICAL, CanonicalTreeEnsemble),
)
