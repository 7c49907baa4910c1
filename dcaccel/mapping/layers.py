"""The layers a mapping search maps one at a time: each matrix-product node of an ONNX model as its own
one-node workload, with the loop nest of its product.

A Conv lowers through im2col to one matrix product per group, C[n×m] = A[n×k]·B[k×m] with
n = filters per group, k = channels per group × kernel size, m = batch × output positions (A the
weights, B the im2col columns); a Gemm or a 2-D MatMul is the product itself (n rows of A, k, m
columns of B). :func:`mapped_layers` cuts every such node out of the model with its weights
(``onnx.utils.Extractor``), so each layer is lowered, realised and scheduled alone; layers of the
same op, attributes and shapes share one ``signature`` and are searched once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import onnx
import onnx.shape_inference
import onnx.utils

from dcaccel.errors import DcaccelError

#: The ONNX ops a mapping search maps (lowered through the MMM node).
MAPPED_OPS = ("Conv", "Gemm", "MatMul")


@dataclass(frozen=True)
class LoopNest:
    """The matrix product C[n×m] = A[n×k]·B[k×m] of a node, ``groups`` times (one per Conv group)."""

    n: int
    k: int
    m: int
    groups: int = 1

    @property
    def extents(self) -> dict[str, int]:
        """The extent of every loop dimension, by name."""
        return {"n": self.n, "k": self.k, "m": self.m}

    @property
    def operand_volumes(self) -> dict[str, int]:
        """Elements of each operand over all groups: A = n·k, B = k·m, C = n·m."""
        return {
            "A": self.groups * self.n * self.k,
            "B": self.groups * self.k * self.m,
            "C": self.groups * self.n * self.m,
        }


@dataclass(frozen=True)
class Layer:
    """One mapped node: its name and op, its loop nest, its one-node ONNX model and a signature."""

    node: str
    op_type: str
    nest: LoopNest
    model: onnx.ModelProto
    signature: tuple


def _shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    graph = model.graph
    shapes = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        dims = value.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value for d in dims)
    for tensor in graph.initializer:
        shapes[tensor.name] = tuple(tensor.dims)
    return shapes


def _attributes(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def loop_nest(node: onnx.NodeProto, shapes: dict[str, tuple[int, ...]]) -> LoopNest:
    """The loop nest of the Conv, Gemm or MatMul ``node`` (shapes of its inputs and output known)."""
    missing = [name for name in [*node.input[:2], node.output[0]] if name not in shapes]
    if missing:
        raise DcaccelError(f"mapping: {node.op_type} node {node.name}: no static shape for {', '.join(missing)}")
    attributes = _attributes(node)
    if node.op_type == "Conv":
        weight, output = shapes[node.input[1]], shapes[node.output[0]]
        groups = int(attributes.get("group", 1))
        return LoopNest(weight[0] // groups, math.prod(weight[1:]), output[0] * math.prod(output[2:]), groups)
    a, b = shapes[node.input[0]], shapes[node.input[1]]
    if node.op_type == "Gemm":
        rows, inner = (a[1], a[0]) if attributes.get("transA", 0) else a
        columns = b[0] if attributes.get("transB", 0) else b[1]
        return LoopNest(rows, inner, columns)
    if node.op_type == "MatMul" and len(a) == 2 and len(b) == 2:
        return LoopNest(a[0], a[1], b[1])
    raise DcaccelError(f"mapping: {node.op_type} node {node.name} is not a 2-D product the search maps")


def mapped_layers(model: onnx.ModelProto) -> list[Layer]:
    """Every Conv, Gemm and 2-D MatMul node of ``model`` as a :class:`Layer`, in graph order."""
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = _shapes(inferred)
    extractor = onnx.utils.Extractor(inferred)
    constants = {tensor.name for tensor in inferred.graph.initializer}
    layers = []
    for index, node in enumerate(inferred.graph.node):
        if node.op_type not in MAPPED_OPS:
            continue
        if node.op_type == "MatMul" and any(len(shapes.get(name, ())) != 2 for name in node.input[:2]):
            continue
        name = node.name or f"{node.op_type}_{index}"
        nest = loop_nest(node, shapes)
        inputs = [n for n in node.input if n and n not in constants]
        one = extractor.extract_model(inputs, list(node.output))
        attributes = tuple(sorted((k, str(v)) for k, v in _attributes(node).items()))
        signature = (node.op_type, attributes, tuple(shapes.get(n) for n in node.input if n))
        layers.append(Layer(name, node.op_type, nest, one, signature))
    return layers
