"""Costs of schedules on architectures, on DAGs small enough to work out by hand."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest

from dcaccel.architecture import Architecture, ArchitectureError, load
from dcaccel.cost.schedule import cost_schedule, validate_costs
from dcaccel.dag import NodeKind, TaskDAG
from dcaccel.errors import DcaccelError
from dcaccel.scheduler import schedule
from dcaccel.scheduler.schedule import ScheduleError


def describe(**changes) -> Architecture:
    """4-byte elements; one PE kind at 2 elements per cycle; DRAM 10/20 pJ per element read/written,
    16 B per cycle; an on-chip memory of 1 pJ per element whose capacity is the schedule's ``onchip``;
    3 pJ per MAC."""
    data = {
        "name": "hand",
        "element_bytes": 4,
        "clock_mhz": 100,
        "units": {"pe": {"elements_per_cycle": 2, "energy_per_mac_pj": 3, "area_mm2": 0.5}},
        "memories": {
            "glb": {"level": "onchip", "read_energy_pj": 1, "write_energy_pj": 1, "area_mm2": 2},
            "dram": {"level": "offchip", "bandwidth_bytes_per_cycle": 16, "read_energy_pj": 10, "write_energy_pj": 20},
        },
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return Architecture.from_dict(data)


def copy_dag() -> TaskDAG:
    """source → X (8) → T → Y (8): one task copying 8 elements from the input to the output buffer."""
    dag = TaskDAG("copy")
    source = dag.add_node(NodeKind.SOURCE, "source")
    x = dag.add_node(NodeKind.BUFFER, "X")
    task = dag.add_node(NodeKind.TASK, "T")
    y = dag.add_node(NodeKind.BUFFER, "Y")
    dag.add_edge(source, x, 8)
    dag.add_edge(x, task, 8)
    dag.add_edge(task, y, 8)
    return dag


@pytest.mark.parametrize(
    ("scheduler", "bandwidth", "onchip", "task_span", "makespan"),
    [
        # T runs ⌈8 / 2⌉ = 4 cycles; reading X (32 B) and writing Y (32 B) off chip take 2 cycles each.
        ("streaming", 16, 0, (0, 4), 4),
        ("list", 16, 0, (0, 4), 4),
        # at 8 B per cycle the two transfers take 4 cycles each, one after the other
        ("streaming", 8, 0, (0, 8), 8),
        ("list", 8, 0, (0, 8), 8),
        # unlimited bandwidth: the run alone
        ("streaming", None, 0, (0, 4), 4),
        ("list", None, 0, (0, 4), 4),
        # one block of 8 elements on chip: X (it moves more than Y); loading it takes 2 cycles, then T,
        # whose off-chip write of Y takes 2 of its 4 cycles
        ("list", 16, 8, (2, 6), 6),
        # P = 1 streaming: X and Y are in different blocks, each block has 8 elements on chip: X is
        # loaded (2 cycles), T runs on chip, Y is written back (2 cycles)
        ("streaming", 16, 8, (2, 6), 8),
    ],
)
def test_copy_times(scheduler, bandwidth, onchip, task_span, makespan):
    arch = describe(memories__dram__bandwidth_bytes_per_cycle=bandwidth)
    result = schedule(copy_dag(), 1, scheduler, onchip=onchip)
    costs = cost_schedule(result, arch)
    assert result.makespan == 8  # the abstract schedule is untouched
    assert (costs.timing.start[2], costs.timing.end[2]) == task_span
    assert costs.makespan_cycles == makespan
    assert costs.makespan_seconds == pytest.approx(makespan / 100e6)


@pytest.mark.parametrize(
    ("scheduler", "onchip", "accesses", "energy"),
    [
        # X read and Y written off chip: 8 × 10 + 8 × 20; 8 MACs × 3 pJ
        ("list", 0, {"glb": (0, 0), "dram": (8, 8)}, {"glb": 0, "dram": 240, "pe": 24}),
        # X loaded once (8 read off chip, 8 written on chip), read on chip by T, Y written off chip
        ("list", 8, {"glb": (8, 8), "dram": (8, 8)}, {"glb": 16, "dram": 240, "pe": 24}),
        # X loaded, Y on chip too and written back once: the same off-chip traffic, twice the on-chip
        ("streaming", 8, {"glb": (16, 16), "dram": (8, 8)}, {"glb": 32, "dram": 240, "pe": 24}),
    ],
)
def test_copy_energy(scheduler, onchip, accesses, energy):
    costs = cost_schedule(schedule(copy_dag(), 1, scheduler, onchip=onchip), describe())
    assert costs.accesses == accesses
    assert costs.energy_pj == energy
    assert costs.energy_total_pj == sum(energy.values())
    assert costs.energy_by_level == {"offchip": 240, "onchip": energy["glb"], "local": 0, "links": 0, "compute": 24}
    assert costs.compulsory_elements == 16
    assert costs.area_mm2 == 0.5 + 2
    assert costs.average_power_w == pytest.approx(costs.energy_total_pj * 1e-12 / costs.makespan_seconds)


@pytest.mark.parametrize(("scheduled", "costed", "accesses"), [(0, None, (8, 8)), (0, 0, (0, 0)), (8, None, (8, 8))])
def test_onchip_defaults_to_the_architecture(scheduled, costed, accesses):
    """The buffers on chip are those of ``costed`` elements; None: the schedule's capacity, or, when it has
    none, the architecture's (8 elements: X goes on chip)."""
    result = schedule(copy_dag(), 1, "list", onchip=scheduled)
    costs = cost_schedule(result, describe(memories__glb__capacity_bytes=32), costed)
    assert costs.accesses["glb"] == accesses


