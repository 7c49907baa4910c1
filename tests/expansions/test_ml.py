"""Canonical Binarizer and ArrayFeatureExtractor (``ai.onnx.ml``): values against onnxruntime (ONNX's reference
for Binarizer, which onnxruntime has no kernel for; one compile), over element types, thresholds, ranks (a 1-D
``X`` is one row) and repeated indices; structure (one flat map each) and rejections.

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

ML_OPSET = 1


@dataclass(frozen=True)
class MlCase:
    """One ``ai.onnx.ml`` node: its op, inputs (name -> array, in the op's input order) and attributes."""

    name: str
    op: str
    inputs: dict[str, np.ndarray]
    attributes: dict = field(default_factory=dict)

    @property
    def output(self) -> str:
        return {"Binarizer": "Y", "ArrayFeatureExtractor": "Z"}[self.op]


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


def _model(case: MlCase) -> onnx.ModelProto:
    node = helper.make_node(case.op, list(case.inputs), [case.output], domain="ai.onnx.ml", **case.attributes)
    inputs = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
        for name, value in case.inputs.items()
    ]
    graph = helper.make_graph([node], case.name, inputs, [onnx.ValueInfoProto(name=case.output)])
    opsets = [helper.make_opsetid("ai.onnx.ml", ML_OPSET), helper.make_opsetid("", 17)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)


def _reference(case: MlCase) -> np.ndarray:
    """The output of ``case`` from onnxruntime, or from ONNX's reference for Binarizer (onnxruntime has no kernel
    for it)."""
    import onnxruntime
    from onnx.reference import ReferenceEvaluator

    if case.op == "Binarizer":
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
        node = get_onnx_node(case.op, ML_OPSET)(case.name, **case.attributes)
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
    np.testing.assert_array_equal(results[case.name], expected)


def test_each_op_is_one_flat_map():
    shapes = {"bin_threshold": (3, 4), "afe_rows": (3, 4)}
    cases = [c for c in CASES if c.name in shapes]
    scopes = assert_flat_maps(_expanded_sdfg(cases, "ml_structure", shapes))
    assert sorted(s.label for s in scopes) == ["afe_rows_extract_map", "bin_threshold_binarizer_map"]


def test_indices_of_another_rank_are_refused():
    from dcaccel.errors import UnsupportedOpError

    case = MlCase("afe_matrix", "ArrayFeatureExtractor", {"X": _data((3, 5), F32), "Y": np.zeros((2, 2), I64)})
    with pytest.raises(UnsupportedOpError, match=r"ArrayFeatureExtractor \(node 'afe_matrix'\): X \(3, 5\) with"):
        _expanded_sdfg([case], "ml_refused", {case.name: (3, 4)})
