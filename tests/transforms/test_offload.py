"""Partitioning between an accelerator and its host (dcaccel.transforms.offload, dcaccel.dag.placement,
dcaccel.partitioning): annotation of the imported graph, regions, policies, the placed DAG with transfer
tasks, its schedule, and that under ``abstract`` nothing changes."""

from __future__ import annotations

import warnings

import pytest

import dcaccel
from dcaccel.architecture import Architecture, names
from dcaccel.architecture.links import TRANSFER
from dcaccel.architecture.support import annotate
from dcaccel.dag import extract
from dcaccel.dag.taskdag import NodeKind
from dcaccel.errors import DcaccelError
from dcaccel.partitioning import partition
from dcaccel.transforms.offload import op_instances, regions_of
from tests.transforms.offload_models import NPU, conv_chain

NPU_ARCH = Architecture.from_dict(NPU, "npu")


def _design(**cpu) -> Architecture:
    """The test design with the host's rates replaced."""
    units = {**NPU["units"], "cpu": {**NPU["units"]["cpu"], **cpu}}
    return Architecture.from_dict({**NPU, "units": units}, "npu")


@pytest.fixture(scope="module")
def resize_chain():
    return dcaccel.load(conv_chain("Resize"))


@pytest.fixture(scope="module")
def greedy(resize_chain):
    return partition(resize_chain, NPU_ARCH, "greedy")


@pytest.mark.parametrize(
    ("middle", "kernel", "stride", "host"),
    [
        # an unsupported op in the middle splits the convolutions into two regions
        ("Resize", 3, 1, {"middle": "unsupported op Resize"}),
        ("TopK", 3, 1, {"middle": "unsupported op TopK"}),
        # a 7x7 stride-2 conv violates the 3x3 rule and breaks the Conv+Relu pattern of its Relu
        (
            "Add",
            7,
            2,
            {
                "conv_out": "constraint violated (npu: kernel_shape 7x7 not in 3x3)",
                "relu_out": "constraint violated (npu: pattern Conv+Relu broken by conv_out "
                "(kernel_shape 7x7 not in 3x3))",
            },
        ),
    ],
)
def test_annotation_of_imported_models(middle, kernel, stride, host):
    workload = dcaccel.load(conv_chain(middle, kernel, stride))
    instances = op_instances(workload)
    annotations = annotate(NPU_ARCH.units, instances)
    assert {name: a.reason for name, a in annotations.items() if not a.offloaded} == host
    assert all(a.target == "cpu" for a in annotations.values() if not a.offloaded)
    offloaded = {name for name, a in annotations.items() if a.offloaded}
    expected_regions = [["conv_in", "relu_in", "middle"]] if middle == "Add" else [["conv_in", "relu_in"]]
    if middle != "Add":
        expected_regions.append(["conv_out", "relu_out"])
    assert regions_of(instances, offloaded) == expected_regions


def test_instances_read_the_graph():
    (conv_in, relu_in, middle, conv_out, relu_out) = op_instances(dcaccel.load(conv_chain("Add", 7, 2)))
    assert (conv_in.attributes["kernel_shape"], conv_out.attributes["kernel_shape"]) == ((3, 3), (7, 7))
    assert conv_out.attributes["strides"] == (2, 2)
    assert (relu_in.producers, middle.producers, relu_out.producers) == (("conv_in",), ("relu_in",), ("conv_out",))
    assert conv_in.dtypes == ("float32",)
    assert conv_in.max_elements == 1 * 4 * 16 * 16  # its output; the input 2x16x16 and weight 72 are smaller


@pytest.mark.slow
def test_an_op_dace_cannot_expand_runs_on_the_host_through_onnxruntime_and_verifies():
    """The issue's TopK in the middle: the NPU does not run it, DaCe has no TopK expansion, so the host runs it
    as a host task calling onnxruntime (dcaccel/transforms/host.py); the partitioned program verifies."""
    from dcaccel.transforms.host import HOST_IMPLEMENTATION

    workload = dcaccel.load(conv_chain("TopK"))
    result = partition(workload, NPU_ARCH)
    (middle,) = [placement for placement in result.nodes if placement.name == "middle"]
    assert (middle.target, middle.offloaded, middle.reason) == ("cpu", False, "unsupported op TopK")
    assert middle.implementation == HOST_IMPLEMENTATION
    report = dcaccel.verify(workload, result.lowered)
    assert report.passed, report.outputs


