"""Properties of the architecture cost model on random canonical DAGs (hypothesis): a concrete design
with unlimited bandwidth and one element per cycle is the abstract model; less bandwidth never
shortens a schedule; energy is the sum of its parts; off-chip traffic is at least the compulsory one."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcaccel.architecture import Architecture, load
from dcaccel.cost.schedule import cost_schedule
from dcaccel.dag import NodeKind, TaskDAG
from dcaccel.scheduler import schedule
from tests.scheduler.conftest import canonical_dags

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CONCRETE = ("eyeriss", "tpu", "cgra")
schedulers = st.sampled_from(["streaming", "list"])
designs = st.sampled_from(CONCRETE)


def idealised(name: str) -> Architecture:
    """The design with every rate set to the abstract model's: one element per cycle at the reference
    clock, no MAC limit, unlimited bandwidth, no latency (energies, capacities, areas kept)."""
    data = load(name).to_dict()
    for unit in data["units"].values():
        unit.update(elements_per_cycle=1, macs_per_cycle=None, frequency_mhz=None)
    for memory in data["memories"].values():
        memory["bandwidth_bytes_per_cycle"] = None
    for link in data["links"]:
        link.update(bandwidth_bytes_per_cycle=None, latency_cycles=0)
    return Architecture.from_dict(data)


def _with_op(dag: TaskDAG, op: str) -> TaskDAG:
    """``dag`` with ``op`` in every task's record."""
    copy = TaskDAG(dag.name)
    for node in dag.nodes:
        copy.add_node(node.kind, node.label, replace(node.info, op=op) if node.kind == NodeKind.TASK else node.info)
    for src, dst, volume in dag.edges:
        copy.add_edge(src, dst, volume)
    return copy


@pytest.mark.slow
@SETTINGS
@given(dag=canonical_dags(), pes=st.integers(1, 6), scheduler=schedulers, name=designs, onchip=st.sampled_from([0, 8]))
def test_idealised_design_is_abstract(dag, pes, scheduler, name, onchip):
    """Conv tasks run on each design's array (at least 64 units, more than the PEs scheduled)."""
    dag = _with_op(dag, "Conv")
    plain = schedule(dag, pes, scheduler, onchip=onchip)
    costed = cost_schedule(plain, idealised(name))
    abstract = cost_schedule(plain, "abstract")
    assert costed.timing == plain.timing
    assert abstract.timing == plain.timing
    assert costed.makespan_cycles == plain.makespan


def _bandwidths(data: dict) -> list[tuple[str, ...]]:
    """Paths of every finite bandwidth of a description."""
    paths = [("memories", name) for name, m in data["memories"].items() if m["bandwidth_bytes_per_cycle"]]
    return paths + [("links", i) for i, link in enumerate(data["links"]) if link["bandwidth_bytes_per_cycle"]]


@pytest.mark.slow
@SETTINGS
@given(dag=canonical_dags(), pes=st.integers(1, 6), scheduler=schedulers, name=designs, pick=st.integers(0, 100))
def test_halving_a_bandwidth_never_shortens(dag, pes, scheduler, name, pick):
    data = load(name).to_dict()
    group, key = _bandwidths(data)[pick % len(_bandwidths(data))]
    before = cost_schedule(schedule(dag, pes, scheduler), Architecture.from_dict(data))
    data[group][key]["bandwidth_bytes_per_cycle"] /= 2
    after = cost_schedule(schedule(dag, pes, scheduler), Architecture.from_dict(data))
    assert after.makespan_cycles >= before.makespan_cycles


@pytest.mark.slow
@SETTINGS
@given(dag=canonical_dags(), pes=st.integers(1, 6), scheduler=schedulers, name=st.sampled_from(("abstract", *CONCRETE)))
def test_energy_is_the_sum_of_its_parts(dag, pes, scheduler, name):
    arch = load(name)
    costs = cost_schedule(schedule(dag, pes, scheduler), arch)
    assert costs.energy_total_pj == pytest.approx(sum(costs.energy_by_level.values()))
    assert costs.energy_total_pj == pytest.approx(sum(costs.energy_pj.values()))
    for memory, (read, written) in costs.accesses.items():
        spec = arch.memories[memory]
        assert costs.energy_pj[memory] == pytest.approx(read * spec.read_energy_pj + written * spec.write_energy_pj)
    compute = sum(
        dag.volume(dag.predecessors(v)[0], v) * arch.units[costs.unit_of[v]].energy_per_mac_pj for v in dag.tasks
    )
    assert costs.energy_by_level["compute"] == pytest.approx(compute)


def _compulsory(dag: TaskDAG) -> int:
    """Each program input read once (the pseudo source's edges), each output written once (the edges
    into the pseudo sink, or into the exit buffer)."""
    inputs = sum(volume for src, _, volume in dag.edges if src == dag.source)
    exit_node = dag.exit
    if dag.kind(exit_node) == NodeKind.TASK:
        return inputs
    return inputs + sum(dag.volume(p, exit_node) for p in dag.predecessors(exit_node))


def _through_buffers(dag: TaskDAG) -> TaskDAG:
    """``dag`` with a buffer node on every edge between two tasks."""
    copy = TaskDAG(dag.name)
    for node in dag.nodes:
        copy.add_node(node.kind, node.label, node.info)
    for src, dst, volume in dag.edges:
        if dag.kind(src) == NodeKind.TASK and dag.kind(dst) == NodeKind.TASK:
            buffer = copy.add_node(NodeKind.BUFFER, f"B{src}_{dst}")
            copy.add_edge(src, buffer, volume)
            copy.add_edge(buffer, dst, volume)
        else:
            copy.add_edge(src, dst, volume)
    return copy


@pytest.mark.slow
@SETTINGS
@given(
    dag=canonical_dags(), pes=st.integers(1, 6), scheduler=schedulers, name=designs, onchip=st.sampled_from([0, 8, 64])
)
def test_offchip_traffic_is_at_least_compulsory(dag, pes, scheduler, name, onchip):
    costs = cost_schedule(schedule(dag, pes, scheduler, onchip=onchip), name)
    arch = load(name)
    assert costs.compulsory_elements == _compulsory(dag)
    assert costs.offchip_elements(arch.offchip) >= _compulsory(dag)


@pytest.mark.slow
@SETTINGS
@given(dag=canonical_dags(), pes=st.integers(1, 6), name=designs)
def test_offchip_traffic_is_compulsory_when_everything_fits(dag, pes, name):
    """Every edge between tasks through a buffer, one list-schedule block holding every buffer on chip."""
    dag = _through_buffers(dag)
    working_set = sum(dag.volume(dag.predecessors(b)[0], b) for b in dag.buffers)
    costs = cost_schedule(schedule(dag, pes, "list", onchip=working_set), name)
    assert costs.offchip_elements(load(name).offchip) == _compulsory(dag)


@SETTINGS
@given(dag=canonical_dags(), pes=st.integers(1, 6), bandwidth=st.sampled_from([0.5, 1, 3, 8]))
def test_abstract_keeps_the_list_transfer_times(dag, pes, bandwidth):
    """The list scheduler's ``bandwidth`` option (transfer cycles between PEs) is part of the rule re-timed."""
    result = schedule(dag, pes, "list", bandwidth=bandwidth)
    assert cost_schedule(result, "abstract").timing == result.timing
