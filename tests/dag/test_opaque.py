"""Opaque tasks: an op dcaccel has no canonical implementation of (here LogSoftmax with its ONNX function body kept
as written, which DaCe expands with its ``pure`` implementation; RandomUniformLike, which DaCe cannot expand) is
lowered as one opaque task.

The model: x (4×6) @ w (6×6, a constant) → LogSoftmax (axis 1) → Neg → y. Every tensor has 24 elements. By default
the import replaces LogSoftmax by its function body (dcaccel/frontend/functions.py), whose ops are all canonical.
"""

import warnings

import dace
import numpy as np
import onnx
import pytest
from dace.sdfg import nodes
from onnx import TensorProto, helper

import dcaccel
from dcaccel.dag import metrics
from dcaccel.dag.extract import extract
from dcaccel.dag.task import Role
from dcaccel.errors import UnsupportedOpError
from dcaccel.frontend.functions import kept_as_written
from dcaccel.transforms.checks import lowering_violations
from dcaccel.transforms.lower import OpaqueOpWarning, lower, opaque_nodes
from dcaccel.transforms.opaque_mark import is_opaque, mark_opaque

#: Elements of every tensor of the model (4 × 6).
ELEMENTS = 24


def opaque_model(op: str = "RandomUniformLike") -> onnx.ModelProto:
    """x @ w → ``op`` (on the product) → Neg."""
    rng = np.random.default_rng(0)
    weight = onnx.numpy_helper.from_array(rng.standard_normal((6, 6)).astype(np.float32), "w")
    attributes = {"axis": 1} if op == "LogSoftmax" else {}
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["p"], name="matmul"),
            helper.make_node(op, ["p"], ["s"], name=op.lower(), **attributes),
            helper.make_node("Neg", ["s"], ["y"], name="neg"),
        ],
        "opaque",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


@pytest.fixture(scope="module")
def workload():
    with kept_as_written():
        return dcaccel.load(opaque_model("LogSoftmax"), name="opaque")


def test_by_default_the_op_is_its_function_body_and_nothing_is_opaque():
    workload = dcaccel.load(opaque_model("LogSoftmax"), name="inlined")
    assert opaque_nodes(workload.sdfg) == {}
    assert {"ReduceMax", "Exp", "ReduceSum", "Log"} <= {node.op_type for node in workload.onnx_model.graph.node}


@pytest.fixture(scope="module")
def lowered_and_warnings(workload):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered = lower(workload, {"MatMul": "lmv"})
    return lowered, [w for w in caught if issubclass(w.category, OpaqueOpWarning)]


def test_opaque_nodes_are_found_without_lowering(workload):
    assert opaque_nodes(workload.sdfg) == {"logsoftmax": "LogSoftmax"}


def test_lowering_keeps_the_op_as_one_marked_nested_sdfg_with_one_warning(lowered_and_warnings):
    lowered, caught = lowered_and_warnings
    assert lowered.opaque == {"logsoftmax": "LogSoftmax"}
    assert lowered.implementations == {"matmul": "lmv", "logsoftmax": "pure", "neg": "canonical"}
    (warning,) = caught
    assert str(warning.message).endswith("kept as opaque tasks: logsoftmax (LogSoftmax)")
    top = [node for state in lowered.sdfg.nodes() for node in state.nodes() if is_opaque(node)]
    (nested,) = top
    assert isinstance(nested, nodes.NestedSDFG) and nested.no_inline and nested.label == "logsoftmax"
    assert not any(isinstance(n, nodes.LibraryNode) for n, _ in lowered.sdfg.all_nodes_recursive())
    assert lowering_violations(lowered.sdfg) == []


def test_an_unmarked_nested_sdfg_at_top_level_is_still_a_violation(lowered_and_warnings):
    lowered, _ = lowered_and_warnings
    sdfg = lowered.sdfg
    (nested,) = [node for state in sdfg.nodes() for node in state.nodes() if is_opaque(node)]
    nested.location.clear()
    try:
        (violation,) = lowering_violations(sdfg)
        assert violation.startswith("nested SDFG 'logsoftmax' outside a map")
    finally:
        mark_opaque(nested)


