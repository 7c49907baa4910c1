"""The layers a mapping search maps one at a time: each matrix-product node of an ONNX model as its own
one-node workload, with the loop nest of its product.

A Conv lowers through im2col to one matrix product per group, C[n×m] = A[n×k]·B[k×m] with
n = filters per group, k = channels per group × kernel size, m = batch × output positions (A the
weights, B the im2col columns); a Gemm or a 2-D MatMul is the product itself (n rows of A, k, m
columns of B). :func:`model_layers` cuts every node out of the model with its weights
(``onnx.utils.Extractor``), so each layer is lowered, realised and scheduled alone; layers of the
same op, attributes and shapes share one ``signature`` and are searched once. The other nodes
(element-wise, pooling, normalisation, reshapes) are layers without a loop nest: they keep the
canonical implementation and only their placement is chosen; :func:`mapped_layers` are the matrix
products.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import onnx
import onnx.shape_inference
import onnx.utils

from dcaccel.errors import DcaccelError
from dcaccel.frontend.onnx_import import readable_node_names

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
    """One node: its name and op, its loop nest (None: not a matrix product, not searched), its
    one-node ONNX model and a signature."""

    node: str
    op_type: str
    nest: LoopNest | None
    model: onnx.ModelProto
    signature: tuple

    @property
    def mapped(self) -> bool:
        """Whether the search maps the node (a matrix product with a loop nest)."""
        return self.nest is not None


def static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """The shape of every value of ``model`` whose dimensions are all known, and of every initializer."""
    graph = model.graph
    shapes = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        dims = value.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value for d in dims)
    for tensor in graph.initializer:
        shapes[tensor.name] = tuple(tensor.dims)
    return shapes


def node_attributes(node: onnx.NodeProto) -> dict:
    """The attributes of ``node`` as Python values."""
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def loop_nest(node: onnx.NodeProto, shapes: dict[str, tuple[int, ...]]) -> LoopNest:
    """The loop nest of the Conv, Gemm or MatMul ``node`` (shapes of its inputs and output known)."""
    missing = [name for name in [*node.input[:2], node.output[0]] if name not in shapes]
    if missing:
        raise DcaccelError(f"mapping: {node.op_type} node {node.name}: no static shape for {', '.join(missing)}")
    attributes = node_attributes(node)
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


def model_layers(model: onnx.ModelProto) -> list[Layer]:
    """Every computing node of ``model`` as a :class:`Layer`, in graph order, named as the model's
    program names it (:func:`~dcaccel.frontend.onnx_import.readable_node_names`: the names
    implementation choices and mapping texts refer to).

    Conv, Gemm and 2-D MatMul nodes carry their loop nest; the others (``nest`` None) carry their
    one-node model only. ``Constant`` nodes are data, not layers: their outputs count as weights, so a
    node reading one (a ``Reshape``'s shape) takes it into its one-node model."""
    inferred = readable_node_names(onnx.shape_inference.infer_shapes(model))
    shapes = static_shapes(inferred)
    extractor = onnx.utils.Extractor(inferred)
    constants = {tensor.name for tensor in inferred.graph.initializer}
    constants |= {name for node in inferred.graph.node if node.op_type == "Constant" for name in node.output}
    layers = []
    for index, node in enumerate(inferred.graph.node):
        if node.op_type == "Constant":
            continue
        products = node.op_type in MAPPED_OPS
        if node.op_type == "MatMul" and any(len(shapes.get(name, ())) != 2 for name in node.input[:2]):
            products = False
        name = node.name or f"{node.op_type}_{index}"
        nest = loop_nest(node, shapes) if products else None
        inputs = [n for n in node.input if n and n not in constants]
        one = extractor.extract_model(inputs, list(node.output))
        attributes = tuple(sorted((k, str(v)) for k, v in node_attributes(node).items()))
        signature = (node.op_type, attributes, tuple(shapes.get(n) for n in node.input if n))
        layers.append(Layer(name, node.op_type, nest, one, signature))
    return layers


def program_model(workload) -> tuple[str, onnx.ModelProto]:
    """The name and ONNX model of ``workload`` (a built-in workload's name, a model file or spec, a Workload,
    an ONNX proto), with its constants folded and inference no-ops removed as the frontend does before
    import (:mod:`dcaccel.frontend.onnx_prepare`), so that its nodes are those of the workload's program:
    an exporter's ``Shape`` → ``Gather`` → ``Concat`` chains are not layers."""
    from dcaccel.frontend import onnx_prepare as prepare

    if isinstance(workload, onnx.ModelProto):
        name, model = "model", workload
    else:
        from dcaccel.frontend.load import resolve

        workload = resolve(workload)
        model = getattr(workload, "onnx_model", None)
        if model is None:
            label = getattr(workload, "name", workload)
            raise DcaccelError(f"map {label}: the mapping search needs an ONNX or PyTorch model")
        name = workload.name
    return name, prepare.without_inference_noops(prepare.simplify(model, name), name)


def mapped_layers(model: onnx.ModelProto) -> list[Layer]:
    """The Conv, Gemm and 2-D MatMul layers of ``model`` (:func:`model_layers` with a loop nest)."""
    return [layer for layer in model_layers(model) if layer.mapped]