def test_greedy_partition_is_scheduled_with_host_and_transfer_tasks(greedy):
    dag = greedy.dag
    units = {dag.node(v).info.node: dag.node(v).info.unit for v in dag.tasks if dag.node(v).info.node is not None}
    assert units == {"conv_in": "npu", "relu_in": "npu", "middle": "cpu", "conv_out": "npu", "relu_out": "npu"}
    host_tasks = [v for v in dag.tasks if dag.node(v).info.unit == "cpu"]
    assert [dag.node(v).info.opaque for v in host_tasks] == [True]  # Resize: DaCe's expansion, one task
    transfers = [dag.info(v) for v in greedy.transfer_tasks]
    # relu_in's 1x4x16x16 output goes to the host; Resize's 1x4x32x32 output comes back once, into a
    # landing buffer that conv_out's im2col re-reads (9 times per element minus the borders: 32,400)
    assert [(info.transfer, info.elements, info.unit) for info in transfers] == [
        ("to-host", 1024, "cpu_npu_link"),
        ("to-accelerator", 4096, "cpu_npu_link"),
    ]
    assert greedy.transfer_volume == 5120
    costs = greedy.costs
    placed_on = {costs.unit_of[v] for v in greedy.transfer_tasks}
    assert placed_on == {"cpu_npu_link"}
    assert all(costs.unit_of[v] == "cpu" for v in host_tasks)
    # the link moves one element per cycle (4 B/cycle, 4 B elements) and costs 5 pJ per element
    assert [costs.run_cycles[v] for v in greedy.transfer_tasks] == [1024, 4096]
    assert greedy.energy_split_pj["link"] == pytest.approx(5 * 5120)
    assert sum(greedy.energy_split_pj.values()) == pytest.approx(greedy.energy_pj)
    assert 0 < greedy.offloaded_work_share < 1
    summary = greedy.summary()
    assert summary["offloaded_regions"] == 2 and summary["transfer_volume"] == 5120
    assert summary["makespan"] == costs.makespan_cycles > sum([1024, 4096])


@pytest.mark.parametrize(
    ("policy", "options", "cpu", "on_host"),
    [
        ("greedy", {}, {}, {"middle"}),
        ("min-region", {}, {}, {"middle"}),  # both regions have 2 nodes and > 5% of the work
        ("min-region", {"min_nodes": 3}, {}, {"conv_in", "relu_in", "middle", "conv_out", "relu_out"}),
        ("min-region", {"min_work_share": 0.5}, {}, {"conv_in", "relu_in", "middle"}),
        ("cost", {}, {}, {"middle"}),  # the host at 1/4 MAC per cycle is slower than offloading
        (
            "cost",
            {},
            {"elements_per_cycle": 64, "macs_per_cycle": 64},
            {"conv_in", "relu_in", "middle", "conv_out", "relu_out"},
        ),
    ],
)
def test_policies(resize_chain, policy, options, cpu, on_host):
    result = partition(resize_chain, _design(**cpu), policy, **options)
    assert {n.name for n in result.nodes if not n.offloaded} == on_host
    kept = [n for n in result.nodes if not n.offloaded and n.name != "middle"]
    prefix = "region too small" if policy == "min-region" else "region cheaper on the host"
    assert all(n.reason.startswith(prefix) and n.target == "cpu" for n in kept)
    assert sum(r.offloaded for r in result.regions) == len({n.region for n in result.nodes if n.offloaded})
    if on_host == {n.name for n in result.nodes}:
        assert result.transfer_volume == 0 and result.offloaded_work_share == 0


@pytest.mark.slow
def test_cost_policy_is_not_worse_than_greedy(resize_chain):
    fast = _design(elements_per_cycle=64, macs_per_cycle=64)
    assert partition(resize_chain, fast, "cost").makespan < partition(resize_chain, fast, "greedy").makespan


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"policy": "all"}, "unknown partition policy 'all' \\(choose from greedy, min-region, cost\\)"),
        ({"min_work_share": 1.5}, "min_work_share must be between 0 and 1, got 1.5"),
        ({"objective": "area"}, "unknown partition objective 'area' \\(choose from makespan, energy, edp\\)"),
    ],
)
def test_bad_options(resize_chain, options, message):
    with pytest.raises(DcaccelError, match=message):
        partition(resize_chain, NPU_ARCH, **options)


