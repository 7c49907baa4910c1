"""The loop-nest model of whole models on described architectures: placement by support rules, every
declared memory used, MACs exact, traffic never below the compulsory, shipped designs pinned."""

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dcaccel.architecture import Architecture
from dcaccel.cost.architecture import hierarchy
from dcaccel.cost.network import network_cost
from dcaccel.errors import DcaccelError

DESIGN = """
name: tiny
element_bytes: 1
units:
  pe:
    count: 4
    macs_per_cycle: 1
    energy_per_mac_pj: 0.5
    topology: {kind: mesh, rows: 2, cols: 2, systolic: true}
    SUPPORT
  cpu: {role: host, count: 1, ops: ["*"], macs_per_cycle: 0.25}
memories:
  wreg: {level: local, unit: pe, capacity_bytes: 16, operands: [weights], read_energy_pj: 0.1, write_energy_pj: 0.1}
  acc: {level: local, unit: pe, capacity_bytes: 8, operands: [outputs], read_energy_pj: 0.1, write_energy_pj: 0.1}
  rowbuf: {level: local, unit: pe, capacity_bytes: 64, operands: [inputs], shared_along: [cols],
           bandwidth_bytes_per_cycle: 4, read_energy_pj: 0.5, write_energy_pj: 0.5}
  glb: {level: onchip, capacity_bytes: 4096, operands: [inputs, outputs], bandwidth_bytes_per_cycle: 16,
        separate_ports: true, read_energy_pj: 2, write_energy_pj: 2}
  dram: {level: offchip, bandwidth_bytes_per_cycle: 2, read_energy_pj: 100, write_energy_pj: 100}
"""


def _design(support: str = "") -> Architecture:
    return Architecture.from_yaml(DESIGN.replace("SUPPORT", support))


