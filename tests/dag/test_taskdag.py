"""TaskDAG: construction, orders, the contract check, symbols, and the JSON / networkx / DOT forms."""

from __future__ import annotations

import dataclasses
import json
import warnings

import networkx as nx
import numpy as np
import pytest
import sympy

from dcaccel.dag import NodeKind, TaskDAG
from dcaccel.dag import generators as gen
from dcaccel.dag.task import NO_CANONICAL, SCHEMA_VERSION, Role, TaskInfo
from dcaccel.errors import DAGContractError, DcaccelError
from tests.scheduler.conftest import VECTORS, vector_files

N, K, M = sympy.symbols("N K M", positive=True, integer=True)


def diamond(volumes=(4, 4, 4, 4, 4), sink=True) -> TaskDAG:
    """source -> A -> {B, C} -> D (-> sink)."""
    dag = TaskDAG("diamond")
    s = dag.add_node(NodeKind.SOURCE, "s")
    a, b, c, d = (dag.add_node(NodeKind.TASK, name) for name in "ABCD")
    dag.add_edge(s, a, volumes[0])
    dag.add_edge(a, b, volumes[1])
    dag.add_edge(a, c, volumes[1])
    dag.add_edge(b, d, volumes[2])
    dag.add_edge(c, d, volumes[3])
    if sink:
        t = dag.add_node(NodeKind.SINK, "t")
        dag.add_edge(d, t, volumes[4])
    return dag


def test_ids_are_consecutive_in_insertion_order():
    dag = diamond()
    assert [node.id for node in dag.nodes] == list(range(6))
    assert [node.label for node in dag.nodes] == ["s", "A", "B", "C", "D", "t"]
    assert dag.node(4).kind is NodeKind.TASK
    assert (dag.source, dag.sink, dag.exit) == (0, 5, 5)
    assert dag.tasks == [1, 2, 3, 4]
    assert dag.buffers == frozenset()


def test_orders_follow_edge_insertion():
    dag = TaskDAG()
    s = dag.add_node(NodeKind.SOURCE, "s")
    x, y, z = (dag.add_node(NodeKind.TASK, name) for name in "xyz")
    dag.add_edge(s, z, 2)
    dag.add_edge(s, x, 2)
    dag.add_edge(x, y, 2)
    dag.add_edge(z, y, 2)
    assert dag.successors(s) == [z, x]
    assert dag.predecessors(y) == [x, z]
    # §0.2 edge order: by source in node order, then successor order
    assert dag.edges == [(s, z, 2), (s, x, 2), (x, y, 2), (z, y, 2)]
    assert dag.volume(z, y) == 2
    with pytest.raises(DAGContractError, match="no edge"):
        dag.volume(y, z)


def test_topological_order_is_lifo_kahn():
    dag = TaskDAG()
    s = dag.add_node(NodeKind.SOURCE, "s")
    a, b, c = (dag.add_node(NodeKind.TASK, name) for name in "abc")
    for task in (a, b, c):
        dag.add_edge(s, task, 1)
    t = dag.add_node(NodeKind.SINK, "t")
    for task in (a, b, c):
        dag.add_edge(task, t, 1)
    # children pushed a, b, c; popped from the end
    assert dag.topological_order() == [s, c, b, a, t]


def test_buffer_may_send_other_volumes_than_it_receives():
    dag = TaskDAG()
    s = dag.add_node(NodeKind.SOURCE, "s")
    b = dag.add_node(NodeKind.BUFFER, "b")
    x, y = dag.add_node(NodeKind.TASK, "x"), dag.add_node(NodeKind.TASK, "y")
    dag.add_edge(s, b, 6)
    dag.add_edge(b, x, 6)
    dag.add_edge(b, y, 12)
    t = dag.add_node(NodeKind.SINK, "t")
    dag.add_edge(x, t, 1)
    dag.add_edge(y, t, 1)
    dag.validate()
    assert dag.buffers == {b}