def test_the_dag_has_one_opaque_task_whose_volumes_are_the_tensor_sizes(lowered_and_warnings):
    lowered, _ = lowered_and_warnings
    dag = extract(lowered)
    dag.validate()
    (task,) = [v for v in dag.tasks if dag.node(v).info.opaque]
    info = dag.info(task)
    assert (info.op, info.node, info.implementation) == ("LogSoftmax", "logsoftmax", "pure")
    assert (info.role, info.reason) == (Role.OPAQUE, "no canonical implementation")
    assert [dag.volume(u, task) for u in dag.predecessors(task)] == [ELEMENTS]
    assert [dag.volume(task, w) for w in dag.successors(task)] == [ELEMENTS]
    costs = metrics.task_costs(dag)
    assert costs[task] == ELEMENTS
    assert metrics.opaque_work(dag) == (1, ELEMENTS / metrics.work(dag))
    assert len(dag.tasks) > 1  # the MatMul's and the Neg's tasks are canonical ones


def test_strict_refuses_the_op_in_one_line(workload):
    with pytest.raises(UnsupportedOpError) as raised:
        lower(workload, strict=True)
    assert str(raised.value) == "unsupported op LogSoftmax (node 'logsoftmax'): no dcaccel implementation"


def test_a_choice_for_an_op_without_implementations_is_refused(workload):
    with pytest.raises(UnsupportedOpError, match=r"^unsupported op LogSoftmax \(node 'logsoftmax'\)"):
        lower(workload, {"LogSoftmax": "canonical"})


def test_an_op_dace_cannot_expand_becomes_a_host_task_through_onnxruntime():
    """RandomUniformLike has no dcaccel or DaCe implementation (nor a function body): it runs as a host task
    (dcaccel/transforms/host.py), one opaque tasklet, its DAG task carrying its tensors (24 elements per edge)."""

    from dcaccel.transforms.host import HOST_IMPLEMENTATION
    from dcaccel.transforms.lower import OpaqueOpWarning

    random = dcaccel.load(opaque_model(), name="random")
    assert opaque_nodes(random.sdfg) == {"randomuniformlike": "RandomUniformLike"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpaqueOpWarning)
        lowered = lower(random)
    assert lowered.opaque == {"randomuniformlike": "RandomUniformLike"}
    assert lowered.implementations["randomuniformlike"] == HOST_IMPLEMENTATION
    dag = extract(lowered)
    (task,) = [v for v in dag.tasks if dag.node(v).info.opaque]
    assert {dag.volume(p, task) for p in dag.predecessors(task)} == {ELEMENTS}


def _bare_opaque_sdfg() -> dace.SDFG:
    """A bare SDFG: one marked tasklet reads a[0:10] and b[0:3] and writes c[0:10] and d[0:2]."""
    sdfg = dace.SDFG("bare_opaque")
    for name, size in (("a", 10), ("b", 3), ("c", 10), ("d", 2)):
        sdfg.add_array(name, [size], dace.float32)
    state = sdfg.add_state()
    tasklet = state.add_tasklet("op", {"ia", "ib"}, {"oc", "od"}, "pass")
    for name, connector, size in (("a", "ia", 10), ("b", "ib", 3)):
        state.add_edge(state.add_read(name), None, tasklet, connector, dace.Memlet(f"{name}[0:{size}]"))
    for name, connector, size in (("c", "oc", 10), ("d", "od", 2)):
        state.add_edge(tasklet, connector, state.add_write(name), None, dace.Memlet(f"{name}[0:{size}]"))
    mark_opaque(tasklet)
    return sdfg


def test_unequal_tensors_are_raised_to_the_largest_on_each_side():
    dag = extract(_bare_opaque_sdfg())
    dag.validate()
    (task,) = dag.tasks
    assert dag.node(task).info.opaque is True and dag.node(task).info.node == "op"
    into = {dag.node(u).label: dag.volume(u, task) for u in dag.predecessors(task)}
    out = {dag.node(w).label: dag.volume(task, w) for w in dag.successors(task)}
    assert into == {"a": 10, "b": 10}
    assert out == {"c": 10, "d": 10}


def test_unequal_tensors_without_the_mark_break_the_contract():
    sdfg = _bare_opaque_sdfg()
    (tasklet,) = [n for n in sdfg.start_state.nodes() if isinstance(n, nodes.Tasklet)]
    tasklet.location.clear()
    with pytest.raises(dcaccel.DcaccelError, match="volume"):
        extract(sdfg)


@pytest.mark.slow
def test_the_lowered_program_compiles_and_matches_onnxruntime(workload, lowered_and_warnings):
    from dcaccel.verification import verify

    lowered, _ = lowered_and_warnings
    report = verify(workload, lowered, rtol=1e-4, atol=1e-5, seed=0)
    assert report.program == "lowered" and report.reference == "onnxruntime"
    assert report.passed, report.outputs
