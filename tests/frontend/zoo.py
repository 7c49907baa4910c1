"""Small ONNX models in the style of the public model zoos (AlexNet, SqueezeNet, GoogLeNet), built with
``onnx.helper`` at a chosen opset.

They carry what old exporters wrote and what DaCe's importer cannot take as is: weights listed as graph
inputs as well as initializers, weights and biases computed at run time (``ConstantOfShape``,
``Shape`` → ``Gather`` → ``Unsqueeze`` → ``Concat`` → ``Reshape`` chains, ``Cast`` of ``Constant``
nodes), ``Dropout`` with the attributes or inputs of the opset, ``Identity`` nodes, ``Reshape`` with a
constant shape input, ``LRN``, ``Sum`` of branches and ``Concat`` of branches. Every builder takes the
opset (9, 11 or 13: what the zoos hold) and returns a model that passes the ONNX checker.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSETS = (9, 11, 13)
"""The opsets the zoo models are built at."""


class _Graph:
    """Nodes, initializers and inputs of a graph under construction, with opset-aware node builders."""

    def __init__(self, opset: int, seed: int):
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.weight_inputs: list[onnx.ValueInfoProto] = []
        self._count = 0

    def _name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def node(self, op: str, inputs: list[str], outputs: int = 1, **attributes) -> str | list[str]:
        """Append a node; its output name (or names, for ``outputs`` > 1)."""
        names = [self._name(f"{op.lower()}_out") for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=self._name(op), **attributes))
        return names[0] if outputs == 1 else names

    def initializer(self, array: np.ndarray, as_input: bool = False) -> str:
        """An initializer holding ``array``; also a graph input when ``as_input`` (as old exporters wrote weights)."""
        name = self._name("w")
        self.initializers.append(numpy_helper.from_array(array, name))
        if as_input:
            elem = helper.np_dtype_to_tensor_dtype(array.dtype)
            self.weight_inputs.append(helper.make_tensor_value_info(name, elem, list(array.shape)))
        return name

    def random(self, *shape: int, as_input: bool = False) -> str:
        """A float32 initializer of normal values scaled by 1/sqrt(fan-in)."""
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        values = (self.rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        return self.initializer(values, as_input)

    def constant(self, array: np.ndarray) -> str:
        """A ``Constant`` node holding ``array``."""
        name = self._name("const")
        value = numpy_helper.from_array(array, name)
        self.nodes.append(helper.make_node("Constant", [], [name], name=self._name("Constant"), value=value))
        return name

    def cast_constant(self, array: np.ndarray) -> str:
        """``array`` as a ``Constant`` of another element type, cast to float32 at run time."""
        return self.node("Cast", [self.constant(array)], to=TensorProto.FLOAT)

    def filled(self, shape: tuple[int, ...], value: float) -> str:
        """A float32 tensor of ``shape`` filled with ``value`` by ``ConstantOfShape`` of a constant shape."""
        shape_name = self.constant(np.array(shape, np.int64))
        fill = helper.make_tensor("value", TensorProto.FLOAT, [1], [value])
        return self.node("ConstantOfShape", [shape_name], value=fill)

    def unsqueeze(self, data: str, axes: list[int]) -> str:
        if self.opset >= 13:
            return self.node("Unsqueeze", [data, self.constant(np.array(axes, np.int64))])
        return self.node("Unsqueeze", [data], axes=axes)

    def reshaped_weight(self, *shape: int) -> str:
        """A weight of ``shape`` stored flat and reshaped at run time to a shape computed from another
        initializer: ``Shape`` of a tensor of ``shape[0]`` elements → ``Gather`` → ``Unsqueeze`` →
        ``Concat`` with the other dimensions → ``Reshape``."""
        flat = self.random(int(np.prod(shape)))
        leading = self.initializer(np.zeros(shape[0], np.float32))
        count = self.node("Gather", [self.node("Shape", [leading]), self.constant(np.array(0, np.int64))], axis=0)
        rest = self.constant(np.array(shape[1:], np.int64))
        target = self.node("Concat", [self.unsqueeze(count, [0]), rest], axis=0)
        return self.node("Reshape", [flat, target])

    def dropout(self, data: str, ratio: float = 0.5, mask: bool = False) -> str:
        """``Dropout`` as the opset writes it: ``ratio`` an attribute before opset 12, an input after."""
        outputs = 2 if mask else 1
        if self.opset >= 12:
            ratio_name = self.initializer(np.array(ratio, np.float32))
            result = self.node("Dropout", [data, ratio_name], outputs)
        else:
            result = self.node("Dropout", [data], outputs, ratio=ratio)
        return result[0] if mask else result

    def conv(self, data: str, weight: str, bias: str | None, **attributes) -> str:
        return self.node("Relu", [self.node("Conv", [data, weight] + ([bias] if bias else []), **attributes)])

    def lrn(self, data: str) -> str:
        return self.node("LRN", [data], size=3, alpha=1e-4, beta=0.75, bias=1.0)

    def model(self, name: str, data: onnx.ValueInfoProto, output: str, classes: int) -> onnx.ModelProto:
        """The model of the graph built so far, with input ``data`` and output ``output`` of shape (1, classes)."""
        outputs = [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, classes])]
        graph = helper.make_graph(self.nodes, name, [data, *self.weight_inputs], outputs, initializer=self.initializers)
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))
        onnx.checker.check_model(model, full_check=True)
        return model


def alexnet(opset: int) -> onnx.ModelProto:
    """AlexNet-like: two Conv+Relu+LRN+MaxPool stages, a constant-shape Reshape, two Dropout+Gemm layers,
    Softmax. Conv weights are graph inputs too; the second Conv's bias is ``ConstantOfShape``, the first
    Gemm's weight a ``Cast`` of a float64 constant. Input (1, 3, 32, 32), output (1, 10)."""
    g = _Graph(opset, seed=9)
    data = helper.make_tensor_value_info("data_0", TensorProto.FLOAT, [1, 3, 32, 32])
    x = g.conv("data_0", g.random(8, 3, 5, 5, as_input=True), g.random(8, as_input=True), strides=[2, 2], pads=[2] * 4)
    x = g.node("MaxPool", [g.lrn(x)], kernel_shape=[3, 3], strides=[2, 2])  # (1, 8, 7, 7)
    x = g.conv(x, g.random(16, 8, 3, 3, as_input=True), g.filled((16,), 0.1), pads=[1] * 4)
    x = g.node("MaxPool", [g.lrn(x)], kernel_shape=[3, 3], strides=[2, 2])  # (1, 16, 3, 3)
    x = g.node("Reshape", [x, g.initializer(np.array([1, -1], np.int64))])  # (1, 144)
    weight6 = (g.rng.standard_normal((32, 144)) / 12).astype(np.float64)
    x = g.node("Gemm", [g.dropout(x, mask=True), g.cast_constant(weight6), g.random(32)], transB=1)
    x = g.dropout(g.node("Relu", [x]))
    x = g.node("Gemm", [x, g.random(10, 32), g.random(10)], transB=1)
    return g.model("alexnet", data, g.node("Softmax", [x], axis=1), classes=10)