def _cycle():
    dag = diamond()
    dag.add_edge(4, 1, 4)
    return dag


def _two_sources():
    dag = diamond()
    extra = dag.add_node(NodeKind.TASK, "orphan")
    dag.add_edge(extra, 4, 4)
    return dag


def _two_exits():
    dag = diamond(sink=False)
    extra = dag.add_node(NodeKind.TASK, "dangling")
    dag.add_edge(1, extra, 4)
    return dag


def _no_exit_without_source_edges():
    dag = TaskDAG()
    dag.add_node(NodeKind.SOURCE, "s")
    return dag


def _buffer_in_volumes_differ():
    dag = TaskDAG()
    s = dag.add_node(NodeKind.SOURCE, "s")
    x, y = dag.add_node(NodeKind.TASK, "x"), dag.add_node(NodeKind.TASK, "y")
    b = dag.add_node(NodeKind.BUFFER, "buf")
    dag.add_edge(s, x, 3)
    dag.add_edge(s, y, 3)
    dag.add_edge(x, b, 3)
    dag.add_edge(y, b, 5)
    return dag


def _duplicated_edge():
    dag = diamond()
    dag.add_edge(1, 2, 4)
    return dag


def _sink_not_exit():
    dag = diamond()
    after = dag.add_node(NodeKind.TASK, "after")
    dag.add_edge(5, after, 4)
    return dag


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(_cycle, r"cycle: 2 'B' -> 4 'D' -> 1 'A' -> 2 'B'", id="cycle"),
        pytest.param(_two_sources, r"two sources: source 0 's' and task 6 'orphan'", id="two-sources"),
        pytest.param(_two_exits, r"2 exits \(task 4 'D', task 5 'dangling'\)", id="two-exits"),
        pytest.param(_no_exit_without_source_edges, "at least one edge", id="empty"),
        pytest.param(lambda: diamond((4, 4, 4, 5, 4)), r"task 4 'D' has in-edges with different volumes \(4 and 5\)",
                     id="task-in"),
        pytest.param(_buffer_in_volumes_differ, r"buffer 3 'buf' has in-edges with different volumes \(3 and 5\)",
                     id="buffer-in"),
        pytest.param(_duplicated_edge, r"duplicated edge 1->2", id="duplicate"),
        pytest.param(lambda: diamond((4, 0, 4, 4, 4)), r"edge 1->2 has volume 0", id="zero-volume"),
        pytest.param(_sink_not_exit, r"pseudo sink\(s\) \[5\] must be the unique exit 6", id="sink-not-exit"),
    ],
)  # fmt: skip
def test_validate_names_the_fault(build, message):
    with pytest.raises(DAGContractError, match=message):
        build().validate()


def test_task_out_volumes_must_agree():
    dag = TaskDAG()
    s = dag.add_node(NodeKind.SOURCE, "s")
    a, b, c = (dag.add_node(NodeKind.TASK, name) for name in "abc")
    dag.add_edge(s, a, 2)
    dag.add_edge(a, b, 2)
    dag.add_edge(a, c, 7)
    d = dag.add_node(NodeKind.TASK, "d")
    dag.add_edge(b, d, 1)
    dag.add_edge(c, d, 1)
    with pytest.raises(DAGContractError, match=r"task 1 'a' has out-edges with different volumes \(2 and 7\)"):
        dag.validate()


def test_validation_is_redone_after_a_change():
    dag = diamond()
    dag.validate()
    dag.add_edge(4, 1, 4)
    with pytest.raises(DAGContractError, match="cycle"):
        dag.validate()


def test_edges_to_missing_nodes_are_refused():
    dag = diamond()
    with pytest.raises(DAGContractError, match="node 9 does not exist"):
        dag.add_edge(1, 9, 3)


