"""PyTorch activations through ``dcaccel.load``: what the exporter emits (opset 18) lowers canonically.

SiLU/Swish exports as ``x * Sigmoid(x)`` (two tasks), Mish as ``x * Tanh(Softplus(x))`` (three), Softplus with
``beta`` as ``Softplus(beta x) / beta``; the others as their own ONNX op. Values against onnxruntime and against
PyTorch (one compile); structure without compiling.
"""

import numpy as np
import pytest
import torch

SHAPE = (2, 4, 3)
SIZE = int(np.prod(SHAPE))

ACTIVATIONS = {
    "silu": (torch.nn.SiLU(), ["Sigmoid", "Mul"]),
    "mish": (torch.nn.Mish(), ["Softplus", "Tanh", "Mul"]),
    "hardswish": (torch.nn.Hardswish(), ["HardSwish"]),
    "hardsigmoid": (torch.nn.Hardsigmoid(), ["HardSigmoid"]),
    "softplus": (torch.nn.Softplus(), ["Softplus"]),
    "scaledsoftplus": (torch.nn.Softplus(beta=2.0), ["Mul", "Softplus", "Div"]),
    "leakyrelu": (torch.nn.LeakyReLU(0.2), ["LeakyRelu"]),
    "prelu": (torch.nn.PReLU(SHAPE[1], init=0.3), ["PRelu"]),
}
"""Each activation and the ONNX ops it is exported as, in program order."""


class Activations(torch.nn.Module):
    """Every activation of :data:`ACTIVATIONS` applied to the same input: one output each."""

    def __init__(self):
        super().__init__()
        self.activations = torch.nn.ModuleDict({name: module for name, (module, _) in ACTIVATIONS.items()})

    def forward(self, x):
        return tuple(activation(x) for activation in self.activations.values())


@pytest.fixture(scope="module")
def workload():
    import dcaccel

    return dcaccel.load(Activations().eval(), torch.zeros(SHAPE))


@pytest.fixture(scope="module")
def lowered(workload):
    return workload.lower()


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_exported_ops(name, workload):
    from dcaccel.frontend.ops import library_nodes, op_type

    ops = [op_type(node) for node, _ in library_nodes(workload.sdfg) if node.label.partition("_")[0] == name]
    assert ops == ACTIVATIONS[name][1]


def test_each_op_is_one_task_reading_and_writing_every_element_once(lowered):
    from dcaccel.dag import NodeKind, extract

    dag = extract(lowered)
    dag.validate()
    exported = [op for _, ops in ACTIVATIONS.values() for op in ops]
    assert sorted(dag.info(t).op for t in dag.tasks) == sorted(exported)
    volumes = {dag.volume(u, v) for u, v, _ in dag.edges if NodeKind.TASK in (dag.kind(u), dag.kind(v))}
    assert volumes == {SIZE}  # PReLU's slope (one per channel) is re-read for every element it scales


def test_silu_multiplies_the_input_by_its_sigmoid(lowered):
    from dcaccel.dag import NodeKind, extract

    dag = extract(lowered)
    (sigmoid,) = [t for t in dag.tasks if dag.info(t).node == "silu_Sigmoid"]
    (mul,) = [t for t in dag.tasks if dag.info(t).node == "silu_Mul"]
    (x,) = dag.predecessors(sigmoid)
    assert dag.kind(x) is NodeKind.BUFFER and dag.info(x).container == "x"
    assert sorted(dag.predecessors(mul)) == sorted([x, sigmoid])


@pytest.mark.slow
def test_lowered_activations_match_onnxruntime_and_torch(workload, lowered):
    from dcaccel.frontend.execution import run_sdfg
    from dcaccel.verification import verify

    inputs = {"x": np.linspace(-8, 8, SIZE, dtype=np.float32).reshape(SHAPE)}
    report = verify(workload, lowered, rtol=1e-5, atol=1e-6, inputs=inputs)
    assert [check.output for check in report.outputs if not check.passed] == []
    actual = run_sdfg(lowered.sdfg, workload, inputs)
    with torch.no_grad():
        expected = Activations().eval()(torch.from_numpy(inputs["x"]))
    for spec, value in zip(workload.outputs, expected, strict=True):
        np.testing.assert_allclose(actual[spec.name], value.numpy(), rtol=1e-5, atol=1e-6, err_msg=spec.name)