def _model() -> onnx.ModelProto:
    """Conv(2→4, 3×3) on 8×8, Relu, Flatten, Gemm(144→10)."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "w")
    dense = numpy_helper.from_array(rng.standard_normal((10, 144)).astype(np.float32), "d")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "d"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [weight, dense],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module")
def result():
    return network_cost(_model(), _design(), "makespan")


def test_hierarchy_reads_the_operand_fields():
    target = hierarchy(_design(), "pe")
    assert target.array == {"rows": 2, "cols": 2}
    assert [m.name for m in target.memories] == ["wreg", "acc", "rowbuf", "glb", "dram"]
    by_name = {m.name: m for m in target.memories}
    assert by_name["wreg"].operands == {"W"} and by_name["glb"].operands == {"I", "O"}
    assert by_name["rowbuf"].served == {"cols"} and by_name["glb"].served == {"rows", "cols"}
    assert by_name["glb"].shared_port is False and by_name["dram"].shared_port is True
    assert target.systolic == {"rows", "cols"}
    assert target.precision == {"W": 8, "I": 8, "O": 8, "psum": 16}
    assert [m.name for m in target.levels("W")] == ["wreg", "dram"]


@pytest.mark.slow
def test_every_layer_counts_its_real_macs(result):
    macs = dict(zip(result.layers["layer"], result.layers["macs"], strict=True))
    assert macs == {"conv": 4 * 2 * 9 * 6 * 6, "fc": 144 * 10}
    assert dict(result.uncounted)["relu"] == "Relu is not a multiply-accumulate layer"


@pytest.mark.slow
def test_every_declared_memory_carries_traffic(result):
    for _, _, cost in result.costs:
        used = {memory for (memory, _), t in cost.traffic.items() if t.read_bits + t.write_bits}
        assert used == {"wreg", "acc", "rowbuf", "glb", "dram"}


@pytest.mark.slow
def test_offchip_traffic_is_never_below_the_compulsory(result):
    sizes = {"conv": (4 * 2 * 9, 2 * 8 * 8, 4 * 6 * 6), "fc": (1440, 144, 10)}
    for (layer, _, cost), bytes_ in zip(result.costs, result.layers["offchip_bytes"], strict=True):
        assert bytes_ >= sum(sizes[layer])
        assert cost.cycles >= cost.temporal_cycles >= math.ceil(cost.macs / 4)


@pytest.mark.slow
def test_a_layer_the_support_rules_refuse_runs_on_the_host():
    refused = network_cost(_model(), _design("support: [{op: Conv, kernel_shape: [[1, 1]]}, {op: Gemm}]"))
    assert list(refused.layers["layer"]) == ["fc"]
    reason = dict(refused.uncounted)["conv"]
    assert reason.startswith("not on the accelerator") and "kernel_shape" in reason


def test_schema_refuses_what_the_model_cannot_read():
    with pytest.raises(DcaccelError, match="shared_along applies to a local memory only"):
        Architecture.from_yaml(DESIGN.replace("SUPPORT", "").replace("separate_ports: true", "shared_along: [rows]"))
    with pytest.raises(DcaccelError, match="operands"):
        Architecture.from_yaml(DESIGN.replace("SUPPORT", "").replace("operands: [weights]", "operands: [biases]"))
    with pytest.raises(DcaccelError, match="systolic applies to a mesh only"):
        Architecture.from_yaml(
            DESIGN.replace("SUPPORT", "").replace("{kind: mesh, rows: 2, cols: 2, systolic: true}", "{systolic: true}")
        )


def test_access_bytes_are_the_step_of_every_transfer():
    design = Architecture.from_yaml(
        DESIGN.replace("SUPPORT", "").replace("operands: [outputs]", "operands: [outputs], access_bytes: 3")
    )
    by_name = {m.name: m for m in hierarchy(design, "pe").memories}
    assert (by_name["acc"].read_step_bits, by_name["acc"].write_step_bits) == (24, 24)
    assert by_name["wreg"].read_step_bits is None  # no access_bytes: by the element


def test_a_host_kind_has_no_array():
    with pytest.raises(DcaccelError, match="'cpu' is not an accelerator unit kind"):
        hierarchy(_design(), "cpu")


@pytest.fixture(scope="module")
def whole():
    return network_cost(_model(), _design(), "makespan", whole=True)


@pytest.mark.slow
def test_whole_network_keeps_activations_on_chip(whole):
    rows = {row.node: row for row in whole.whole.rows}
    assert whole.whole.buffer == "glb"
    # conv's 144-byte output and relu's stay in glb: neither is written off chip nor read back
    assert rows["conv"].output_kept and rows["relu"].output_kept
    assert rows["relu"].offchip_bytes == 0 and rows["relu"].buffer_bytes == 2 * 144
    per_layer = sum(whole.layers["offchip_bytes"])
    totals = whole.whole.totals()
    assert totals["offchip_bytes"] <= per_layer - 144  # the conv's output write at least
    # never below the compulsory: the weights, the model's input and its output cross once
    assert totals["offchip_bytes"] >= 72 + 1440 + 2 * 8 * 8 + 10


@pytest.mark.slow
def test_whole_network_costs_every_operator(whole):
    rows = {row.node: row for row in whole.whole.rows}
    assert list(rows) == ["conv", "relu", "flatten", "fc"]
    assert rows["relu"].operations == 144 and rows["relu"].cycles == math.ceil(144 / 4)
    assert rows["flatten"].operations == 0 and rows["flatten"].cycles == 0  # a view: moves nothing
    assert rows["conv"].macs == 4 * 2 * 9 * 6 * 6 and rows["fc"].macs == 1440
    totals = whole.whole.totals()
    assert totals["macs"] == 4 * 2 * 9 * 6 * 6 + 1440
    # one unit kind runs everything here: no overlap, the makespan is the sum
    assert totals["cycles"] == totals["serial_cycles"] == sum(row.cycles for row in rows.values())


@pytest.mark.slow
def test_a_host_conv_costs_its_arithmetic_not_its_weights():
    """Support rules that refuse the 3×3 Conv send it (and Relu, Flatten) to the host: it costs its 2,592
    MACs and bias additions at the host's 0.25 per cycle, not its 72 weights."""
    refused = network_cost(
        _model(), _design("support: [{op: Conv, kernel_shape: [[1, 1]]}, {op: Gemm}]"), "makespan", whole=True
    )
    rows = {row.node: row for row in refused.whole.rows}
    assert (rows["conv"].unit, rows["fc"].unit) == ("cpu", "pe")
    assert rows["conv"].macs == 4 * 2 * 9 * 6 * 6
    assert rows["conv"].cycles == math.ceil(rows["conv"].operations / 0.25) >= 4 * 2592
    assert not rows["conv"].output_kept  # produced on the host: written off chip
    # host and accelerator work one after the other here (a chain): the makespan is at least the sum
    assert refused.whole.makespan >= sum(row.cycles for row in rows.values())


@pytest.mark.slow
def test_a_batchnorm_folded_at_import_is_not_an_operator():
    """Conv → BatchNormalization → Relu → Flatten → Gemm: the import folds the normalization into the Conv,
    so the whole network has no row for it and the Conv's output (the normalization's) stays on chip."""
    model = _model()
    rng = np.random.default_rng(1)
    scale, bias, mean = (numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), n) for n in "sbm")
    var = numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), "v")
    model.graph.initializer.extend([scale, bias, mean, var])
    model.graph.node[0].output[0] = "pre"
    model.graph.node.insert(1, helper.make_node("BatchNormalization", ["pre", "s", "b", "m", "v"], ["c"], name="bn"))
    result = network_cost(model, _design(), "makespan", whole=True)
    rows = {row.node: row for row in result.whole.rows}
    assert list(rows) == ["conv", "relu", "flatten", "fc"]
    assert rows["conv"].output_kept and rows["relu"].offchip_bytes == 0
