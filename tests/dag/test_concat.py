"""A Concat of differently sized inputs (the cls token and the patch embeddings of ViT/DeiT) extracts a DAG
that satisfies the contract, in both back-ends.

The model: Concat of the inputs along ``axis`` → Relu → y. The canonical Concat copies slabs of
``g`` indices along the axis, ``g`` the gcd of the inputs' lengths (docs/dag.md, "Concat of unequal
parts"): every copy task reads and writes ``g · slab`` elements (slab = the elements of one index along
the axis), so Relu's in-edges carry one volume under both edge-volume rules.
"""

import math
import warnings

import onnx
import pytest
from onnx import TensorProto, helper

import dcaccel
from dcaccel.dag import metrics
from dcaccel.dag.extract import extract
from dcaccel.dag.symbolic import symbolic_metrics
from dcaccel.errors import DAGContractError
from dcaccel.scheduler import schedule
from tests.dag.test_symbolic import concrete_metrics

#: (inputs' shapes, axis, copy tasks). The copy tasks are Σ length / gcd of the lengths along the axis.
CASES = [
    pytest.param([(1, 1, 32), (1, 4, 32)], 1, 5, id="cls-token"),
    pytest.param([(2, 3), (1, 3)], 0, 3, id="rows"),
    pytest.param([(2, 1), (2, 3), (2, 2)], -1, 6, id="three-columns"),
    pytest.param([(4, 2), (6, 2)], 0, 5, id="gcd-2"),
    pytest.param([(3,), (5,)], 0, 8, id="vector"),
    pytest.param([(2, 2), (2, 2)], 1, 2, id="equal"),
    pytest.param([(4,)], 0, 1, id="single"),
]


def concat_model(shapes: list[tuple[int, ...]], axis: int) -> onnx.ModelProto:
    """Concat of inputs ``x0, x1, ...`` of ``shapes`` along ``axis``, then Relu."""
    names = [f"x{k}" for k in range(len(shapes))]
    out_shape = list(shapes[0])
    out_shape[axis] = sum(shape[axis] for shape in shapes)
    graph = helper.make_graph(
        [
            helper.make_node("Concat", names, ["c"], name="concat", axis=axis),
            helper.make_node("Relu", ["c"], ["y"], name="relu"),
        ],
        "concat",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in zip(names, shapes, strict=True)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def lowered_concat(shapes, axis):
    return dcaccel.load(concat_model(shapes, axis), name="concat").lower()


def _ops(dag, op: str) -> list[int]:
    return [v for v in dag.tasks if dag.info(v).op == op]


@pytest.mark.parametrize("rule", ["exact", "reference"])
@pytest.mark.parametrize(("shapes", "axis", "copies"), CASES)
def test_copy_tasks_of_one_size_feed_the_consumer_uniformly(shapes, axis, copies, rule):
    total = sum(math.prod(shape) for shape in shapes)
    chunk = total // copies  # every copy task moves as many elements
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no buffer inserted: the output streams
        dag = extract(lowered_concat(shapes, axis), edge_volume=rule)
    dag.validate()
    copy_tasks = _ops(dag, "Concat")
    assert len(copy_tasks) == copies
    for v in copy_tasks:
        assert [dag.volume(p, v) for p in dag.predecessors(v)] == [chunk]
        assert [dag.volume(v, w) for w in dag.successors(v)] == [chunk if rule == "exact" else total]
    (relu,) = _ops(dag, "Relu")
    assert sorted(dag.predecessors(relu)) == sorted(copy_tasks)
    assert [dag.volume(relu, w) for w in dag.successors(relu)] == [total]
    # Copies move max(chunk, chunk) (exact) or max(chunk, total) (reference); Relu max(I, total).
    assert metrics.work(dag) == (2 * total if rule == "exact" else (copies + 1) * total)
    assert metrics.io_volume(dag) == 2 * total  # inputs read once, y written once


@pytest.mark.parametrize("rule", ["exact", "reference"])
@pytest.mark.parametrize(("shapes", "axis", "copies"), CASES)
def test_closed_form_equals_the_concrete_dag(shapes, axis, copies, rule):
    lowered = lowered_concat(shapes, axis)
    closed = symbolic_metrics(lowered, edge_volume=rule)
    assert closed.assumptions == ()
    measured = concrete_metrics(extract(lowered, edge_volume=rule))
    assert measured["tasks"] == copies + 1
    assert {name: getattr(closed, name) for name in measured} == measured


def test_cls_token_concat_schedules():
    """The five copy tasks and Relu fit one block of 16 PEs and stream into Relu, which starts when the
    copies emit their first element (cycle 1) and writes its 160 elements one per cycle."""
    dag = extract(lowered_concat([(1, 1, 32), (1, 4, 32)], 1))
    result = schedule(dag, 16)
    assert result.makespan == 1 + 160


@pytest.mark.filterwarnings("ignore:extract. container")
@pytest.mark.parametrize("granularity", ["coarse", ("tiles", 2)])
def test_merging_slabs_of_unequal_inputs_is_refused(granularity):
    """A coarse task (or a tile) of the 4-slab input moves 128 elements, the 1-slab input 32: the
    output becomes a buffer whose in-edges differ, which the contract forbids."""
    with pytest.raises(DAGContractError, match="in-edges with different volumes"):
        extract(lowered_concat([(1, 1, 32), (1, 4, 32)], 1), granularity)