@pytest.mark.parametrize(("macs", "rate", "run"), [(None, None, 4), (None, 1, 8), (40, 4, 10), (3, 4, 4)])
def test_mac_bound(macs, rate, run):
    """max(⌈8 / 2⌉, ⌈MACs / rate⌉), MACs = the task record's macs or the in-volume 8."""
    arch = describe(units__pe__macs_per_cycle=rate, memories__dram__bandwidth_bytes_per_cycle=None)
    meta = {} if macs is None else {"macs": macs}
    assert cost_schedule(schedule(_with_meta(copy_dag(), **meta), 1), arch).run_cycles[2] == run


@pytest.mark.parametrize(
    ("meta", "run", "macs", "compute_pj"),
    [
        # ⌈(40 MACs + 8 other ops) / 4⌉ = 12 > ⌈8 / 2⌉; 48 operations at 3 pJ; the MACs column counts 40
        ({"macs": 40, "ops": 8}, 12, 40, 144),
        ({"macs": 0, "ops": 24}, 6, 0, 72),  # element-wise arithmetic takes the unit's slots too
        ({"macs": 0, "ops": 0}, 4, 0, 0),  # a copy computes nothing
        ({"elements": 8}, 4, 0, 24),  # a transfer: its elements are its unit's operations, never MACs
        ({}, 4, 8, 24),  # no counts (a DAG file): one MAC per element of the first in-edge
    ],
)
def test_arithmetic_is_what_the_unit_performs(meta, run, macs, compute_pj):
    arch = describe(units__pe__macs_per_cycle=4, memories__dram__bandwidth_bytes_per_cycle=None)
    costs = cost_schedule(schedule(_with_meta(copy_dag(), **meta), 1), arch)
    assert (costs.run_cycles[2], costs.macs, costs.energy_pj["pe"]) == (run, macs, compute_pj)


def _with_meta(dag: TaskDAG, **counts) -> TaskDAG:
    """``dag`` with ``counts`` (fields of :class:`~dcaccel.dag.task.TaskInfo`) in every task's record."""
    copy = TaskDAG(dag.name)
    for node in dag.nodes:
        info = replace(node.info, **counts) if node.kind == NodeKind.TASK else node.info
        copy.add_node(node.kind, node.label, info)
    for src, dst, volume in dag.edges:
        copy.add_edge(src, dst, volume)
    return copy


@pytest.mark.parametrize(
    ("link", "b_span", "link_energy"),
    [
        (None, (1, 5), {}),
        # 2 cycles of latency after A's first element; 16 B at 2 B per cycle: B cannot end before 3 + 8
        ({"bandwidth_bytes_per_cycle": 2, "latency_cycles": 2, "energy_per_element_pj": 0.5}, (3, 11), {"pe-pe": 2}),
    ],
)
def test_streaming_link(link, b_span, link_energy, two_task_chain):
    arch = describe(units__pe__elements_per_cycle=1, memories__dram__bandwidth_bytes_per_cycle=None)
    if link is not None:
        arch = arch.replace(links=[{"between": ["pe", "pe"], **link}])
    result = schedule(two_task_chain, 2)
    assert result.streaming_edges == [(1, 2)]
    costs = cost_schedule(result, arch)
    assert (costs.timing.start[1], costs.timing.end[1]) == (0, 4)
    assert (costs.timing.start[2], costs.timing.end[2]) == b_span
    assert {k: v for k, v in costs.energy_pj.items() if costs.component_level[k] == "links"} == link_energy