@pytest.mark.parametrize("path", vector_files(), ids=lambda p: p.stem)
def test_json_round_trip_keeps_orders(path):
    dag = TaskDAG.from_json(path)
    again = TaskDAG.from_json(json.loads(json.dumps(dag.to_json())))
    assert [(n.kind, n.label) for n in again.nodes] == [(n.kind, n.label) for n in dag.nodes]
    assert again.edges == dag.edges
    for v in range(dag.num_nodes):
        assert again.predecessors(v) == dag.predecessors(v)
        assert again.successors(v) == dag.successors(v)
        assert again.node(v).info == dag.node(v).info


def test_json_node_order_is_the_array_order():
    data = {
        "name": "shuffled",
        "nodes": [
            {"id": 2, "kind": "task", "label": "B"},
            {"id": 0, "kind": "source", "label": "S"},
            {"id": 1, "kind": "task", "label": "A"},
        ],
        "edges": [{"src": 0, "dst": 1, "volume": 3, "extra": "ignored"}, {"src": 1, "dst": 2, "volume": 3}],
        "results": [],
    }
    dag = TaskDAG.from_json(data)
    assert [n.label for n in dag.nodes] == ["B", "S", "A"]
    assert dag.edges == [(1, 2, 3), (2, 0, 3)]
    assert dag.info(0) == TaskInfo(file_id=2)
    assert dag.info(1) == TaskInfo(role=Role.PSEUDO, file_id=0)
    dag.validate()


def _chain_json(**edge) -> dict:
    """source -> T0 -> T1 in the vectors' format, the second edge's keys replaced by ``edge``."""
    data = gen.chain([2, 2]).to_json()
    data["edges"][1] = {**data["edges"][1], **edge}
    return data


