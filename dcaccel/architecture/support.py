"""What a unit kind runs: support rules with constraints, composite patterns, and the annotation of a
model's operators with the unit kind that runs them (TVM's pattern table and annotate-target passes).

A unit kind declares, besides the ``ops`` its tasks are costed on, optional ``support`` rules (one per
op: the implementations it runs and constraints on the node — kernel sizes, strides, groups, data types,
largest tensor) and ``patterns`` (``"Conv+Relu"``: a chain of ops it runs as one composite, each node
feeding only the next). Without ``support`` a kind runs every op of its ``ops`` unconstrained. A kind of
``role: host`` (a CPU) runs everything. :func:`annotate` gives every operator the first accelerator kind
(description order) that supports it, else the host, with the reason. Nothing here reads DaCe: the
operators are :class:`OpInstance` records, built from an SDFG by :mod:`dcaccel.transforms.offload`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from dcaccel.architecture.ranges import MAX_ENTRIES, Positive

OpName = Annotated[str, Field(strict=True, min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
#: A composite pattern as written in YAML: op names joined by ``+`` (at least two).
PatternText = Annotated[
    str, Field(strict=True, pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\+[A-Za-z_][A-Za-z0-9_]*)+$", max_length=256)
]
DType = Annotated[str, Field(strict=True, pattern=r"^(float(16|32|64)|bfloat16|u?int(8|16|32|64)|bool)$")]


class UnitRole(StrEnum):
    """Whether a unit kind is part of the accelerator or the host CPU that runs what it cannot."""

    ACCELERATOR = "accelerator"
    HOST = "host"


class SupportRule(BaseModel):
    """One op a unit kind runs, with optional constraints (None: unconstrained). ``kernel_shape`` and
    ``strides`` list the allowed tuples, ``group`` the allowed group counts, ``dtypes`` the allowed
    element types of every tensor, ``max_elements`` the largest tensor (input or output) in elements;
    ``implementations`` the canonical implementations the kind runs, in order of preference."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: OpName
    implementations: list[OpName] | None = Field(default=None, min_length=1, max_length=MAX_ENTRIES)
    kernel_shape: list[list[Positive]] | None = Field(default=None, min_length=1, max_length=MAX_ENTRIES)
    strides: list[list[Positive]] | None = Field(default=None, min_length=1, max_length=MAX_ENTRIES)
    group: list[Positive] | None = Field(default=None, min_length=1, max_length=MAX_ENTRIES)
    dtypes: list[DType] | None = Field(default=None, min_length=1, max_length=MAX_ENTRIES)
    max_elements: Positive | None = None

    def violation(self, instance: OpInstance) -> str | None:
        """Which constraint ``instance`` violates (one phrase), or None when the rule admits it."""
        for name in ("kernel_shape", "strides"):
            allowed = getattr(self, name)
            value = instance.attributes.get(name)
            if allowed is not None and value is not None and list(value) not in allowed:
                return f"{name} {_shape(value)} not in {', '.join(_shape(a) for a in allowed)}"
        value = instance.attributes.get("group")
        if self.group is not None and value is not None and value not in self.group:
            return f"group {value} not in {', '.join(map(str, self.group))}"
        if self.dtypes is not None:
            wrong = sorted(set(instance.dtypes) - set(self.dtypes))
            if wrong:
                return f"dtype {wrong[0]} not in {', '.join(self.dtypes)}"
        if self.max_elements is not None and instance.max_elements > self.max_elements:
            return f"a tensor of {instance.max_elements} elements exceeds max_elements {self.max_elements}"
        return None


def _shape(values: Sequence[int]) -> str:
    return "x".join(str(v) for v in values)


def pattern_ops(pattern: str) -> list[str]:
    """The ops of a composite pattern (``"Conv+Relu"`` -> ``["Conv", "Relu"]``)."""
    return pattern.split("+")


def check_support(
    ops: Sequence[str], role: UnitRole, support: Sequence[SupportRule] | None, patterns: Sequence[str]
) -> None:
    """The consistency of a unit kind's declarations (raises ValueError, reported by pydantic): a host
    runs every op; a support rule names an op of ``ops`` (or ``ops`` is ``"*"``), once; so does every
    op of a pattern (its tasks are costed on the kind)."""
    if role == UnitRole.HOST and "*" not in ops:
        raise ValueError('a host runs every op: its ops must be ["*"]')
    for index, pattern in enumerate(patterns):
        missing = [op for op in pattern_ops(pattern) if "*" not in ops and op not in ops]
        if missing:
            raise ValueError(f"patterns.{index}: '{missing[0]}' is not in the unit's ops")
    seen = set()
    for index, rule in enumerate(support or ()):
        if "*" not in ops and rule.op not in ops:
            raise ValueError(f"support.{index}.op: '{rule.op}' is not in the unit's ops")
        if rule.op in seen:
            raise ValueError(f"support.{index}.op: a second rule for '{rule.op}'")
        seen.add(rule.op)


