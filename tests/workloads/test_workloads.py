"""The built-in workloads: registry, specs, weights and the exported models (no compilation)."""

from collections import Counter

import numpy as np
import onnxruntime
import pytest
import torch

from dcaccel import workloads
from dcaccel.errors import DcaccelError
from dcaccel.frontend import Origin
from dcaccel.frontend.load import resolve
from dcaccel.frontend.ops import operators
from dcaccel.workloads import (
    conv_seed,
    lenet,
    mobilenetv2_block,
    pusch_mimo,
    resnet18,
    transformer_encoder,
)

#: name -> (origin, input specs, output specs, symbols)
EXPECTED = {
    "conv-seed": (Origin.TORCH, [("input", (1, 1, 28, 28))], [("output", (1, 6, 24, 24))], {}),
    "lenet": (Origin.TORCH, [("x", (1, 1, 28, 28))], [("output", (1, 10))], {}),
    "resnet18": (Origin.TORCH, [("x", (1, 3, 224, 224))], [("output", (1, 1000))], {}),
    "mobilenetv2-block": (Origin.TORCH, [("x", (1, 32, 56, 56))], [("output", (1, 32, 56, 56))], {}),
    "transformer-encoder": (Origin.TORCH, [("x", (1, 16, 64))], [("output", (1, 16, 64))], {}),
    "mmm": (
        Origin.DACE_PROGRAM,
        [("A", ("N", "K")), ("B", ("K", "M"))],
        [("__return", ("N", "M"))],
        {"N": 8, "K": 6, "M": 4},
    ),
    "pusch-mimo": (
        Origin.DACE_PROGRAM,
        [("H", ("S", "A", 2)), ("R", ("S", "A", "A")), ("y", ("S", "A"))],
        [("__return", ("S", 2))],
        {"S": 4, "A": 8},
    ),
}

#: torch workloads: name -> module that builds the model
TORCH_MODULES = {
    "conv-seed": conv_seed,
    "lenet": lenet,
    "resnet18": resnet18,
    "mobilenetv2-block": mobilenetv2_block,
    "transformer-encoder": transformer_encoder,
}


class _Built(dict):
    """The built-in workloads by name, each built when first read."""

    def __missing__(self, name):
        self[name] = workloads.get(name)
        return self[name]


@pytest.fixture(scope="module")
def built():
    """The built-in workloads, each built once for this module (ResNet-18, seconds, by the full suite only)."""
    return _Built()


def _resnet18_slow(names) -> list:
    """``names`` as parameters, ResNet-18's (seconds to build) in the full suite only."""
    return [pytest.param(n, marks=pytest.mark.slow) if n == "resnet18" else n for n in names]


def test_names():
    assert workloads.names() == list(EXPECTED)


@pytest.mark.parametrize("name", _resnet18_slow(EXPECTED))
def test_specs(built, name):
    workload = built[name]
    origin, inputs, outputs, symbols = EXPECTED[name]
    assert workload.name == name and workload.origin is origin
    assert [(s.name, s.shape) for s in workload.inputs] == inputs
    assert [(s.name, s.shape) for s in workload.outputs] == outputs
    assert workload.symbols == symbols


@pytest.mark.parametrize("name", _resnet18_slow(TORCH_MODULES))
def test_weights_are_the_module_parameters(built, name):
    module = TORCH_MODULES[name].model()
    # as written: a BatchNormalization folded into its Conv (the default) changes the Conv's weight
    norms = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)
    batch_norms = any(isinstance(m, norms) for m in module.modules())
    workload = resolve(name, fold=False) if batch_norms else built[name]
    state = {k: v for k, v in module.state_dict().items() if not k.endswith("num_batches_tracked")}
    for key, value in state.items():
        stored = workload.weights.get(key.replace(".", "DOT"))
        if stored is None:  # a Linear weight feeding a MatMul is stored transposed (folded Transpose)
            assert any(np.array_equal(w, value.numpy().T) for w in workload.weights.values()), key
        else:
            np.testing.assert_array_equal(stored, value.numpy())
    assert workload.parameter_count == sum(v.numel() for v in state.values())


def test_weights_are_deterministic():
    first, second = lenet.model(), lenet.model()
    torch.testing.assert_close(first.state_dict(), second.state_dict())