def _with_node(**node) -> dict:
    data = gen.chain([2, 2]).to_json()
    data["nodes"][1] = {**data["nodes"][1], **node}
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"nodes": [{"id": 0, "kind": "source"}, {"id": 2, "kind": "task"}], "edges": []}, "consecutive"),
        ({"nodes": [{"id": 0, "kind": "gizmo"}], "edges": []}, r"node 0: unknown kind 'gizmo' \(expected one of"),
        ({"edges": []}, "no 'nodes' list"),
        ([], "expected a JSON object, got a list"),
        ({"nodes": {}, "edges": []}, "'nodes' must be a list, got an object"),
        ({"nodes": [], "edges": None}, "'edges' must be a list, got null"),
        ({"name": 3, "nodes": [], "edges": []}, "'name' must be a string"),
        ({"name": "two\nlines", "nodes": [], "edges": []}, "'name' must be a string on one line"),
        ({"nodes": [7], "edges": []}, "node 0: expected an object, got an integer"),
        ({"nodes": [{"kind": "task"}], "edges": []}, "node 0: no 'id'"),
        ({"nodes": [{"id": 0}], "edges": []}, "node 0: no 'kind'"),
        ({"nodes": [{"id": "0", "kind": "source"}], "edges": []}, "node 0: 'id' must be an integer, got a string"),
        ({"nodes": [{"id": True, "kind": "source"}], "edges": []}, "'id' must be an integer, got a boolean"),
        ({"nodes": [{"id": 0.0, "kind": "source"}], "edges": []}, "'id' must be an integer, got a number"),
        ({"nodes": [{"id": 0, "kind": ["task"]}], "edges": []}, r"unknown kind \"\['task'\]\""),
        ({"nodes": [{"id": 0, "kind": "source"}, {"id": 0, "kind": "task"}], "edges": []},
         r"node 1: duplicate id 0 \(also node 0\)"),
        (_with_node(label=5), "node 1: 'label' must be a string on one line"),
        (_with_node(label="a\nb"), "node 1: 'label' must be a string on one line"),
        (_with_node(info=[1]), "node 1: 'info' must be an object of task fields"),
        (_with_node(info={"macs": -1}), "node 1: 'info' field 'macs' must be an integer >= 0 or an expression, got"),
        (_with_node(info={"op": 3}), "node 1: 'info' field 'op' must be a string on one line"),
        (_with_node(info={"file_id": "1"}), "node 1: 'info' field 'file_id' must be an integer >= 0$"),
        (_with_node(info={"file_id": [1]}), "node 1: 'info' field 'file_id' must be an integer >= 0$"),
        (_with_node(info={"file_id": -1}), "node 1: 'info' field 'file_id' must be an integer >= 0$"),
        (_with_node(info={"role": "buffer"}), "node 1: 'info' field 'role' is buffer, but a task node's role is"),
        (_with_node(info={"role": "idle"}), "node 1: 'info' field 'role' is 'idle', expected one of compute, "),
        (_with_node(info={"shape": [2]}), r"node 1: 'info' has an unknown field 'shape' \(known: role, reason, op"),
        (_with_node(info={"iteration_range": [1]}), "field 'iteration_range' must be a list of two integers"),
        (_with_node(info={"index": {"i": "3"}}), "field 'index' must be an object of parameter names to integers"),
        (_with_node(info={"macs": "__import__('os')"}), "node 1: 'info' field 'macs' \"__import__.*unknown function"),
        ({**_with_node(meta=[1]), "schema_version": 1}, "node 1: 'meta' 'meta' must be an object"),
        (_chain_json(src=9), "edge 1: 'src' is 9, which is no node id"),
        (_chain_json(dst=-1), "edge 1: 'dst' is -1, which is no node id"),
        (_chain_json(dst="2"), "edge 1: 'dst' must be a node id, got a string"),
        (_chain_json(dst=None), "edge 1: 'dst' must be a node id, got null"),
        ({**_chain_json(), "edges": [{"src": 0, "volume": 2}]}, "edge 0: no 'dst'"),
        ({**_chain_json(), "edges": ["0->1"]}, "edge 0: expected an object, got a string"),
        (_chain_json(volume=2.5), r"edge 1 \(1->2\): volume 2.5 is not an integer"),
        (_chain_json(volume=float("inf")), "volume inf is not an integer"),
        (_chain_json(volume=float("nan")), "volume nan is not an integer"),
        (_chain_json(volume=1e300), "volume 1e\\+300 is not an integer"),
        (_chain_json(volume=True), "volume must be an integer or an expression, got a boolean"),
        (_chain_json(volume=None), "volume must be an integer or an expression, got null"),
        (_chain_json(volume=[2]), "volume must be an integer or an expression, got a list"),
        (_chain_json(volume="9**9**9"), r"edge 1 \(1->2\): volume '9\*\*9\*\*9': an exponent must be an integer"),
        (_chain_json(volume="N.real"), "volume 'N.real': 'Attribute' is not allowed"),
        (_chain_json(volume="7/2"), "volume '7/2' is not an integer"),
        (_chain_json(volume="x" * 2000), "volume 'xxxxx.*\\.\\.\\.': longer than"),
    ],
    ids=lambda value: None if isinstance(value, str) else "",
)  # fmt: skip
def test_bad_json_is_reported(data, message):
    with pytest.raises(DcaccelError, match=message) as caught:
        TaskDAG.from_json(data)
    assert str(caught.value).startswith("JSON data is not a DAG in the vectors' format: ")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("version", "shown"), [(3, "3"), (0, "0"), ("2", "'2'"), (True, "True"), (None, "None"), ([2], "a list")]
)
def test_a_file_of_another_schema_version_is_refused_in_one_line(tmp_path, version, shown):
    path = tmp_path / "newer.json"
    path.write_text(json.dumps({**gen.chain([2, 2]).to_json(), "schema_version": version}))
    with pytest.raises(DcaccelError) as caught:
        TaskDAG.from_json(path)
    assert str(caught.value) == f"file '{path}' has DAG schema version {shown}; this dcaccel reads versions 1 and 2"


