"""Canonical Binarizer, ArrayFeatureExtractor and TreeEnsemble (``ai.onnx.ml``): values against onnxruntime (ONNX's
reference for Binarizer and TreeEnsemble, which onnxruntime has no kernel for; one compile), over element types,
thresholds, ranks (a 1-D ``X`` is one row), repeated indices, every aggregate function and comparison, set
membership, missing values and a single-leaf tree; structure (one flat map each) and rejections.

The SDFG under test holds the library nodes DaCe builds for these ops, connected by hand (the import of such
models is :mod:`dcaccel.frontend.ml_domain`'s, tested in ``tests/frontend/test_ml_domain.py``); the reference
runs each case as a one-node ``ai.onnx.ml`` model.
"""

from dataclasses import dataclass, field

import dace
import numpy as np
import onnx
import pytest
from onnx import helper

from tests.expansions.canonical_onnx import IR_VERSION, assert_flat_maps

ML_OPSETS = {"Binarizer": 1, "ArrayFeatureExtractor": 1, "TreeEnsemble": 5}
"""The ``ai.onnx.ml`` version of each op's cases."""


@dataclass(frozen=True)
class MlCase:
    """One ``ai.onnx.ml`` node: its op, inputs (name -> array, in the op's input order) and attributes."""

    name: str
    op: str
    inputs: dict[str, np.ndarray]
    attributes: dict = field(default_factory=dict)

    @property
    def output(self) -> str:
        return {"Binarizer": "Y", "ArrayFeatureExtractor": "Z", "TreeEnsemble": "Y"}[self.op]


RNG = np.random.default_rng(0)
F32, F64, I64 = np.float32, np.float64, np.int64


def _data(shape, dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-9, 10, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


CASES = [
    MlCase("bin_threshold", "Binarizer", {"X": _data((3, 4), F32)}, {"threshold": 0.3}),
    MlCase("bin_default", "Binarizer", {"X": _data((7,), F64)}),
    MlCase("bin_ties", "Binarizer", {"X": np.array([-1, 0, 0.5, 0.5001, 2], F32)}, {"threshold": 0.5}),
    MlCase("afe_rows", "ArrayFeatureExtractor", {"X": _data((3, 5), F32), "Y": np.array([4, 0, 2, 2], I64)}),
    MlCase("afe_one_row", "ArrayFeatureExtractor", {"X": _data((6,), F64), "Y": np.array([5, 1], I64)}),
    MlCase("afe_rank3_int", "ArrayFeatureExtractor", {"X": _data((2, 3, 4), I64), "Y": np.array([3], I64)}),
]

FOREST = {
    "nodes_featureids": [0, 1, 1, 0, 0],
    "nodes_modes": np.array([0, 3, 1, 2, 0], np.uint8),
    "nodes_splits": np.array([0.5, -0.2, 0.3, 1.0, 0.0], F32),
    "nodes_truenodeids": [1, 1, 3, 4, 6],
    "nodes_trueleafs": [0, 1, 1, 1, 1],
    "nodes_falsenodeids": [0, 2, 3, 5, 6],
    "nodes_falseleafs": [1, 1, 0, 1, 1],
    "tree_roots": [0, 2, 4],
    "leaf_targetids": [0, 1, 2, 0, 1, 2, 1],
    "leaf_weights": np.array([1.5, -2.0, 3.25, 0.5, 4.0, -1.0, 7.0], F32),
    "n_targets": 4,
}
"""Three trees over two features: two of depth 2 (every comparison but equality), one a single leaf (its root's
branches are the same leaf; ONNX's reference reads the leaf at the root's index, 4); target 3 is no leaf's (it keeps
its start value)."""


def _forest(name, x, **changes) -> MlCase:
    return MlCase(name, "TreeEnsemble", {"X": x}, {**FOREST, **changes})


INTEGRAL = RNG.integers(-1, 3, size=(9, 2)).astype(F32)
"""Samples equal to the splits of the equality and membership cases."""

WITH_NAN = np.where(RNG.random((8, 2)) < 0.3, np.nan, RNG.standard_normal((8, 2))).astype(F32)

CASES += [
    *(
        _forest(f"forest_{name}", _data((6, 2), F32), aggregate_function=code)
        for code, name in enumerate(("average", "sum", "min", "max"))
    ),
    _forest("forest_double", _data((4, 2), F64)),
    _forest(
        "forest_equality",
        INTEGRAL,
        nodes_modes=np.array([4, 5, 1, 2, 0], np.uint8),
        nodes_splits=np.array([0.0, 1.0, 0.3, 1.0, 0.0], F32),
    ),
    _forest(
        "forest_members",
        INTEGRAL,
        nodes_modes=np.array([6, 3, 6, 2, 0], np.uint8),
        nodes_splits=np.array([np.nan, -0.2, np.nan, 1.0, 0.0], F32),
        membership_values=np.array([1.0, 2.0, np.nan, -1.0, np.nan], F32),  # the reference ends a set at a 0
    ),
    _forest("forest_missing_values", WITH_NAN, nodes_missing_value_tracks_true=[1, 0, 0, 1, 0]),
]


def _model(case: MlCase) -> onnx.ModelProto:
    attributes = {
        name: onnx.numpy_helper.from_array(value) if isinstance(value, np.ndarray) else value
        for name, value in case.attributes.items()
    }
    node = helper.make_node(case.op, list(case.inputs), [case.output], domain="ai.onnx.ml", **attributes)
    inputs = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
        for name, value in case.inputs.items()
    ]
    graph = helper.make_graph([node], case.name, inputs, [onnx.ValueInfoProto(name=case.output)])
    opsets = [helper.make_opsetid("ai.onnx.ml", ML_OPSETS[case.op]), helper.make_opsetid("", 17)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)


