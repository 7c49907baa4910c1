"""Enumeration strategies of implementation assignments."""

import pytest

from dcaccel.errors import DcaccelError
from dcaccel.exploration.assignments import Assignment, node_candidates, per_node, per_op_type


def test_per_op_type_is_the_product_over_op_types_in_order():
    found = [a.as_dict() for a in per_op_type({"Conv": ["mv", "op"], "Gemm": ["lmv", "mv"]})]
    assert found == [
        {"Conv": "mv", "Gemm": "lmv"},
        {"Conv": "mv", "Gemm": "mv"},
        {"Conv": "op", "Gemm": "lmv"},
        {"Conv": "op", "Gemm": "mv"},
    ]


def test_per_op_type_with_no_op_types_is_one_empty_assignment():
    assert [str(a) for a in per_op_type({})] == ["default"]


def test_per_node_chooses_each_node_freely():
    nodes = {"Conv": ["conv1", "conv2"], "Gemm": ["fc1"]}
    found = list(per_node(nodes, {"Conv": ["mv", "op", "lmv"]}, max_assignments=100))
    assert len(found) == 9
    assert found[0].as_dict() == {"conv1": "mv", "conv2": "mv"}
    assert found[-1].as_dict() == {"conv1": "lmv", "conv2": "lmv"}
    assert len(set(found)) == 9


def test_per_node_past_the_cap_names_the_count():
    nodes = {"Conv": [f"conv{i}" for i in range(8)]}
    with pytest.raises(DcaccelError, match="6,561 assignments"):
        list(per_node(nodes, {"Conv": ["mv", "op", "lmv"]}, max_assignments=1000))


@pytest.mark.parametrize(
    ("choices", "text"),
    [({"Conv": "mv"}, "Conv=mv"), ({"conv1": "op", "fc1": "lmv"}, "conv1=op,fc1=lmv"), ({}, "default")],
)
def test_assignment_text(choices, text):
    assert str(Assignment.of(choices)) == text


def test_replace_changes_one_key_only():
    assignment = Assignment.of({"a": "mv", "b": "mv"}).replace("b", "op")
    assert assignment.as_dict() == {"a": "mv", "b": "op"}


LENET = {"Conv": ["conv1", "conv2"], "Gemm": ["fc1", "fc2", "fc3"]}


@pytest.mark.parametrize(
    ("implementations", "expected"),
    [
        ({"Conv": ["mv", "op"]}, [("conv1", ["mv", "op"]), ("conv2", ["mv", "op"])]),
        ({"conv2": ["lmv"], "Conv": ["mv"]}, [("conv2", ["lmv"]), ("conv1", ["mv"])]),
        ({"Gemm": ["op"], "fc2": ["mv", "lmv"]}, [("fc1", ["op"]), ("fc3", ["op"]), ("fc2", ["mv", "lmv"])]),
        ({"conv1": ["mv"], "conv2": ["op"], "Conv": ["lmv"]}, [("conv1", ["mv"]), ("conv2", ["op"])]),
        ({"conv": ["mv"]}, []),
        ({}, []),
    ],
)
def test_node_candidates_take_a_node_key_over_its_op_type(implementations, expected):
    assert node_candidates(LENET, implementations) == expected


def test_per_node_covers_named_nodes():
    found = [str(a) for a in per_node(LENET, {"conv1": ["mv", "lmv"]}, max_assignments=10)]
    assert found == ["conv1=mv", "conv1=lmv"]


@pytest.mark.parametrize(
    ("choices", "effective"),
    [
        ({"Conv": "mv"}, "Conv=mv"),
        ({"conv": "mv"}, "default"),
        ({"Conv": "mv", "conv1": "op"}, "Conv=mv,conv1=op"),
        ({"Conv": "mv", "conv1": "op", "conv2": "lmv"}, "conv1=op,conv2=lmv"),
        ({"fc9": "mv", "Gemm": "op"}, "Gemm=op"),
        ({}, "default"),
    ],
)
def test_effective_keeps_the_keys_that_decide_a_node(choices, effective):
    assert str(Assignment.of(choices).effective(LENET)) == effective


@pytest.mark.parametrize(
    ("choices", "lowered", "label"),
    [
        ({"Conv": "mv"}, {"conv1": "mv", "conv2": "mv"}, "Conv=mv"),
        ({"conv": "op"}, {"conv1": "mv", "conv2": "mv"}, "default"),
        ({"Conv": "op"}, {"conv1": "mv", "conv2": "op"}, "conv1=mv,conv2=op"),
        ({"Conv": "op", "conv2": "lmv"}, {"conv1": "op", "conv2": "lmv"}, "Conv=op,conv2=lmv"),
        ({"conv2": "lmv"}, {"conv1": "mv", "conv2": "mv"}, "conv2=mv"),
    ],
)
def test_lowered_says_what_the_nodes_got(choices, lowered, label):
    implementations = {**dict.fromkeys(["fc1", "fc2", "fc3"], "mv"), **lowered}
    assert str(Assignment.of(choices).lowered(implementations, LENET)) == label