@pytest.mark.parametrize(
    ("objective", "unit"),
    [
        ("makespan", "cycles"),
        pytest.param("energy", "pJ", marks=pytest.mark.slow),  # two partitions of seconds each per case
        pytest.param("edp", "pJ·cycles", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize(
    "cpu", [{}, pytest.param({"elements_per_cycle": 64, "macs_per_cycle": 64}, marks=pytest.mark.slow)]
)
def test_cost_objective_is_not_worse_than_greedy(resize_chain, objective, unit, cpu):
    """The cost policy starts from greedy and keeps a region on the host only when its objective drops."""

    def value(result):
        costs = result.costs
        return {
            "makespan": costs.makespan_cycles,
            "energy": costs.energy_total_pj,
            "edp": costs.makespan_cycles * costs.energy_total_pj,
        }[objective]

    design = _design(**cpu)
    cost = partition(resize_chain, design, "cost", objective=objective)
    greedy = partition(resize_chain, design, "greedy")
    assert value(cost) <= value(greedy) and cost.summary()["objective"] == objective
    kept = [r for r in cost.regions if not r.offloaded]
    assert all(
        r.reason.startswith("region cheaper on the host") and r.reason.endswith(f" {unit} offloaded)") for r in kept
    )
    assert (value(cost) < value(greedy)) == bool(kept)


@pytest.mark.parametrize("policy", ["min-region", "cost"])
def test_design_without_host_keeps_every_region_offloaded(policy):
    """conv-seed is one region of one Conv (below min_nodes = 2): abstract has no host to keep it on."""
    result = partition("conv-seed", "abstract", policy)
    assert all(n.offloaded for n in result.nodes) and result.transfer_tasks == []


@pytest.mark.slow
def test_three_policies_three_splits_on_transformer_encoder():
    """docs/partitioning.md's table: on cgra, greedy offloads the 7 regions, min-region keeps the two small
    attention regions on the host, cost judged by energy keeps all 7 there (each is cheaper in pJ on the
    host: its opaque task does not count the canonical program's off-chip re-reads)."""
    splits = {
        (policy, objective): partition("transformer-encoder", "cgra", policy, objective=objective)
        for policy, objective in [("greedy", "makespan"), ("min-region", "makespan"), ("cost", "energy")]
    }
    offloaded = {key: sum(r.offloaded for r in result.regions) for key, result in splits.items()}
    assert offloaded == {("greedy", "makespan"): 7, ("min-region", "makespan"): 5, ("cost", "energy"): 0}
    host_sets = {frozenset(n.name for n in result.nodes if not n.offloaded) for result in splits.values()}
    assert len(host_sets) == 3
    greedy, cost = splits["greedy", "makespan"], splits["cost", "energy"]
    assert cost.energy_pj < splits["min-region", "makespan"].energy_pj < greedy.energy_pj
    assert cost.makespan > greedy.makespan


def test_design_without_host_or_link(resize_chain):
    no_host = {**NPU, "units": {"npu": NPU["units"]["npu"]}, "links": []}
    with pytest.raises(DcaccelError, match="architecture npu has no host .* Resize node 'middle'"):
        partition(resize_chain, Architecture.from_dict(no_host, "npu"))
    with pytest.raises(DcaccelError, match="no link between host cpu and npu"):
        partition(resize_chain, Architecture.from_dict({**NPU, "links": []}, "npu"))


@pytest.mark.slow
def test_abstract_changes_nothing():
    """Under abstract every operator is offloaded and the DAG is the plain pipeline's, edge for edge."""
    workload = dcaccel.workloads.get("lenet")
    result = partition(workload, "abstract")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = extract(workload.lower())
    assert all(n.offloaded and n.target == "pe" for n in result.nodes)
    assert result.transfer_tasks == [] and result.offloaded_work_share == 1.0
    assert result.dag.edges == plain.edges
    assert [(n.kind, n.label) for n in result.dag.nodes] == [(n.kind, n.label) for n in plain.nodes]
    assert {result.dag.node(v).info.unit for v in result.dag.tasks} == {"pe"}


@pytest.mark.parametrize("arch", names())
@pytest.mark.parametrize("workload", ["conv-seed", pytest.param("lenet", marks=pytest.mark.slow)])
def test_builtin_workloads_on_shipped_designs(workload, arch):
    result = partition(workload, arch)
    on_host = {n.name: n.reason for n in result.nodes if not n.offloaded}
    if arch == "cgra" and workload == "lenet":
        assert on_host == {"Reshape_0": "unsupported op Reshape", "Softmax_0": "unsupported op Softmax"}
        assert result.transfer_volume == 256 + 256 + 10  # MaxPool_1 -> Reshape -> fc1, fc3 -> Softmax
    else:
        assert on_host == {}
        assert result.transfer_volume == 0
    dag = result.dag
    assert all(dag.node(v).info.unit in result.costed.units for v in dag.tasks)
    assert all(result.costs.unit_of[v] == dag.node(v).info.unit for v in dag.tasks)
    assert result.makespan > 0 and result.energy_pj > 0


@pytest.mark.slow
def test_partitioned_program_matches_onnxruntime(resize_chain, greedy):
    """One compile: the host's Resize on DaCe's expansion between canonical convolutions."""
    report = dcaccel.verify(resize_chain, greedy.lowered)
    assert report.reference == "onnxruntime" and report.passed
    assert greedy.lowered.opaque == {"middle": "Resize"}
    assert any(n.kind == NodeKind.TASK and n.info.op == TRANSFER for n in greedy.dag.nodes)
