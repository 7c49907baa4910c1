"""Zoo-style ONNX models (``tests/frontend/zoo.py``, opsets 9, 11 and 13) through preparation, import,
lowering, task-DAG extraction and scheduling, and one through a compiled run against onnxruntime; the
"light" model-zoo networks onnx ships as test data through import."""

import functools
import os

import numpy as np
import onnx
import onnxruntime
import pytest
from dace.libraries.onnx.converters import clean_onnx_name
from onnx import numpy_helper

import dcaccel
from dcaccel.frontend.onnx_prepare import normalize, simplify, without_inference_noops
from dcaccel.frontend.ops import nodes_by_op_type
from tests.frontend import zoo

CASES = [pytest.param(model, opset, id=f"{model.name}-{opset}") for model in zoo.MODELS for opset in zoo.OPSETS]

#: The model and opset whose whole pipeline (lowering, extraction, schedule) runs in the fast subset; the other
#: opsets and models take seconds each and run in the full suite.
FAST_PIPELINE = ("squeezenet", 11)


def _pipeline_param(model: zoo.ZooModel, *opsets: int) -> pytest.param:
    """``model`` (at ``opsets``) as a parameter, slow unless it is the fast subset's model and opset."""
    marks = [] if (model.name, *opsets) == FAST_PIPELINE else [pytest.mark.slow]
    return pytest.param(model, *opsets, marks=marks, id="-".join(map(str, (model.name, *opsets))))


#: Ops that compute nothing at inference or compute constants only: none is left after preparation.
_PREPARED_AWAY = {"Dropout", "Identity", "Constant", "ConstantOfShape", "Shape", "Gather", "Unsqueeze", "Cast"}


def _run(model: onnx.ModelProto, data: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"data_0": data})[0]


def _input_shape(model: onnx.ModelProto) -> tuple[int, ...]:
    return tuple(dim.dim_value for dim in model.graph.input[0].type.tensor_type.shape.dim)


