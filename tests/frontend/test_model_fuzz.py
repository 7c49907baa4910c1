"""Fuzzed ONNX models: :func:`dcaccel.load` returns a Workload or raises a one-line DcaccelError, nothing else.

Small valid models (Gemm, Conv, Relu) are built with ``onnx.helper`` and mutated by hypothesis: shapes,
attributes, element types, dropped inputs, dangling names, empty graphs. Nothing is compiled.
"""

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import dcaccel
from dcaccel.errors import DcaccelError
from dcaccel.frontend import Workload

#: Element types a mutation may give a tensor (UNDEFINED and types DaCe cannot hold included).
ELEMENT_TYPES = [
    TensorProto.UNDEFINED,
    TensorProto.FLOAT,
    TensorProto.DOUBLE,
    TensorProto.FLOAT16,
    TensorProto.INT64,
    TensorProto.INT8,
    TensorProto.BOOL,
    TensorProto.STRING,
    TensorProto.COMPLEX64,
]


def _model(nodes, inputs, outputs, initializers) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fuzzed", inputs, outputs, initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _weights(name: str, shape) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ones(shape, np.float32), name)


def gemm() -> onnx.ModelProto:
    """y = relu(x · Wᵀ + b): x 1×8, W 4×8."""
    return _model(
        [
            helper.make_node("Gemm", ["x", "W", "b"], ["h"], name="fc", transB=1),
            helper.make_node("Relu", ["h"], ["y"], name="relu"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [_weights("W", (4, 8)), _weights("b", (4,))],
    )


def conv() -> onnx.ModelProto:
    """y = conv(x, W) + b: x 1×2×6×6, W 3×2×3×3."""
    return _model(
        [helper.make_node("Conv", ["x", "W", "b"], ["y"], name="conv", kernel_shape=[3, 3], pads=[0, 0, 0, 0])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])],
        [_weights("W", (3, 2, 3, 3)), _weights("b", (3,))],
    )


def relu() -> onnx.ModelProto:
    """y = relu(x): x 2×3."""
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [],
    )


def _values(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    return [*model.graph.input, *model.graph.output]


@st.composite
def mutation(draw):
    """One change of a model, as a function that applies it in place."""
    kind = draw(
        st.sampled_from(
            ["dim", "dim_param", "rank", "dtype", "attribute", "drop_input", "dangling", "no_nodes", "weight"]
        )
    )
    index = draw(st.integers(0, 7))
    size = draw(st.integers(-2, 9))
    dtype = draw(st.sampled_from(ELEMENT_TYPES))
    name = draw(st.sampled_from(["transB", "alpha", "kernel_shape", "pads", "strides", "group", "dilations", "axis"]))
    value = draw(st.one_of(st.integers(-3, 5), st.lists(st.integers(-2, 4), max_size=5), st.floats(-2, 2)))

    def apply(model: onnx.ModelProto) -> None:
        values = _values(model)
        value_info = values[index % len(values)]
        dims = value_info.type.tensor_type.shape.dim
        node = model.graph.node[index % len(model.graph.node)] if model.graph.node else None
        if kind == "dim" and dims:
            dims[index % len(dims)].dim_value = size
        elif kind == "dim_param" and dims:
            dims[index % len(dims)].dim_param = "batch"
        elif kind == "rank":
            dims.add().dim_value = max(size, 1)
        elif kind == "dtype":
            value_info.type.tensor_type.elem_type = dtype
        elif kind == "attribute" and node is not None:
            kept = [a for a in node.attribute if a.name != name]
            del node.attribute[:]
            node.attribute.extend([*kept, helper.make_attribute(name, value)] if value != [] else kept)
        elif kind == "drop_input" and node is not None and node.input:
            del node.input[index % len(node.input)]
        elif kind == "dangling" and node is not None and node.input:
            node.input[index % len(node.input)] = "nowhere"
        elif kind == "no_nodes":
            del model.graph.node[:]
        elif kind == "weight" and model.graph.initializer:
            weight = model.graph.initializer[index % len(model.graph.initializer)]
            weight.CopyFrom(_weights(weight.name, (max(size, 1),) * (1 + index % 3)))

    return kind, apply


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    build=st.sampled_from([gemm, conv, relu]),
    mutations=st.lists(mutation(), min_size=1, max_size=3),
    batch=st.one_of(st.none(), st.integers(-1, 3)),
)
def test_mutated_model_loads_or_fails_in_one_line(build, mutations, batch):
    model = build()
    for _, apply in mutations:
        apply(model)
    symbols = None if batch is None else {"batch": batch}
    try:
        workload = dcaccel.load(model, symbols=symbols)
    except DcaccelError as error:
        assert str(error) and "\n" not in str(error)
    else:
        assert isinstance(workload, Workload)


@pytest.mark.parametrize("build", [gemm, conv, relu])
def test_unmutated_models_load(build):
    assert isinstance(dcaccel.load(build()), Workload)
