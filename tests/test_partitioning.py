"""dcaccel.partition costs an operator kept on the host by its arithmetic (issue 24): an opaque Conv's
MACs come from its ONNX shapes, never from its weight count or a volume, so a design that loses support
for a Conv gets slower, not faster."""

from __future__ import annotations

import math

import pytest

import dcaccel
from dcaccel.architecture import Architecture, load
from dcaccel.partitioning import partition
from tests.transforms.offload_models import NPU, conv_chain


@pytest.mark.slow
def test_a_host_conv_costs_its_macs_on_the_host():
    """conv_out (7×7, stride 2: 4 channels in, 3 out, 5×5 outputs) breaks the npu's 3×3 rule and runs on
    the cpu as an opaque task: 75 outputs × 4·7·7 weights = 14,700 MACs at 1/4 MAC per cycle."""
    result = partition(dcaccel.load(conv_chain("Add", 7, 2)), Architecture.from_dict(NPU, "npu"), "greedy")
    (conv,) = [v for v in result.dag.tasks if result.dag.node(v).info.node == "conv_out"]
    info = result.dag.info(conv)
    assert (info.opaque, info.unit, info.macs, info.ops) == (True, "cpu", 14_700, 0)
    assert result.costs.run_cycles[conv] == 14_700 * 4
    assert {n.name: n.macs for n in result.nodes if n.op == "Conv"} == {"conv_in": 4 * 256 * 18, "conv_out": 14_700}


@pytest.mark.slow
def test_lenet_does_not_get_faster_when_the_design_loses_5x5_convolutions():
    """The issue's reproduction: cgra whose pe runs only 3×3 convolutions puts LeNet's two 5×5 Conv on the
    host (one element and MAC per 4 cycles): 86,400 + 153,600 MACs there, slower than on 16 PEs."""
    full = load("cgra")
    data = full.to_dict()
    pe = data["units"]["pe"]
    pe["support"] = [{"op": "Conv", "kernel_shape": [[3, 3]]}, *({"op": op} for op in pe["ops"] if op != "Conv")]
    lost = Architecture.from_dict(data, "cgra")
    offloaded, kept = (partition("lenet", arch, "greedy", choices={"Conv": "mv"}, pes=16) for arch in (full, lost))
    assert {n.name: n.target for n in kept.nodes if n.op == "Conv"} == {"conv1": "host", "conv2": "host"}
    macs = {n.name: n.macs for n in kept.nodes if n.op in ("Conv", "Gemm")}
    assert macs == {n.name: n.macs for n in offloaded.nodes if n.op in ("Conv", "Gemm")}
    assert macs == {"conv1": 86_400, "conv2": 153_600, "fc1": 30_720, "fc2": 10_080, "fc3": 840}
    # each host Conv runs at least its MACs and bias adds at 1/4 per cycle, one after the other
    assert kept.makespan >= math.ceil((86_400 + 3_456 + 153_600 + 1_024) / 0.25) > offloaded.makespan


#: Partitions that lower what the cost policy lowered: its all-offloaded program, or its chosen split.
POLICY_PES = [("greedy", 16), ("greedy", 4), ("cost", 4), ("min-region", 16)]


@pytest.fixture(scope="module")
def slow_npu():
    """The test design with an npu of 1/1,000 MAC and element per cycle (the host: 1/4): the cost policy keeps
    its regions on the host."""
    data = {**NPU, "units": {**NPU["units"], "npu": {**NPU["units"]["npu"], "macs_per_cycle": 0.001}}}
    data["units"]["npu"]["elements_per_cycle"] = 0.001
    return Architecture.from_dict(data, "npu")


@pytest.mark.slow
def test_a_program_is_lowered_once_per_set_of_host_nodes(monkeypatch, slow_npu):
    """The cost policy lowers the all-offloaded program and the one trial of the chain's one region (kept
    on the host, 168,944 against 27,424,000 cycles offloaded), and takes its chosen split from that trial
    (it used to lower it a third time); the other policies and P, and another design that offloads the same
    nodes, given the same Lowerings lower nothing more, and every partition is the one made alone."""
    import dcaccel.partitioning
    from dcaccel.partitioning import Lowerings

    lowered = []
    lower = dcaccel.partitioning.lower_partitioned
    monkeypatch.setattr(dcaccel.partitioning, "lower_partitioned", lambda *args: lowered.append(1) or lower(*args))
    workload = dcaccel.load(conv_chain("Add"))
    shared = Lowerings()
    cost = partition(workload, slow_npu, "cost", pes=16, lowerings=shared)
    assert [region.offloaded for region in cost.regions] == [False]
    assert (len(lowered), shared.lowered, len(shared.programs)) == (2, 2, 2)
    others = [partition(workload, slow_npu, policy, pes=pes, lowerings=shared) for policy, pes in POLICY_PES]
    fast_npu = Architecture.from_dict(NPU, "npu")
    others.append(partition(workload, fast_npu, "greedy", pes=16, lowerings=shared))
    assert len(lowered) == 2
    alone = [partition(workload, slow_npu, policy, pes=pes) for policy, pes in POLICY_PES]
    alone.append(partition(workload, fast_npu, "greedy", pes=16))
    assert [split.summary() for split in others] == [split.summary() for split in alone]
    assert cost.summary() == partition(workload, slow_npu, "cost", pes=16).summary()
