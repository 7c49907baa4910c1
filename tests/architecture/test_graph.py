"""The component graph, the topology helpers and the queries the cost model reads."""

from __future__ import annotations

import pytest

from dcaccel.architecture import Architecture, ArchitectureError, all_to_all, bus, load, mesh_2d


@pytest.mark.parametrize(("count", "edges"), [(1, 0), (2, 1), (5, 10)])
def test_all_to_all(count, edges):
    graph = all_to_all(count)
    assert (graph.number_of_nodes(), graph.number_of_edges()) == (count, edges)


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (1, 4), (12, 14)])
def test_mesh(rows, cols):
    graph = mesh_2d(rows, cols)
    assert sorted(graph.nodes) == list(range(rows * cols))
    assert graph.number_of_edges() == rows * (cols - 1) + cols * (rows - 1)
    if cols > 1:
        assert graph.has_edge(0, 1)
    if rows > 1:
        assert graph.has_edge(0, cols) and not graph.has_edge(cols - 1, cols)


@pytest.mark.parametrize("count", [1, 3, 8])
def test_bus(count):
    graph = bus(count)
    assert graph.degree("bus") == count
    assert all(graph.degree(unit) == 1 for unit in range(count))


def test_component_graph():
    graph = load("eyeriss").graph
    assert {name: data["kind"] for name, data in graph.nodes(data=True)} == {
        "pe": "unit",
        "spad": "memory",
        "glb": "memory",
        "dram": "memory",
    }
    assert sorted(tuple(sorted(edge)) for edge in graph.edges()) == [("dram", "glb"), ("glb", "pe"), ("pe", "pe")]


def test_instance_graph():
    eyeriss = load("eyeriss")
    assert eyeriss.instance_graph("pe").number_of_nodes() == 168
    abstract = load("abstract")
    assert abstract.instance_graph("pe", 5).number_of_edges() == 10
    with pytest.raises(ArchitectureError, match="has no count"):
        abstract.instance_graph("pe")


@pytest.mark.parametrize(
    ("op", "unit"), [("Conv", "pe"), ("MatMul", "pe"), ("Softmax", "host"), (None, "host"), ("Relu", "pe")]
)
def test_unit_for(op, unit):
    assert load("cgra").unit_for(op) == unit


def test_unit_for_unsupported():
    arch = Architecture.from_dict(
        {"name": "x", "units": {"mxu": {"ops": ["Gemm"]}}, "memories": {"d": {"level": "offchip"}}}
    )
    with pytest.raises(ArchitectureError, match="no unit runs op 'Conv'"):
        arch.unit_for("Conv")


@pytest.mark.parametrize(("frequency", "throughput", "macs"), [(None, 2.0, 8.0), (500, 1.0, 4.0), (2000, 4.0, 16.0)])
def test_rates_in_reference_cycles(frequency, throughput, macs):
    arch = Architecture.from_dict(
        {
            "name": "x",
            "clock_mhz": 1000,
            "units": {"pe": {"elements_per_cycle": 2, "macs_per_cycle": 8, "frequency_mhz": frequency}},
            "memories": {"d": {"level": "offchip"}},
        }
    )
    assert arch.throughput("pe") == throughput
    assert arch.mac_rate("pe") == macs


def test_link_lookup_is_symmetric():
    arch = load("eyeriss")
    assert arch.link("glb", "pe") is arch.link("pe", "glb")
    assert arch.link("pe", "dram") is None
    assert arch.local("pe") == "spad"


def _design(units: dict) -> Architecture:
    return Architecture.from_dict({"name": "d", "units": units, "memories": {"dram": {"level": "offchip"}}})


@pytest.mark.parametrize(
    ("units", "pes", "counts", "accelerator"),
    [
        ({"pe": {"count": 16}, "host": {"count": 1, "role": "host"}}, 4, {"pe": 16, "host": 1}, 16),  # simba-like
        ({"pe": {}, "host": {"count": 1, "role": "host"}}, 8, {"pe": 8, "host": 1}, 8),
        ({"column": {"count": 256, "ops": ["Conv"]}, "vector": {"count": 1}}, 4, {"column": 256, "vector": 1}, 257),
        ({"host": {"count": 2, "role": "host"}}, 4, {"host": 2}, 0),
    ],
)
def test_accelerator_units_leave_the_host_out(units, pes, counts, accelerator):
    """A homogeneous schedule's PEs run on accelerator units: the host does not count (cgra has 64)."""
    arch = _design(units)
    assert arch.unit_counts(pes) == counts
    assert arch.accelerator_units(pes) == accelerator
    assert load("cgra").accelerator_units(16) == 64


def test_an_open_count_is_bounded():
    arch = load("abstract")
    assert arch.unit_count("pe", 2**40) == 2**40
    with pytest.raises(
        ArchitectureError, match=r"^architecture abstract: unit 'pe' has no count and P = 1099511627777 "
    ):
        arch.unit_count("pe", 2**40 + 1)


@pytest.mark.parametrize(
    ("unit", "count", "links"),
    [
        ({"count": 10**8, "topology": {"kind": "bus"}}, None, 10**8),
        ({"count": 2000}, None, 1999000),
        ({"count": 10**6, "topology": {"kind": "mesh", "rows": 1000, "cols": 1000}}, None, 1998000),
        ({}, 10**12, 10**12 * (10**12 - 1) // 2),
    ],
)
def test_an_instance_graph_is_bounded(unit, count, links):
    """A bus of 10**8 units used to take 4.1 GB and 70 s: the links are counted before any is built."""
    with pytest.raises(ArchitectureError, match=f"would have {links} links, more than 1000000$"):
        _design({"pe": unit}).instance_graph("pe", count)
    assert _design({"pe": {"count": 1000, "topology": {"kind": "bus"}}}).instance_graph("pe").number_of_edges() == 1000
