"""The Workload: random inputs, running (compiled once per SDFG), checks before compiling, lowering."""

import sys
import types
from dataclasses import replace

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper

import dcaccel
from dcaccel import workloads
from dcaccel.errors import DcaccelError, ShapeError
from dcaccel.frontend import TensorSpec
from dcaccel.frontend.execution import compiled
from dcaccel.workloads.conv_seed import model as conv_seed_model
from dcaccel.workloads.lenet import model as lenet_model


@pytest.mark.parametrize("name", ["conv-seed", "mmm", pytest.param("pusch-mimo", marks=pytest.mark.slow)])
def test_random_inputs_are_seeded(name):
    workload = workloads.get(name)
    first, again, other = workload.random_inputs(0), workload.random_inputs(0), workload.random_inputs(1)
    assert list(first) == [spec.name for spec in workload.inputs]
    for spec in workload.inputs:
        assert first[spec.name].shape == spec.concrete_shape(workload.symbols)
        assert first[spec.name].dtype == spec.dtype
        np.testing.assert_array_equal(first[spec.name], again[spec.name])
        assert not np.array_equal(first[spec.name], other[spec.name])


def test_random_inputs_follow_symbols(mmm):
    bigger = workloads.get("mmm", N=3, K=1, M=2)
    assert {k: v.shape for k, v in bigger.random_inputs().items()} == {"A": (3, 1), "B": (1, 2)}
    assert {k: v.shape for k, v in mmm.random_inputs().items()} == {"A": (8, 6), "B": (6, 4)}


def test_run_checks_shapes_before_compiling(conv_seed):
    with pytest.raises(ShapeError, match=r"^tensor 'input': expected shape \(1, 1, 28, 28\), got \(1, 1, 27, 28\)$"):
        conv_seed.run({"input": np.zeros((1, 1, 27, 28), np.float32)})


@pytest.mark.slow
def test_run_an_op_without_implementation_through_onnxruntime():
    """Hardmax has no dcaccel or DaCe implementation: the program runs it as a host task calling onnxruntime
    (dcaccel/transforms/host.py)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Hardmax", ["x"], ["y"], name="hardmax")], "g", [x], [y])
    workload = dcaccel.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    (result,) = workload.run({"x": np.array([[1, 3, 2], [0, -1, -2]], np.float32)}).values()
    np.testing.assert_array_equal(result, [[0, 1, 0], [1, 0, 0]])


def test_lower_delegates_to_transforms(monkeypatch, mmm):
    calls = []
    fake = types.ModuleType("dcaccel.transforms.lower")
    fake.lower = lambda workload, choices: calls.append((workload, choices)) or "lowered"
    monkeypatch.setitem(sys.modules, "dcaccel.transforms.lower", fake)
    assert mmm.lower({"MatMul": "lmv"}) == "lowered"
    assert calls == [(mmm, {"MatMul": "lmv"})]


def test_unsupported_element_type():
    x = helper.make_tensor_value_info("x", TensorProto.STRING, [2])
    y = helper.make_tensor_value_info("y", TensorProto.STRING, [2])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="id")], "g", [x], [y])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(DcaccelError, match=r"^tensor 'x': element type STRING is not supported$"):
        dcaccel.load(proto)


def test_no_random_inputs_of_complex_type(mmm):
    complex_inputs = replace(mmm, inputs=[TensorSpec("A", (2,), np.complex64)])
    with pytest.raises(DcaccelError, match=r"^cannot draw random inputs of type complex64$"):
        complex_inputs.random_inputs()


def test_parameter_count(lenet):
    assert lenet.parameter_count == sum(p.numel() for p in lenet_model().parameters())


@pytest.mark.slow
def test_run_matches_torch_and_compiles_once(conv_seed, rng):
    batch = rng.standard_normal((3, 1, 28, 28)).astype(np.float32)
    view = batch[1:2]  # a view: DaCe refuses those as arguments unless copied
    outputs = conv_seed.run({"input": view})
    program = compiled(conv_seed.sdfg)
    again = conv_seed.run({"input": batch[2:3]})
    assert compiled(conv_seed.sdfg) is program
    with torch.no_grad():
        expected = conv_seed_model()(torch.from_numpy(batch)).numpy()
    np.testing.assert_allclose(outputs["output"], expected[1:2], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(again["output"], expected[2:3], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("configured", "environment", "expected"),
    [
        (".dacecache", None, "CACHE/dcaccel/dacecache"),  # DaCe's default: the user's cache instead
        ("/chosen", None, "/chosen"),  # chosen in DaCe's configuration: kept
        (".dacecache", "/from-env", ".dacecache"),  # chosen through the environment: kept
    ],
)
def test_builds_leave_the_working_directory_alone(monkeypatch, tmp_path, configured, environment, expected):
    import dace

    from dcaccel.frontend import execution

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    if environment is None:
        monkeypatch.delenv("DACE_default_build_folder", raising=False)
    else:
        monkeypatch.setenv("DACE_default_build_folder", environment)
    previous = dace.Config.get("default_build_folder")
    dace.Config.set("default_build_folder", value=configured)
    try:
        execution._use_cache_build_folder()
        assert dace.Config.get("default_build_folder") == expected.replace("CACHE", str(tmp_path))
    finally:
        dace.Config.set("default_build_folder", value=previous)