def test_json_writes_the_schema_version_and_the_records():
    dag = gen.mmm("op", 2, 3, 2)
    data = dag.to_json()
    assert data["schema_version"] == SCHEMA_VERSION == 2
    entries = {node["label"]: node for node in data["nodes"]}
    assert entries["A"]["info"] == {"reason": "program-io"}  # a buffer's role is its kind's: not written
    assert entries["OP1"]["info"] == {"iteration": 1, "index": {"k": 1}}
    assert "info" not in entries["Reduce"]
    assert [n.info for n in TaskDAG.from_json(json.loads(json.dumps(data))).nodes] == [n.info for n in dag.nodes]


def test_a_version_1_file_is_converted_once_at_the_reader():
    """The free-form ``meta`` of a file without a schema version becomes the node's record."""
    metas = [
        {"op": "Relu", "node": "r", "opaque": True, "macs": "2*N", "iterations": [0, 4], "shape": [2]},
        {"op": "Transfer", "transfer": "to-host", "unit": "link", "elements": 6, "scope": "t"},
        {"container": "X", "version": 2, "reason": "reuse", "node_type": "Gemm"},
    ]
    kinds = ["source", "task", "task", "buffer"]
    data = {
        "nodes": [
            {"id": v, "kind": kind, "meta": meta}
            for v, (kind, meta) in enumerate(zip(kinds, [{}, *metas], strict=True))
        ],
        "edges": [{"src": v, "dst": v + 1, "volume": 2} for v in range(3)],
    }
    dag = TaskDAG.from_json(data)
    assert [dag.info(v) for v in range(4)] == [
        TaskInfo(role=Role.PSEUDO),
        TaskInfo(
            role=Role.OPAQUE,
            reason=NO_CANONICAL,
            op="Relu",
            node="r",
            macs=2 * sympy.Symbol("N"),
            iteration_range=(0, 4),
        ),
        TaskInfo(role=Role.TRANSFER, op="Transfer", transfer="to-host", unit="link", elements=6),
        TaskInfo(role=Role.BUFFER, reason="reuse", container="X", container_version=2, library_node="Gemm"),
    ]
    assert TaskDAG.from_json(dag.to_json()).nodes == dag.nodes


def test_a_volume_cannot_run_code(tmp_path):
    """A volume that Python's eval (and sympy.sympify) would run: it must be refused, not run."""
    witness = tmp_path / "pwned"
    payload = (
        "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]"
        f".__init__.__globals__['system']('touch {witness}')"
    )
    with pytest.raises(DcaccelError, match=r"edge 1 \(1->2\): volume .*: unknown function"):
        TaskDAG.from_json(_chain_json(volume=payload))
    with pytest.raises(DAGContractError, match="edge 0->1: volume .*: unknown function"):
        gen.chain([2, 2]).add_edge(0, 1, payload)
    assert not witness.exists()


@pytest.mark.parametrize(
    ("volume", "expected"),
    [(3.0, 3), ("3", 3), ("2*3", 6), ("Max(2, 3)", 3), ("N*M", sympy.Symbol("N") * sympy.Symbol("M"))],
)
def test_json_volumes(volume, expected):
    assert TaskDAG.from_json(_chain_json(volume=volume)).edges[1][2] == expected


@pytest.mark.parametrize(
    ("volume", "message"),
    [
        (-3, r"edge 1->2 has volume -3, expected >= 1"),
        ("-3", r"edge 1->2 has volume -3, expected >= 1"),
        (2**63, r"edge 1->2 has volume 9223372036854775808, expected at most 2\*\*63 - 1"),
        (10**40, r"edge 1->2 has volume 10{40}, expected at most 2\*\*63 - 1"),
    ],
)
def test_validate_refuses_volumes_out_of_range(volume, message):
    dag = TaskDAG.from_json(_chain_json(volume=volume))
    with pytest.raises(DAGContractError, match=message):
        dag.validate()