@pytest.mark.parametrize(("model", "opset"), CASES)
def test_preparation_keeps_the_outputs(model, opset):
    """Normalizing, folding and removing the no-ops change the graph, not what it computes."""
    source = model.build(opset)
    prepared = without_inference_noops(simplify(normalize(source, model.name), model.name), model.name)
    assert {node.op_type for node in prepared.graph.node} == model.ops
    assert not {node.op_type for node in prepared.graph.node} & _PREPARED_AWAY
    assert [value.name for value in prepared.graph.input] == ["data_0"]
    data = np.random.default_rng(opset).standard_normal(_input_shape(source)).astype(np.float32)
    np.testing.assert_allclose(_run(prepared, data), _run(source, data), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(("model", "opset"), CASES)
def test_imports(model, opset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = model.build(opset)
    workload = dcaccel.load(source)
    assert set(nodes_by_op_type(workload.sdfg)) == model.ops
    assert [(spec.name, spec.shape) for spec in workload.inputs] == [("data_0", _input_shape(source))]
    assert [spec.shape for spec in workload.outputs] == [(1, 10)]
    weight_inputs = {value.name for value in source.graph.input} - {"data_0"}
    assert weight_inputs  # the zoo models list some weights as inputs, as old exporters did
    for init in source.graph.initializer:
        if init.name in weight_inputs:
            np.testing.assert_array_equal(workload.weights[clean_onnx_name(init.name)], numpy_helper.to_array(init))
    assert list(tmp_path.iterdir()) == []  # nothing left in the working directory


@functools.cache
def _pipeline(model: zoo.ZooModel, opset: int):
    """The task DAG of ``model`` at ``opset`` and its streaming schedule on 16 PEs."""
    dag = dcaccel.extract(dcaccel.load(model.build(opset)).lower())
    return dag, dcaccel.schedule(dag, 16)


@pytest.mark.parametrize(("model", "opset"), [_pipeline_param(m, opset) for m in zoo.MODELS for opset in zoo.OPSETS])
def test_lowers_extracts_and_schedules(model, opset):
    dag, schedule = _pipeline(model, opset)
    dag.validate()
    assert {dag.info(task).op for task in dag.tasks} == model.ops  # every op lowers to tasks
    assert schedule.lower_bound <= schedule.makespan <= schedule.work


@pytest.mark.parametrize("model", [_pipeline_param(m) for m in zoo.MODELS])
def test_the_opset_does_not_change_the_task_dag(model):
    """The zoo builders write the same network at every opset: the DAGs and makespans are equal."""
    figures = {
        opset: (dag.num_nodes, dag.num_edges, sum(dag.edge_volumes), schedule.makespan)
        for opset in zoo.OPSETS
        for dag, schedule in [_pipeline(model, opset)]
    }
    assert len(set(figures.values())) == 1, figures


@pytest.mark.slow
def test_lowered_googlenet_matches_onnxruntime():
    """The lowered GoogLeNet-like model at opset 9 (LRN, Sum, Concat, Cast-folded and ConstantOfShape-folded
    weights, Dropout removed), compiled and run, against onnxruntime on the model before folding."""
    workload = dcaccel.load(zoo.googlenet(9))
    report = dcaccel.verify(workload, workload.lower())
    assert report.reference == "onnxruntime"
    assert all(check.passed for check in report.outputs), report.outputs


#: The model-zoo networks onnx ships as backend test data ("light": opset 9, IR version 3, weights built by
#: ``ConstantOfShape`` at run time and listed as graph inputs), with the ops each keeps after import (a
#: BatchNormalization after a Conv is folded into it; DenseNet's follow a Concat and stay), its output shape and
#: whether it is slow: each folds tens to hundreds of MB of weights (seconds to tens of seconds), the fast subset
#: imports the smallest, SqueezeNet.
_LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
_CNN = {"Conv", "Relu", "MaxPool"}
LIGHT_MODELS = [
    ("squeezenet", _CNN | {"Concat", "GlobalAveragePool", "Softmax"}, (1, 1000, 1, 1), False),
    (
        "shufflenet",
        _CNN | {"AveragePool", "Concat", "Gemm", "Reshape", "Softmax", "Sum", "Transpose"},
        (1, 1000),
        True,
    ),
    ("inception_v1", _CNN | {"AveragePool", "Concat", "Gemm", "LRN", "Reshape", "Softmax"}, (1, 1000), True),
    (
        "inception_v2",
        _CNN | {"Add", "AveragePool", "Concat", "Gemm", "Mul", "Reshape", "Softmax"},
        (1, 1000),
        True,
    ),
    (
        "densenet121",
        _CNN | {"Add", "AveragePool", "BatchNormalization", "Concat", "GlobalAveragePool", "Mul"},
        (1, 1000, 1, 1),
        True,
    ),
    ("resnet50", _CNN | {"AveragePool", "Gemm", "Reshape", "Softmax", "Sum"}, (1, 1000), True),
    ("bvlc_alexnet", _CNN | {"Gemm", "LRN", "Reshape", "Softmax"}, (1, 1000), True),
    ("zfnet512", _CNN | {"Gemm", "LRN", "Reshape", "Softmax"}, (1, 1000), True),
    ("vgg19", _CNN | {"Gemm", "Reshape", "Softmax"}, (1, 1000), True),
]


@pytest.mark.parametrize(
    ("name", "ops", "output_shape"),
    [pytest.param(n, o, s, id=n, marks=[pytest.mark.slow] if slow else []) for n, o, s, slow in LIGHT_MODELS],
)
def test_light_model_zoo_networks_import(name, ops, output_shape, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    workload = dcaccel.load(os.path.join(_LIGHT, f"light_{name}.onnx"))
    assert set(nodes_by_op_type(workload.sdfg)) == ops
    assert [spec.shape for spec in workload.inputs] == [(1, 3, 224, 224)]
    assert [spec.shape for spec in workload.outputs] == [output_shape]
    assert list(tmp_path.iterdir()) == []
