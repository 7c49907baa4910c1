"""Import of PyTorch modules: specs, weights and the exported ONNX model (no compilation)."""

import numpy as np
import onnxruntime
import pytest
import torch
from torch import nn

import dcaccel
from dcaccel.errors import DcaccelError
from dcaccel.frontend import Origin


class TwoOutputs(nn.Module):
    """A module with two inputs and two outputs."""

    def forward(self, a, b):
        return a + b, a * b


def _seeded(build):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return build()


@pytest.mark.parametrize(
    ("build", "input_shape", "output_shape"),
    [
        (lambda: nn.Conv2d(1, 6, 5), (1, 1, 28, 28), (1, 6, 24, 24)),
        (lambda: nn.Conv2d(3, 2, 1), (2, 3, 4, 4), (2, 2, 4, 4)),
        (lambda: nn.Conv2d(1, 1, 3), (1, 1, 3, 3), (1, 1, 1, 1)),
        (lambda: nn.Linear(7, 5), (3, 7), (3, 5)),
        (lambda: nn.Linear(1, 1), (1, 1), (1, 1)),
    ],
)
def test_module_specs_and_weights(build, input_shape, output_shape):
    module = _seeded(build)
    workload = dcaccel.load(module, torch.zeros(input_shape), name="m")
    assert workload.origin is Origin.TORCH
    assert [(s.name, s.shape, s.dtype) for s in workload.inputs] == [("input", input_shape, np.float32)]
    assert [(s.name, s.shape) for s in workload.outputs] == [("output", output_shape)]
    for name, parameter in module.named_parameters():
        np.testing.assert_array_equal(workload.weights[name.replace(".", "DOT")], parameter.detach().numpy())
    assert workload.parameter_count == sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("shape", [(2, 3), (1, 1), (4, 1, 5)])
def test_exported_model_matches_torch(shape, rng):
    module = _seeded(lambda: nn.Sequential(nn.Linear(shape[-1], 4), nn.ReLU(), nn.Softmax(dim=-1)))
    workload = dcaccel.load(module, torch.zeros(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    session = onnxruntime.InferenceSession(workload.onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    (result,) = session.run(["output"], {"input": x})
    np.testing.assert_allclose(result, module(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "example_inputs",
    [
        (torch.ones(2, 3), torch.ones(2, 3)),
        [np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)],
        {"b": torch.ones(2, 3), "a": torch.ones(2, 3)},
    ],
)
def test_inputs_by_position_or_name(example_inputs):
    workload = dcaccel.load(TwoOutputs(), example_inputs)
    assert [s.name for s in workload.inputs] == ["a", "b"]
    assert [s.name for s in workload.outputs] == ["output_0", "output_1"]
    assert [s.container for s in workload.outputs] == ["__return_0", "__return_1"]


def test_training_mode_is_restored():
    module = nn.Sequential(nn.Conv2d(2, 2, 1), nn.BatchNorm2d(2)).train()
    workload = dcaccel.load(module, torch.zeros(1, 2, 3, 3))
    assert module.training
    assert "BatchNormalization" in [node.op_type for node in workload.onnx_model.graph.node]


@pytest.mark.parametrize(
    ("example_inputs", "message"),
    [
        (None, "torch model 'Linear' needs example inputs"),
        (torch.zeros(2, 4), "torch model 'Linear' fails on the example inputs input(2, 4)"),
        ((torch.zeros(2, 3), torch.zeros(2, 3)), "2 example inputs for Linear.forward"),
        ({"x": torch.zeros(2, 3)}, "example inputs ['x'] are not parameters of Linear.forward"),
    ],
)
def test_bad_example_inputs(example_inputs, message):
    with pytest.raises(DcaccelError) as error:
        dcaccel.load(nn.Linear(3, 2), example_inputs)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)