@pytest.mark.parametrize(
    ("file_ids", "message"),
    [
        ([5, 5, None], r"task 1 'T0' and source 0 'source' have the same file_id 5"),
        ([None, 0, None], r"task 1 'T0' and source 0 'source' have the same file_id 0"),
    ],
)
def test_validate_refuses_bad_file_ids(file_ids, message):
    data = gen.chain([2, 2]).to_json()
    for node, file_id in zip(data["nodes"], file_ids, strict=True):
        if file_id is not None:
            node["info"] = {"file_id": file_id}
    dag = TaskDAG.from_json(data)
    with pytest.raises(DAGContractError, match=message):
        dag.validate()


@pytest.mark.parametrize("name", ["mmm", pytest.param("pusch-mimo", marks=pytest.mark.slow)])
def test_symbolic_json_of_the_workloads_round_trips(name):
    """What ``to_json`` writes for a symbolic DAG (volumes such as ``2*A**2*S``, from
    ``extract(..., granularity="coarse", symbols={})`` of the built-in workloads) reads back equal."""
    from dcaccel import workloads
    from dcaccel.dag import extract

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # buffer nodes inserted for re-read streams
        dag = extract(workloads.get(name).lower(), granularity="coarse", symbols={})
    data = json.loads(json.dumps(dag.to_json()))
    assert any(isinstance(edge["volume"], str) for edge in data["edges"])
    again = TaskDAG.from_json(data)
    again.validate()
    assert again.to_json() == data
    assert {s.name for s in again.symbols} == {s.name for s in dag.symbols}


