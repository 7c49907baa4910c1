"""Small ONNX models and a design for the partitioning tests: an accelerator ``npu`` that runs 3×3
stride-1 convolutions (and Relu fused after one), a host ``cpu``, and a link between them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: The test design: 4 npu units (Conv 3x3 stride 1, Relu only in Conv+Relu, Add), a host at 1/4 element
#: (and MAC) per cycle, a 4 B/cycle link (one element per cycle) at 5 pJ per element.
NPU = {
    "name": "npu",
    "element_bytes": 4,
    "units": {
        "npu": {
            "count": 4,
            "ops": ["Conv", "Relu", "Add"],
            "support": [{"op": "Conv", "kernel_shape": [[3, 3]], "strides": [[1, 1]]}, {"op": "Add"}],
            "patterns": ["Conv+Relu"],
            "energy_per_mac_pj": 1,
        },
        "cpu": {
            "role": "host",
            "count": 1,
            "ops": ["*"],
            "elements_per_cycle": 0.25,
            "macs_per_cycle": 0.25,
            "energy_per_mac_pj": 70,
        },
    },
    "memories": {"dram": {"level": "offchip", "read_energy_pj": 100, "write_energy_pj": 100}},
    "links": [{"between": ["cpu", "npu"], "bandwidth_bytes_per_cycle": 4, "energy_per_element_pj": 5}],
}


def conv_chain(middle: str, kernel: int = 3, stride: int = 1) -> onnx.ModelProto:
    """x[1,2,16,16] -> Conv 3x3 (pad 1) -> Relu -> MIDDLE -> Conv kernel×kernel/stride -> Relu -> y.

    MIDDLE is ``Resize`` (nearest, ×2), ``TopK`` (k = 16 on the last axis: a permutation of each row)
    or ``Add`` (b + b).
    """
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((3, 4, kernel, kernel)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="conv_in", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["b"], name="relu_in"),
    ]
    size = 16
    if middle == "Resize":
        inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales"))
        nodes.append(helper.make_node("Resize", ["b", "", "scales"], ["c"], name="middle", mode="nearest"))
        size = 32
    elif middle == "TopK":
        inits.append(numpy_helper.from_array(np.array([16], dtype=np.int64), "k"))
        nodes.append(helper.make_node("TopK", ["b", "k"], ["c", "indices"], name="middle", axis=3))
    else:
        nodes.append(helper.make_node(middle, ["b", "b"], ["c"], name="middle"))
    nodes += [
        helper.make_node("Conv", ["c", "w2"], ["d"], name="conv_out", kernel_shape=[kernel] * 2, strides=[stride] * 2),
        helper.make_node("Relu", ["d"], ["y"], name="relu_out"),
    ]
    out = (size - kernel) // stride + 1
    graph = helper.make_graph(
        nodes,
        f"chain_{middle.lower()}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, out, out])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    return model
