"""Implementation assignments: which canonical implementation each node of a workload gets.

An assignment maps an op type or a node name to an implementation name, the same mapping
``Workload.lower`` takes. Three enumeration strategies:

- ``per-op-type``: every node of an op type gets the same implementation; the product over op types.
- ``per-node``: the full product over nodes (capped by ``max_assignments``).
- ``greedy``: one node at a time, trying each of its implementations with the others fixed, keeping
  the best under an objective; needs an evaluation callback, so it lives in the sweep.
"""

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from dcaccel.errors import DcaccelError

STRATEGIES = ("per-op-type", "per-node", "greedy")


@dataclass(frozen=True)
class Assignment:
    """One choice of implementations, keyed by op type or node name, in a stable order."""

    choices: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, mapping: Mapping[str, str]) -> "Assignment":
        return cls(tuple(mapping.items()))

    def as_dict(self) -> dict[str, str]:
        return dict(self.choices)

    def replace(self, key: str, implementation: str) -> "Assignment":
        return Assignment(tuple((k, implementation if k == key else v) for k, v in self.choices))

    def __str__(self) -> str:
        return ",".join(f"{key}={impl}" for key, impl in self.choices) or "default"


def per_op_type(implementations: Mapping[str, Sequence[str]]) -> Iterator[Assignment]:
    """Every op type gets one implementation; yields the product over op types in input order."""
    keys = list(implementations)
    for combo in itertools.product(*(implementations[key] for key in keys)):
        yield Assignment(tuple(zip(keys, combo, strict=True)))


def per_node(
    nodes_by_op: Mapping[str, Sequence[str]],
    implementations: Mapping[str, Sequence[str]],
    max_assignments: int,
) -> Iterator[Assignment]:
    """The full product over nodes: each node of an op type in ``implementations`` chooses freely.

    ``nodes_by_op`` maps an op type to the names of its nodes in program order. Raises a
    :class:`DcaccelError` when the product exceeds ``max_assignments``.
    """
    nodes = [(node, op) for op in implementations for node in nodes_by_op.get(op, ())]
    count = math.prod(len(implementations[op]) for _, op in nodes)
    if count > max_assignments:
        raise DcaccelError(
            f"per-node exploration has {count:,} assignments ({len(nodes)} nodes), more than "
            f"max_assignments={max_assignments:,}: use strategy 'per-op-type' or 'greedy', or raise the cap"
        )
    for combo in itertools.product(*(implementations[op] for _, op in nodes)):
        yield Assignment(tuple(zip((node for node, _ in nodes), combo, strict=True)))