def test_bad_file_is_reported(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(DcaccelError, match=r"cannot read DAG file '.*broken.json'"):
        TaskDAG.from_json(broken)


def test_networkx_round_trip_keeps_both_orders():
    dag = TaskDAG("nx")
    s = dag.add_node(NodeKind.SOURCE, "s")
    a, b = dag.add_node(NodeKind.TASK, "a", TaskInfo(op="Relu", macs=N)), dag.add_node(NodeKind.TASK, "b")
    c = dag.add_node(NodeKind.TASK, "c")
    dag.add_edge(s, b, 2)  # b's successor and c's predecessor orders interleave with insertion
    dag.add_edge(s, a, 2)
    dag.add_edge(b, c, 2)
    dag.add_edge(a, c, 2)
    graph = dag.to_networkx()
    assert graph.nodes[a] == {"op": "Relu", "macs": N, "kind": "task", "label": "a"}
    assert graph.nodes[s] == {"role": Role.PSEUDO, "kind": "source", "label": "s"}
    assert graph.edges[b, c]["volume"] == 2
    again = TaskDAG.from_networkx(graph)
    assert again.edges == dag.edges
    assert [again.predecessors(v) for v in range(4)] == [dag.predecessors(v) for v in range(4)]
    assert [again.info(v) for v in range(4)] == [dag.info(v) for v in range(4)]
    graph.nodes[b]["shape"] = (2, 3)
    with pytest.raises(DAGContractError, match="^networkx graph 'nx': node 2 has unknown attributes shape$"):
        TaskDAG.from_networkx(graph)


def test_from_networkx_needs_integer_nodes_and_kinds():
    graph = nx.DiGraph()
    graph.add_edge("a", "b", volume=1)
    with pytest.raises(DAGContractError, match="integers 0..n-1"):
        TaskDAG.from_networkx(graph)


def test_dot_shows_kinds_and_volumes():
    dag = gen.mmm("op", 2, 3, 2)
    dot = dag.to_dot()
    assert dot.startswith('digraph "mmm_op_2_3_2" {')
    assert '1 [label="A", shape=box];' in dot
    assert '0 -> 1 [label="6"];' in dot
    assert dot.count("->") == dag.num_edges


def test_symbolic_volumes_and_evaluate():
    dag = TaskDAG("symbolic")
    s = dag.add_node(NodeKind.SOURCE, "s")
    a = dag.add_node(NodeKind.BUFFER, "A")
    x, y = dag.add_node(NodeKind.TASK, "x"), dag.add_node(NodeKind.TASK, "y")
    dag.add_edge(s, a, N * K)
    dag.add_edge(a, x, K * N)  # the same volume written another way
    dag.add_edge(a, y, N * K)
    z = dag.add_node(NodeKind.TASK, "z")
    dag.add_edge(x, z, M)
    dag.add_edge(y, z, M)
    dag.validate()
    assert dag.symbols == {N, K, M}
    assert not dag.is_concrete
    concrete = dag.evaluate(N=2, K=3, M=5)
    assert concrete.is_concrete
    assert concrete.edges == [(0, 1, 6), (1, 2, 6), (1, 3, 6), (2, 4, 5), (3, 4, 5)]
    assert dag.edges[0][2] == N * K  # the symbolic DAG is unchanged
    with pytest.raises(DcaccelError, match="needs values for M"):
        dag.evaluate(N=2, K=3)


def test_symbolic_volumes_that_differ_are_refused():
    dag = TaskDAG()
    s = dag.add_node(NodeKind.SOURCE, "s")
    x, y = dag.add_node(NodeKind.TASK, "x"), dag.add_node(NodeKind.TASK, "y")
    dag.add_edge(s, x, N)
    dag.add_edge(s, y, N)
    z = dag.add_node(NodeKind.TASK, "z")
    dag.add_edge(x, z, N)
    dag.add_edge(y, z, M)
    with pytest.raises(DAGContractError, match=r"task 3 'z' has in-edges with different volumes \(N and M\)"):
        dag.validate()


def test_json_keeps_symbolic_volumes_and_counts():
    dag = TaskDAG("sym")
    s = dag.add_node(NodeKind.SOURCE, "s")
    t = dag.add_node(NodeKind.TASK, "t", TaskInfo(iterations=N * M, iteration_range=(2, 3)))
    dag.add_edge(s, t, N * M)
    data = json.loads(json.dumps(dag.to_json()))
    assert data["nodes"][1]["info"] == {"iterations": "M*N", "iteration_range": [2, 3]}
    again = TaskDAG.from_json(data)
    assert again.edges[0][2] == sympy.Symbol("N") * sympy.Symbol("M")
    evaluated = again.evaluate(N=3, M=4)
    assert evaluated.edges == [(0, 1, 12)]
    assert evaluated.info(1).iterations == 12 and type(evaluated.info(1).iterations) is int


def test_vectors_are_present():
    assert VECTORS.is_dir(), f"reference vectors expected at {VECTORS}"


BATCH_VOLUMES = {
    "ints": [4, 4, 2, 2],
    "int64 array": np.array([4, 4, 2, 2], dtype=np.int64),
    "object array": np.array([4, 4, N, N], dtype=object),
    "numpy scalars and text": [np.int32(4), 4, "N", sympy.Integer(2)],
}


@pytest.mark.parametrize("volumes", BATCH_VOLUMES)
def test_batches_build_the_dag_one_by_one_would(volumes):
    """add_nodes / add_edges give the nodes, edges, orders and symbols of add_node / add_edge in a loop."""
    kinds = [NodeKind.SOURCE, "task", NodeKind.TASK, NodeKind.BUFFER]
    labels = ["s", "a", "b", 7]
    infos = [TaskInfo(role=Role.PSEUDO), TaskInfo(op="Relu"), TaskInfo(), TaskInfo(role=Role.BUFFER, container="X")]
    sources, targets = [0, 0, 1, 2], [1, 2, 3, 3]
    one_by_one = TaskDAG("d")
    for kind, label, info in zip(kinds, labels, infos, strict=True):
        one_by_one.add_node(kind, label, info)
    for src, dst, volume in zip(sources, targets, BATCH_VOLUMES[volumes], strict=True):
        one_by_one.add_edge(src, dst, volume)
    batched = TaskDAG("d")
    assert batched.add_nodes(kinds, labels, infos) == range(4)
    batched.add_edges(np.array(sources), targets, BATCH_VOLUMES[volumes])
    batched.add_edges([], [], [])
    assert batched.to_json() == one_by_one.to_json()
    assert batched.is_concrete == one_by_one.is_concrete
    assert [type(v) for v in batched.edge_volumes] == [type(v) for v in one_by_one.edge_volumes]
    assert [batched.info(v) for v in range(4)] == infos


def test_records_are_shared_and_frozen():
    """A record given to add_nodes is kept as it is (the concrete back-end's cached tasks) and cannot change."""
    shared = TaskInfo(op="Relu", index=(("i", 3),))
    dag = TaskDAG()
    dag.add_nodes([NodeKind.TASK, NodeKind.TASK], ["a", "b"], [shared, TaskInfo(op="Add")])
    assert dag.info(0) is shared and dag.node(0).info is shared
    with pytest.raises(dataclasses.FrozenInstanceError):
        shared.op = "Add"
    assert dag.to_json()["nodes"][0]["info"] == {"op": "Relu", "index": {"i": 3}}


@pytest.mark.parametrize(
    ("sources", "targets", "volumes", "message"),
    [
        ([0, 0], [1], [1, 1], "2 sources, 1 targets and 2 volumes"),
        ([0, 0], [1, 2], [1, 1], r"edge 0->2: node 2 does not exist \(the DAG has 2 nodes\)"),
        ([-1], [1], [1], "edge -1->1: node -1 does not exist"),
        ([0, 0], [1, 1], [1, True], "edge 0->1: volume must be an integer or a sympy expression, got True"),
        ([0], [1], [2.5], "volume must be an integer or a sympy expression, got 2.5"),
        ([0], [1], ["N +"], r"edge 0->1: volume 'N \+': not an expression"),
    ],
)
def test_bad_edge_batches_are_refused(sources, targets, volumes, message):
    dag = TaskDAG()
    dag.add_nodes([NodeKind.SOURCE, NodeKind.TASK], ["s", "t"], [TaskInfo(role=Role.PSEUDO), TaskInfo()])
    with pytest.raises(DAGContractError, match=message):
        dag.add_edges(sources, targets, volumes)
    assert dag.num_edges == 0


def test_bad_node_batches_are_refused():
    dag = TaskDAG()
    with pytest.raises(DAGContractError, match="2 kinds, 1 labels and 2 infos"):
        dag.add_nodes([NodeKind.TASK, NodeKind.TASK], ["a"], [TaskInfo(), TaskInfo()])
    with pytest.raises(ValueError, match="'job' is not a valid NodeKind"):
        dag.add_nodes(["job"], ["a"], [TaskInfo()])


def uniform_error(dag: TaskDAG, concrete: bool) -> str | None:
    """The message of the uniform-volume check, by the NumPy check of concrete DAGs or the general one."""
    try:
        if concrete:
            dag._validate_uniform_concrete()
        else:
            counted, dag._symbolic_edges = dag._symbolic_edges, 1  # take the path of symbolic DAGs
            try:
                dag._validate_uniform(dag.adjacency())
            finally:
                dag._symbolic_edges = counted
    except DAGContractError as err:
        return str(err)
    return None


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("changed", [0, 1, 3])
def test_concrete_uniform_check_reports_the_first_fault_like_the_general_one(seed, changed):
    """Layered DAGs with ``changed`` in-edges of tasks that have several altered: both checks name the same
    node and volumes."""
    dag = gen.layered(40, 5, seed=seed, buffer_fraction=0.3)
    joins = [
        e
        for e, v in enumerate(dag.edge_targets)
        if dag.kind(v) is NodeKind.TASK and dag.in_degree(v) > 1 and dag.kind(dag.edge_sources[e]) is NodeKind.TASK
    ]
    rng = np.random.default_rng(seed)
    for e in rng.choice(joins, changed, replace=False):
        dag._edge_volume[e] += 1
    expected = uniform_error(dag, concrete=False)
    assert uniform_error(dag, concrete=True) == expected
    assert (expected is None) == (changed == 0)
