"""Support declarations: their validation (one line naming component and field), the constraints of a
rule, composite patterns and the annotation of operators with the unit kind that runs them."""

from __future__ import annotations

import re

import pytest

from dcaccel.architecture import Architecture, ArchitectureError, load, names
from dcaccel.architecture.support import OpInstance, SupportRule, UnitRole, annotate, match_patterns


def design(npu: dict, host: bool = True) -> Architecture:
    units = {"npu": {"count": 4, "ops": ["Conv", "Relu", "Add", "Gemm"], **npu}}
    if host:
        units["cpu"] = {"role": "host", "count": 1, "ops": ["*"], "elements_per_cycle": 0.25}
    return Architecture.from_dict(
        {"name": "npu", "units": units, "memories": {"dram": {"level": "offchip"}}}, "npu.yaml"
    )


def chain(*ops: str, **attributes) -> list[OpInstance]:
    """Operators n0 -> n1 -> ..., each reading the previous one; ``attributes`` apply to every Conv."""
    return [
        OpInstance(f"n{i}", op, attributes if op == "Conv" else {}, ("float32",), 100, (f"n{i - 1}",) if i else ())
        for i, op in enumerate(ops)
    ]


@pytest.mark.parametrize(
    ("npu", "message"),
    [
        ({"support": [{"op": "TopK"}]}, "units.npu: support.0.op: 'TopK' is not in the unit's ops"),
        ({"support": [{"op": "Conv"}, {"op": "Conv"}]}, "units.npu: support.1.op: a second rule for 'Conv'"),
        ({"support": [{"op": "Conv", "stride": [[1, 1]]}]}, "units.npu.support.0.stride: Extra inputs"),
        ({"support": [{"op": "Conv", "kernel_shape": []}]}, "units.npu.support.0.kernel_shape: List should have"),
        ({"support": [{"op": "Conv", "kernel_shape": [[0, 3]]}]}, "units.npu.support.0.kernel_shape.0.0: Input"),
        ({"support": [{"op": "Conv", "dtypes": ["float128"]}]}, "units.npu.support.0.dtypes.0: String should match"),
        ({"support": [{"op": "Conv", "max_elements": 0}]}, "units.npu.support.0.max_elements: Input should be"),
        ({"patterns": ["Conv"]}, "units.npu.patterns.0: String should match"),
        ({"patterns": ["Conv+Softmax"]}, "units.npu: patterns.0: 'Softmax' is not in the unit's ops"),
        ({"role": "cpu"}, "units.npu.role: Input should be 'accelerator' or 'host'"),
        ({"role": "host"}, 'units.npu: a host runs every op: its ops must be ["*"]'),
    ],
)
def test_declarations_are_validated(npu, message):
    with pytest.raises(ArchitectureError, match=r"^architecture npu\.yaml: " + re.escape(message)):
        design(npu, host=False)


def test_one_host_at_most():
    units = {name: {"role": "host", "ops": ["*"]} for name in ("cpu", "cpu2")}
    with pytest.raises(ArchitectureError, match="units: at most one host, got cpu, cpu2"):
        Architecture.from_dict({"name": "two", "units": units, "memories": {"dram": {"level": "offchip"}}}, "two")


@pytest.mark.parametrize(
    ("rule", "instance", "problem"),
    [
        ({"kernel_shape": [[3, 3]]}, {"kernel_shape": (3, 3)}, None),
        ({"kernel_shape": [[3, 3], [1, 1]]}, {"kernel_shape": (7, 7)}, "kernel_shape 7x7 not in 3x3, 1x1"),
        ({"strides": [[1, 1]]}, {"strides": (2, 2)}, "strides 2x2 not in 1x1"),
        ({"group": [1]}, {"group": 4}, "group 4 not in 1"),
        ({"group": [1, 4]}, {"group": 4}, None),
        ({"kernel_shape": [[3, 3]]}, {}, None),  # an op without the attribute is not constrained by it
    ],
)
def test_rule_constraints(rule, instance, problem):
    assert SupportRule(op="Conv", **rule).violation(OpInstance("c", "Conv", instance, ("float32",), 10)) == problem


@pytest.mark.parametrize(
    ("rule", "dtypes", "elements", "problem"),
    [
        ({"dtypes": ["float32"]}, ("float32",), 10, None),
        ({"dtypes": ["float16", "int8"]}, ("float32", "int8"), 10, "dtype float32 not in float16, int8"),
        ({"max_elements": 10}, ("float32",), 10, None),
        ({"max_elements": 10}, ("float32",), 11, "a tensor of 11 elements exceeds max_elements 10"),
    ],
)
def test_dtype_and_size_constraints(rule, dtypes, elements, problem):
    assert SupportRule(op="Relu", **rule).violation(OpInstance("r", "Relu", {}, dtypes, elements)) == problem


