"""Adversarial DAG files of schema version 2 (issue 22's bar applied to TaskInfo and the reader): a count
that is a negative or fractional constant, an iteration range that ends before it starts, a version that
is not an integer, and a symbolic count that evaluates to a negative or fractional number are refused in
one line naming the node and field, never read as a number."""

import json

import pytest

from dcaccel.dag.taskdag import TaskDAG
from dcaccel.errors import DcaccelError


def _dag(**info) -> dict:
    """Source -> buffer -> task (with ``info``) -> buffer, in the vectors' format of version 2."""
    return {
        "schema_version": 2,
        "name": "t",
        "nodes": [
            {"id": 0, "kind": "source", "label": "pseudo-source"},
            {"id": 1, "kind": "buffer", "label": "A", "info": {"container": "A"}},
            {"id": 2, "kind": "task", "label": "T", "info": {"op": "MatMul", **info}},
            {"id": 3, "kind": "buffer", "label": "B", "info": {"container": "B"}},
        ],
        "edges": [
            {"src": 0, "dst": 1, "volume": 4},
            {"src": 1, "dst": 2, "volume": 4},
            {"src": 2, "dst": 3, "volume": 4},
        ],
    }


@pytest.mark.parametrize(
    ("info", "message"),
    [
        ({"macs": "N-N-1"}, "node 2: 'info' field 'macs' 'N-N-1' is -1, not an integer >= 0"),
        ({"ops": "1/2"}, "node 2: 'info' field 'ops' '1/2' is 1/2, not an integer >= 0"),
        ({"iterations": "2-5"}, "field 'iterations' '2-5' is -3, not an integer >= 0"),
        ({"iteration_range": [5, 2]}, "field 'iteration_range' is [5, 2]: the end is before the first iteration"),
    ],
)
def test_bad_count_is_refused_on_reading(info, message):
    with pytest.raises(DcaccelError) as caught:
        TaskDAG.from_json(_dag(**info))
    assert message in str(caught.value)


@pytest.mark.parametrize("version", [2.0, "2", True, None, [2]])
def test_version_must_be_an_integer(version):
    data = {**_dag(), "schema_version": version}
    with pytest.raises(DcaccelError, match=r"has DAG schema version .*; this dcaccel reads versions 1 and 2"):
        TaskDAG.from_json(data)


@pytest.mark.parametrize(
    ("count", "sizes", "message"),
    [
        ("-N", {"N": 4}, "task 2 'T': field 'macs' -N is -4 at these sizes, not an integer >= 0"),
        ("N/2", {"N": 3}, "task 2 'T': field 'macs' N/2 is 3/2 at these sizes, not an integer >= 0"),
    ],
)
def test_symbolic_count_evaluating_to_no_count_is_refused(count, sizes, message):
    dag = TaskDAG.from_json(_dag(macs=count))
    with pytest.raises(DcaccelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dag.evaluate(**sizes)


@pytest.mark.parametrize(("count", "sizes", "expected"), [("N/2", {"N": 4}, 2), ("N-1", {"N": 1}, 0), ("7", {}, 7)])
def test_good_counts_still_evaluate(count, sizes, expected, tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(_dag(macs=count)))
    assert TaskDAG.from_json(path).evaluate(**sizes).info(2).macs == expected


def test_a_count_beyond_64_bits_is_refused():
    """Volumes stop at 2**63 - 1; a count of 10^40 MACs gave energies in float-rounded digits."""
    with pytest.raises(DcaccelError, match=r"field 'macs' is 10{40}, more than 9223372036854775807"):
        TaskDAG.from_json(_dag(macs=10**40))


@pytest.mark.parametrize(
    ("info", "message"),
    [
        ({"macs": "N", "node": "mm"}, "the task of MatMul node 'mm': macs N needs values for N"),
        ({"macs": 3, "ops": "K*N"}, "a task: ops K*N needs values for K, N"),
    ],
)
def test_a_symbolic_count_in_a_concrete_dag_is_refused_when_costed(info, message):
    """Numbers as volumes but text as counts: the costs raised TypeError (Cannot convert symbols to int)."""
    from dcaccel.dag.arithmetic import task_arithmetic

    dag = TaskDAG.from_json(_dag(**info))
    with pytest.raises(DcaccelError) as refusal:
        task_arithmetic(dag.info(2), 4)
    assert str(refusal.value) == f"{message} (TaskDAG.evaluate at the sizes)"