def squeezenet(opset: int) -> onnx.ModelProto:
    """SqueezeNet-like: Conv+Relu+MaxPool, one Fire module (squeeze 1×1, expand 1×1 and 3×3 concatenated),
    Identity, Dropout, Conv 1×1 to the classes, GlobalAveragePool, the exporters' flatten
    (``Shape`` → ``Gather`` → ``Unsqueeze`` → ``Concat`` → ``Reshape``), Softmax. The squeeze weight is
    reshaped at run time from a flat initializer. Input (1, 3, 32, 32), output (1, 10)."""
    g = _Graph(opset, seed=11)
    data = helper.make_tensor_value_info("data_0", TensorProto.FLOAT, [1, 3, 32, 32])
    x = g.conv("data_0", g.random(16, 3, 3, 3, as_input=True), g.random(16, as_input=True), strides=[2, 2])
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])  # (1, 16, 7, 7)
    squeeze = g.conv(x, g.reshaped_weight(4, 16, 1, 1), g.random(4))
    expand1 = g.conv(squeeze, g.random(8, 4, 1, 1), g.random(8))
    expand3 = g.conv(squeeze, g.random(8, 4, 3, 3), g.random(8), pads=[1] * 4)
    x = g.node("Identity", [g.node("Concat", [expand1, expand3], axis=1)])  # (1, 16, 7, 7)
    x = g.conv(g.dropout(x), g.random(10, 16, 1, 1), g.random(10))
    x = g.node("GlobalAveragePool", [x])  # (1, 10, 1, 1)
    batch = g.node("Gather", [g.node("Shape", [x]), g.constant(np.array(0, np.int64))], axis=0)
    shape = g.node("Concat", [g.unsqueeze(batch, [0]), g.constant(np.array([-1], np.int64))], axis=0)
    x = g.node("Reshape", [x, shape])
    return g.model("squeezenet", data, g.node("Softmax", [x], axis=1), classes=10)