@pytest.mark.parametrize(
    ("ops", "patterns", "matched"),
    [
        (("Conv", "Relu"), ["Conv+Relu"], {"n0": "Conv+Relu", "n1": "Conv+Relu"}),
        (("Conv", "Add", "Relu"), ["Conv+Relu"], {}),
        (("Relu", "Conv"), ["Conv+Relu"], {}),
        (("Conv", "Relu", "Conv", "Relu"), ["Conv+Relu"], {f"n{i}": "Conv+Relu" for i in range(4)}),
        (("Gemm", "Add", "Relu"), ["Gemm+Add+Relu", "Gemm+Add"], dict.fromkeys(("n0", "n1", "n2"), "Gemm+Add+Relu")),
        (("Gemm", "Add", "Relu"), ["Gemm+Add", "Gemm+Add+Relu"], {"n0": "Gemm+Add", "n1": "Gemm+Add"}),
        ((), ["Conv+Relu"], {}),
    ],
)
def test_patterns_match_chains(ops, patterns, matched):
    assert {name: pattern for name, (pattern, _) in match_patterns(patterns, chain(*ops)).items()} == matched


def test_pattern_needs_a_single_consumer():
    """A Conv read by two operators is not fused with either (its output leaves the composite)."""
    instances = [*chain("Conv", "Relu"), OpInstance("other", "Relu", {}, (), 0, ("n0",))]
    assert match_patterns(["Conv+Relu"], instances) == {}


def test_annotation_reasons():
    """Relu is supported only inside Conv+Relu; the 7x7 stride-2 Conv breaks its pattern."""
    arch = design(
        {"support": [{"op": "Conv", "kernel_shape": [[3, 3]], "strides": [[1, 1]]}], "patterns": ["Conv+Relu"]}
    )
    small = chain("Conv", "Relu", kernel_shape=(3, 3), strides=(1, 1))
    large = [
        OpInstance(f"m{i}", op, {"kernel_shape": (7, 7), "strides": (2, 2)} if op == "Conv" else {}, (), 0, p)
        for i, (op, p) in enumerate([("Conv", ("n1",)), ("Relu", ("m0",)), ("TopK", ("m1",))])
    ]
    found = {name: (a.target, a.offloaded, a.reason) for name, a in annotate(arch.units, [*small, *large]).items()}
    assert found == {
        "n0": ("npu", True, "pattern Conv+Relu on npu"),
        "n1": ("npu", True, "pattern Conv+Relu on npu"),
        "m0": ("cpu", False, "constraint violated (npu: kernel_shape 7x7 not in 3x3)"),
        "m1": ("cpu", False, "constraint violated (npu: pattern Conv+Relu broken by m0 (kernel_shape 7x7 not in 3x3))"),
        "m2": ("cpu", False, "unsupported op TopK"),
    }


def test_without_support_rules_the_ops_are_supported():
    arch = design({})
    found = annotate(arch.units, chain("Conv", "Softmax", "Gemm"))
    assert [(a.target, a.offloaded, a.reason) for a in found.values()] == [
        ("npu", True, "supported by npu"),
        ("cpu", False, "unsupported op Softmax"),
        ("npu", True, "supported by npu"),
    ]


def test_implementations_follow_the_rule():
    arch = design({"support": [{"op": "Conv", "implementations": ["lmv", "op"]}, {"op": "Relu"}]})
    found = annotate(arch.units, chain("Conv", "Relu"))
    assert [a.implementations for a in found.values()] == [("lmv", "op"), None]


def test_no_host_leaves_target_empty():
    found = annotate(design({}, host=False).units, chain("Softmax"))
    assert (found["n0"].target, found["n0"].reason) == (None, "unsupported op Softmax")


@pytest.mark.parametrize("name", names())
def test_shipped_designs(name):
    """``abstract`` and ``eyeriss`` run every op on their accelerator; cgra has a host."""
    arch = load(name)
    hosts = [unit for unit, spec in arch.units.items() if spec.role == UnitRole.HOST]
    assert hosts == (["host"] if name == "cgra" else [])
    found = annotate(arch.units, chain("Conv", "Softmax", "TopK"))
    expected = name in ("abstract", "eyeriss", "tpu")  # a "*" accelerator kind runs everything
    assert all(a.offloaded == expected for name_, a in found.items() if name_ != "n0")
