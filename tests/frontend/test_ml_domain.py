"""Models with ``ai.onnx.ml`` nodes import through dcaccel's frontend (DaCe's importer alone cannot build them:
see :mod:`dcaccel.frontend.ml_domain`), lower canonically and verify against onnxruntime."""

import numpy as np
import onnx
import pytest
from onnx import helper

from dcaccel.frontend.ml_domain import make_importable


def _feature_extractor(opsets) -> onnx.ModelProto:
    """``Z = ArrayFeatureExtractor(X, [3, 0, 3])`` on a 2 × 4 ``X``, importing ``opsets``."""
    node = helper.make_node("ArrayFeatureExtractor", ["X", "Y"], ["Z"], domain="ai.onnx.ml")
    graph = helper.make_graph(
        [node],
        "features",
        [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("Z", onnx.TensorProto.FLOAT, [2, 3])],
        [onnx.numpy_helper.from_array(np.array([3, 0, 3], np.int64), "Y")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(*opset) for opset in opsets])


def test_a_model_of_the_ml_domain_alone_imports_the_default_domain():
    model = _feature_extractor([("ai.onnx.ml", 1)])
    make_importable(model, 7)
    assert sorted((o.domain, o.version) for o in model.opset_import) == [("", 7), ("ai.onnx.ml", 1)]


def test_a_model_without_ml_nodes_is_left_alone():
    model = helper.make_model(helper.make_graph([], "empty", [], []), opset_imports=[helper.make_opsetid("", 17)])
    make_importable(model, 7)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]


@pytest.mark.slow
@pytest.mark.parametrize("opsets", [[("ai.onnx.ml", 1)], [("ai.onnx.ml", 1), ("", 17)]], ids=["ml_only", "both"])
def test_an_ml_model_lowers_canonically_and_verifies(opsets):
    from dcaccel.dag import extract
    from dcaccel.dag.metrics import opaque_work
    from dcaccel.frontend.onnx_import import from_onnx
    from dcaccel.transforms.lower import lower
    from dcaccel.verification import verify

    workload = from_onnx(_feature_extractor(opsets), name=f"features_{len(opsets)}")
    lowered = lower(workload)
    assert opaque_work(extract(lowered.sdfg))[0] == 0
    report = verify(workload, lowered)
    assert all(check.passed for check in report.outputs), report