@pytest.mark.parametrize(("pes", "counts"), [(1, {"pe": 1}), (3, {"pe": 3})])
def test_utilisation(pes, counts):
    arch = describe(memories__dram__bandwidth_bytes_per_cycle=None)
    costs = cost_schedule(schedule(copy_dag(), pes, "list"), arch)
    assert costs.unit_counts == counts
    assert costs.utilisation == {"pe": 4 / (counts["pe"] * 4)}


def test_too_many_pes():
    arch = describe(units__pe__count=2)
    with pytest.raises(ArchitectureError, match="has 2 units, the schedule uses 3 PEs"):
        cost_schedule(schedule(copy_dag(), 3), arch)


def test_unsupported_op():
    arch = describe(units__pe__ops=["Conv"])
    with pytest.raises(ArchitectureError, match="no unit runs op '\\(none\\)'"):
        cost_schedule(schedule(copy_dag(), 1), arch)


def test_a_schedule_does_not_cost_itself():
    """A schedule holds its placement and timing only: an architecture is the HEFT scheduler's alone, and
    the costs are cost_schedule's."""
    result = schedule(copy_dag(), 1)
    assert "architecture" not in result.summary()
    assert cost_schedule(result, describe()).summary()["makespan_cycles"] == 4
    with pytest.raises(DcaccelError, match="the streaming scheduler does not read an architecture"):
        schedule(copy_dag(), 1, arch=describe())


def test_validator_catches_a_bandwidth_overrun():
    result = schedule(copy_dag(), 1)
    costs = cost_schedule(result, describe())
    squeezed = [t if t.direction == "read" else t._replace(start=0, end=2) for t in costs.transfers]
    broken = dataclasses.replace(costs, transfers=tuple(squeezed))
    with pytest.raises(ScheduleError, match="dram: transfers of task 2 'T' and task 2 'T' overlap above its bandwidth"):
        validate_costs(result, broken)


def test_validator_catches_a_short_run():
    result = schedule(copy_dag(), 1)
    costs = cost_schedule(result, describe(memories__dram__bandwidth_bytes_per_cycle=None))
    timing = type(costs.timing)(costs.timing.pe, costs.timing.start, [0, 0, 3, 3], [0, 0, 3, 3])
    with pytest.raises(ScheduleError, match="runs 3 cycles on hand, less than its cost 4"):
        validate_costs(result, dataclasses.replace(costs, timing=timing))


@pytest.mark.parametrize(("count", "spans"), [(None, [(0, 4), (0, 4)]), (2, [(0, 4), (0, 4)]), (1, [(0, 4), (4, 8)])])
def test_fewer_units_than_pes_take_turns(count, spans):
    """Two independent 4-element tasks on 2 PEs: with one unit, one of them waits for the other."""
    dag = TaskDAG("two")
    source = dag.add_node(NodeKind.SOURCE, "source")
    tasks = [dag.add_node(NodeKind.TASK, name) for name in "AB"]
    sink = dag.add_node(NodeKind.SINK, "sink")
    for task in tasks:
        dag.add_edge(source, task, 4)
        dag.add_edge(task, sink, 4)
    arch = Architecture.from_dict(
        {
            "name": "turns",
            "units": {"pe": {"count": count}, "spare": {"count": 1}},
            "memories": {"dram": {"level": "offchip"}},
        }
    )
    costs = cost_schedule(schedule(dag, 2, "list"), arch)
    assert sorted((costs.timing.start[v], costs.timing.end[v]) for v in tasks) == spans
    assert costs.utilisation["pe"] == 8 / ((count or 2) * spans[1][1])


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["mv", "op", "lmv"])
def test_seed_convolution_on_every_design(conv_seed, shape):
    """The extracted seed convolution (its tasks carry their op, Conv) costs on every shipped design:
    validated, the abstract description re-times nothing, Conv runs on each design's array."""
    from dcaccel.dag import extract

    dag = extract(conv_seed.lower({"Conv": shape}))
    arrays = {"abstract": "pe", "eyeriss": "pe", "tpu": "column", "cgra": "pe"}
    for scheduler in ("streaming", "list"):
        plain = schedule(dag, 16, scheduler)
        for name, unit in arrays.items():
            costs = cost_schedule(schedule(dag, 16, scheduler), name)
            assert {costs.unit_of[v] for v in dag.tasks} == {unit}
            assert costs.offchip_elements(load(name).offchip) >= costs.compulsory_elements > 0
            assert 0 < costs.utilisation[unit] <= 1
            if name == "abstract":
                assert costs.timing == plain.timing