def googlenet(opset: int) -> onnx.ModelProto:
    """GoogLeNet-like: Conv+Relu+MaxPool+LRN, one inception block (1×1; 1×1 then 3×3; MaxPool then 1×1)
    whose branches are concatenated with their ``Sum``, AveragePool, Flatten, Dropout, Gemm, Softmax.
    Branch biases are ``Cast`` of float16 constants, the Gemm bias is ``ConstantOfShape``.
    Input (1, 3, 16, 16), output (1, 10)."""
    g = _Graph(opset, seed=13)
    data = helper.make_tensor_value_info("data_0", TensorProto.FLOAT, [1, 3, 16, 16])
    x = g.conv("data_0", g.random(8, 3, 7, 7, as_input=True), g.random(8, as_input=True), strides=[2, 2], pads=[3] * 4)
    x = g.lrn(g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))  # (1, 8, 4, 4)

    def bias() -> str:
        return g.cast_constant((g.rng.standard_normal(4) / 4).astype(np.float16))

    branch1 = g.conv(x, g.random(4, 8, 1, 1, as_input=True), bias())
    branch2 = g.conv(g.conv(x, g.random(4, 8, 1, 1), bias()), g.random(4, 4, 3, 3), bias(), pads=[1] * 4)
    pooled = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1] * 4)
    branch3 = g.conv(pooled, g.random(4, 8, 1, 1), bias())
    total = g.node("Sum", [branch1, branch2, branch3])
    x = g.node("Concat", [branch1, branch2, branch3, total], axis=1)  # (1, 16, 4, 4)
    x = g.node("Flatten", [g.node("AveragePool", [x], kernel_shape=[4, 4])], axis=1)  # (1, 16)
    x = g.node("Gemm", [g.dropout(x), g.random(10, 16), g.filled((10,), 0.05)], transB=1)
    return g.model("googlenet", data, g.node("Softmax", [x], axis=1), classes=10)


@dataclass(frozen=True)
class ZooModel:
    """A zoo-style model builder and the ops of the model as DaCe imports it (no-ops removed, constants folded)."""

    name: str
    build: Callable[[int], onnx.ModelProto]
    ops: frozenset[str]


MODELS = (
    ZooModel(
        "alexnet",
        alexnet,
        frozenset({"Conv", "Relu", "LRN", "MaxPool", "Reshape", "Gemm", "Softmax"}),
    ),
    ZooModel(
        "squeezenet",
        squeezenet,
        frozenset({"Conv", "Relu", "MaxPool", "Concat", "GlobalAveragePool", "Reshape", "Softmax"}),
    ),
    ZooModel(
        "googlenet",
        googlenet,
        frozenset({"Conv", "Relu", "MaxPool", "LRN", "Sum", "Concat", "AveragePool", "Flatten", "Gemm", "Softmax"}),
    ),
)
"""The zoo-style models, with the ops each leaves after import."""