@pytest.mark.parametrize("name", ["conv-seed", "lenet", "mobilenetv2-block", "transformer-encoder"])
def test_exported_model_matches_torch(built, name):
    workload = built[name]
    inputs = workload.random_inputs(seed=2)
    session = onnxruntime.InferenceSession(workload.onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    (result,) = session.run(None, inputs)
    with torch.no_grad():
        expected = TORCH_MODULES[name].model()(*(torch.from_numpy(v) for v in inputs.values()))
    np.testing.assert_allclose(result, expected.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("name", "ops"),
    [
        ("conv-seed", {"Conv": 1}),
        ("lenet", {"Conv": 2, "Relu": 4, "MaxPool": 2, "Reshape": 1, "Gemm": 3, "Softmax": 1}),
        pytest.param(  # BatchNormalization folded into the Convs
            "resnet18",
            {"Conv": 20, "Relu": 17, "MaxPool": 1, "Add": 8, "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1},
            marks=pytest.mark.slow,
        ),
        ("mobilenetv2-block", {"Conv": 3, "Clip": 2, "Add": 1}),  # BatchNormalization folded into the Convs
        ("mmm", {"MatMul": 1}),
    ],
)
def test_operators(built, name, ops):
    assert Counter(op.op_type for op in operators(built[name].sdfg)) == ops


def test_mobilenet_depthwise_convolution(built):
    workload = built["mobilenetv2-block"]
    groups = [node.attribute for node in workload.onnx_model.graph.node if node.op_type == "Conv"]
    assert [next((a.i for a in attributes if a.name == "group"), 1) for attributes in groups] == [1, 192, 1]


def test_transformer_encoder_operators(built):
    ops = Counter(op.op_type for op in operators(built["transformer-encoder"].sdfg))
    realistic = {"MatMul", "Add", "Mul", "Div", "Softmax", "LayerNormalization", "Erf", "Transpose", "Reshape"}
    assert set(ops) <= realistic
    assert ops["MatMul"] == 8 and ops["Softmax"] == 1 and ops["LayerNormalization"] == 2 and ops["Erf"] == 1


@pytest.mark.parametrize(
    ("options", "symbols"), [({"N": 2}, {"N": 2, "K": 6, "M": 4}), ({"K": 1, "M": 9}, {"N": 8, "K": 1, "M": 9})]
)
def test_sizes(options, symbols):
    assert workloads.get("mmm", **options).symbols == symbols


@pytest.mark.slow
@pytest.mark.parametrize("image", [32])
def test_resnet18_image_size(image):
    workload = workloads.get("resnet18", image=image, num_classes=10)
    assert workload.inputs[0].shape == (1, 3, image, image) and workload.outputs[0].shape == (1, 10)


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("mmm", {"Q": 3}, "workload 'mmm' has no size 'Q' (sizes: N, K, M)"),
        ("lenet", {"foo": 3}, "workload 'lenet' has no size 'foo' (it has no size options)"),
        ("resnet18", {"classes": 10}, "workload 'resnet18' has no size 'classes' (sizes: image, num_classes)"),
        ("mmm", {"N": -3}, "workload 'mmm': size 'N': expected a positive integer, got -3"),
        ("mmm", {"K": 0}, "workload 'mmm': size 'K': expected a positive integer, got 0"),
        ("mmm", {"M": 2.5}, "workload 'mmm': size 'M': expected a positive integer, got 2.5"),
        ("pusch-mimo", {"L": "2"}, "workload 'pusch-mimo': size 'L': expected a positive integer, got '2'"),
        (
            "transformer-encoder",
            {"heads": True},
            "workload 'transformer-encoder': size 'heads': expected a positive integer, got True",
        ),
    ],
)
def test_bad_size_options(name, options, message):
    with pytest.raises(DcaccelError) as error:
        workloads.get(name, **options)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("conv-seed", {}),
        ("mmm", {"N": 8, "K": 6, "M": 4}),
        ("pusch-mimo", {"S": 4, "A": 8, "L": 2}),
        ("resnet18", {"image": 224, "num_classes": 1000}),
        ("mobilenetv2-block", {"channels": 32, "image": 56, "expansion": 6}),
        ("transformer-encoder", {"seq": 16, "d_model": 64, "heads": 4, "ff": 128}),
    ],
)
def test_size_options(name, options):
    assert workloads.size_options(name) == options


def test_unknown_name_lists_the_names():
    with pytest.raises(DcaccelError) as error:
        workloads.get("lenet5")
    assert str(error.value) == f"unknown workload 'lenet5' (built-in workloads: {', '.join(EXPECTED)})"


@pytest.mark.slow
def test_pusch_reference_matches_numpy():
    """The program's Python function (Cholesky and substitutions) solves the MMSE system (no compile)."""
    workload = workloads.get("pusch-mimo", S=2, A=6, L=3)
    inputs = workload.random_inputs(seed=1)
    H, R, y = inputs["H"], inputs["R"], inputs["y"]
    expected = [np.linalg.solve(H[s].T @ R[s] @ H[s] + np.eye(3), H[s].T @ R[s] @ y[s]) for s in range(2)]
    np.testing.assert_allclose(workload.reference(H, R, y), np.stack(expected), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pusch_inputs_are_realistic(seed):
    """R is symmetric positive definite, and the MMSE detection recovers the ±1 symbols sent."""
    sent = pusch_mimo.transmission(np.random.default_rng(seed), subcarriers=64, antennas=8, layers=2)
    R = sent["R"]
    np.testing.assert_allclose(R, R.transpose(0, 2, 1), atol=1e-12)
    assert np.all(np.linalg.eigvalsh(R) > 0)
    detected = pusch_mimo.pusch_mimo.f(sent["H"], sent["R"], sent["y"])
    assert np.mean(np.sign(detected) == sent["x"]) > 0.9


@pytest.mark.slow
def test_pusch_random_inputs_come_from_a_transmission():
    workload = workloads.get("pusch-mimo")
    inputs = workload.random_inputs(seed=4)
    sent = pusch_mimo.transmission(np.random.default_rng(4), subcarriers=4, antennas=8, layers=2)
    for name in ("H", "R", "y"):
        np.testing.assert_array_equal(inputs[name], sent[name])