@dataclass(frozen=True)
class OpInstance:
    """One operator of the imported graph, as the support rules see it: its node name, op type, the
    constraint attributes it has (``kernel_shape``, ``strides``, ``group``), the element types of its
    tensors, its largest tensor in elements, and the operators whose outputs it reads."""

    name: str
    op: str
    attributes: Mapping[str, int | tuple[int, ...]] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ()
    max_elements: int = 0
    producers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Annotation:
    """Where an operator runs and why: ``target`` a unit kind (None: no unit runs it), ``offloaded``
    whether that kind is part of the accelerator, ``reason`` one phrase, ``pattern`` the composite it
    was matched in, ``implementations`` the canonical implementations the kind allows (None: any)."""

    target: str | None
    offloaded: bool
    reason: str
    pattern: str | None = None
    implementations: tuple[str, ...] | None = None


class _Kind:
    """A unit kind's declarations, read once: its rules by op."""

    def __init__(self, name: str, unit) -> None:
        self.name = name
        self.unit = unit
        self.rules = None if unit.support is None else {rule.op: rule for rule in unit.support}

    def rule_verdict(self, instance: OpInstance) -> tuple[bool, str | None]:
        """Whether the kind runs ``instance`` by itself, and the violated constraint (None if none)."""
        if self.rules is None:
            return ("*" in self.unit.ops or instance.op in self.unit.ops), None
        rule = self.rules.get(instance.op)
        if rule is None:
            return False, None
        problem = rule.violation(instance)
        return problem is None, problem

    def implementations(self, op: str) -> tuple[str, ...] | None:
        rule = None if self.rules is None else self.rules.get(op)
        return None if rule is None or rule.implementations is None else tuple(rule.implementations)


def match_patterns(patterns: Sequence[str], instances: Sequence[OpInstance]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Node name -> (pattern, the matched chain) for every node in a match. A chain n0 -> n1 -> ... matches
    when its ops are the pattern's and each node but the last is read by the next one only; a node is in
    at most one match (patterns in declaration order, heads in program order)."""
    consumers: dict[str, list[str]] = {instance.name: [] for instance in instances}
    for instance in instances:
        for producer in dict.fromkeys(instance.producers):
            if producer in consumers:
                consumers[producer].append(instance.name)
    by_name = {instance.name: instance for instance in instances}
    matched: dict[str, tuple[str, tuple[str, ...]]] = {}
    for pattern in patterns:
        ops = pattern_ops(pattern)
        for head in instances:
            if head.op != ops[0]:
                continue
            chain = [head.name]
            for op in ops[1:]:
                following = consumers[chain[-1]]
                if len(following) != 1 or by_name[following[0]].op != op:
                    break
                chain.append(following[0])
            if len(chain) == len(ops) and not matched.keys() & set(chain):
                matched.update(dict.fromkeys(chain, (pattern, tuple(chain))))
    return matched


def annotate(units: Mapping[str, object], instances: Sequence[OpInstance]) -> dict[str, Annotation]:
    """Every operator's target: the first accelerator unit kind (in ``units`` order, a mapping name ->
    :class:`~dcaccel.architecture.Unit`) that runs it by a support rule or inside a matched pattern (each
    member passing its own rule when it has one), else the host kind with the reason (``unsupported op``
    or the first violated constraint). Without a host such a node has target None."""
    kinds = [_Kind(name, unit) for name, unit in units.items() if unit.role == UnitRole.ACCELERATOR]
    host = next((name for name, unit in units.items() if unit.role == UnitRole.HOST), None)
    verdicts = {kind.name: {i.name: kind.rule_verdict(i) for i in instances} for kind in kinds}
    matches = {kind.name: match_patterns(kind.unit.patterns, instances) for kind in kinds}
    annotations = {}
    for instance in instances:
        problems = []
        chosen = None
        for kind in kinds:
            runs, problem = verdicts[kind.name][instance.name]
            if problem is not None:
                problems.append(f"{kind.name}: {problem}")
            pattern, chain = matches[kind.name].get(instance.name, (None, ()))
            broken = next((member for member in chain if verdicts[kind.name][member][1] is not None), None)
            implementations = kind.implementations(instance.op)
            if pattern is not None and broken is None:
                reason = f"pattern {pattern} on {kind.name}"
                chosen = Annotation(kind.name, True, reason, pattern, implementations)
            elif runs:
                chosen = Annotation(kind.name, True, f"supported by {kind.name}", None, implementations)
            elif broken is not None and broken != instance.name:
                problem = verdicts[kind.name][broken][1]
                problems.append(f"{kind.name}: pattern {pattern} broken by {broken} ({problem})")
            if chosen is not None:
                break
        if chosen is None:
            reason = f"constraint violated ({'; '.join(problems)})" if problems else f"unsupported op {instance.op}"
            chosen = Annotation(host, False, reason)
        annotations[instance.name] = chosen
    return annotations