def _reference(case: MlCase) -> np.ndarray:
    """The output of ``case`` from onnxruntime, or from ONNX's reference for Binarizer and TreeEnsemble (onnxruntime
    has no kernel for them)."""
    import onnxruntime
    from onnx.reference import ReferenceEvaluator

    if case.op in ("Binarizer", "TreeEnsemble"):
        return ReferenceEvaluator(_model(case)).run(None, case.inputs)[0]
    session = onnxruntime.InferenceSession(_model(case).SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, case.inputs)[0]


def _expanded_sdfg(cases, name: str, shapes: dict[str, tuple]) -> dace.SDFG:
    """One SDFG holding the ``ai.onnx.ml`` node of every case (containers ``<case>_<connector>``), expanded by the
    canonical implementations; ``shapes`` gives each output's shape."""
    from dace.libraries.onnx.nodes import get_onnx_node

    from dcaccel.expansions import register

    register()
    sdfg = dace.SDFG(name)
    state = sdfg.add_state()
    for case in cases:
        node = get_onnx_node(case.op, ML_OPSETS[case.op])(case.name, **case.attributes)
        state.add_node(node)
        out_dtype = case.inputs["X"].dtype
        for connector, shape, dtype, is_input in [
            *((c, v.shape, v.dtype, True) for c, v in case.inputs.items()),
            (case.output, shapes[case.name], out_dtype, False),
        ]:
            container = f"{case.name}_{connector}"
            sdfg.add_array(container, shape, dace.typeclass(dtype.type))
            memlet = dace.Memlet.from_array(container, sdfg.arrays[container])
            if is_input:
                node.add_in_connector(connector)
                state.add_edge(state.add_read(container), None, node, connector, memlet)
            else:
                node.add_out_connector(connector)
                state.add_edge(node, connector, state.add_write(container), None, memlet)
        node.implementation = "canonical"
    sdfg.expand_library_nodes()
    return sdfg


@pytest.fixture(scope="module")
def references() -> dict[str, np.ndarray]:
    return {case.name: _reference(case) for case in CASES}


@pytest.fixture(scope="module")
def results(references):
    """Each case's output from the canonical implementations (one compile)."""
    sdfg = _expanded_sdfg(CASES, "test_ml", {name: value.shape for name, value in references.items()})
    arguments = {f"{c.name}_{connector}": value.copy() for c in CASES for connector, value in c.inputs.items()}
    outputs = {c.name: np.zeros_like(references[c.name]) for c in CASES}
    arguments.update({f"{c.name}_{c.output}": outputs[c.name] for c in CASES})
    sdfg(**arguments)
    return outputs


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results, references):
    expected = references[case.name]
    assert results[case.name].dtype == expected.dtype
    rtol = 1e-6 if case.op == "TreeEnsemble" else 0  # the reference sums the trees in X's type, dcaccel in double
    np.testing.assert_allclose(results[case.name], expected, rtol=rtol)


def test_each_op_is_one_flat_map():
    shapes = {"bin_threshold": (3, 4), "afe_rows": (3, 4), "forest_sum": (6, 4)}
    cases = [c for c in CASES if c.name in shapes]
    scopes = assert_flat_maps(_expanded_sdfg(cases, "ml_structure", shapes))
    labels = ["afe_rows_extract_map", "bin_threshold_binarizer_map", "forest_sum_tree_ensemble_map"]
    assert sorted(s.label for s in scopes) == labels


@pytest.mark.parametrize(
    "case, shape, message",
    [
        (
            MlCase("afe_matrix", "ArrayFeatureExtractor", {"X": _data((3, 5), F32), "Y": np.zeros((2, 2), I64)}),
            (3, 4),
            r"ArrayFeatureExtractor \(node 'afe_matrix'\): X \(3, 5\) with",
        ),
        (
            _forest("forest_softmax", _data((2, 2), F32), post_transform=1),
            (2, 4),
            r"TreeEnsemble \(node 'forest_softmax'\): post_transform=1",
        ),
    ],
    ids=lambda c: getattr(c, "name", ""),
)
def test_what_it_cannot_lower_is_refused_in_one_line(case, shape, message):
    from dcaccel.errors import UnsupportedOpError

    with pytest.raises(UnsupportedOpError, match=message):
        _expanded_sdfg([case], f"ml_{case.name}", {case.name: shape})
