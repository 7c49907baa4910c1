"""Implementation assignments: which canonical implementation each node of a workload gets.

An assignment maps an op type or a node name to an implementation name, the same mapping
``Workload.lower`` takes (a node name wins over its op type). Three enumeration strategies:

- ``per-op-type``: the product over the keys (op types, and node names as keys of their own): every
  node of an op type not named itself gets the op type's implementation.
- ``per-node``: the full product over the nodes the keys cover (capped by ``max_assignments``).
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

    def effective(self, nodes_by_op: Mapping[str, Sequence[str]]) -> "Assignment":
        """The choices that decide a node's implementation: keys that name a node, and op types with a
        node that is not named itself (a key naming neither is dropped), in the same order."""
        named = {node for nodes in nodes_by_op.values() for node in nodes} & set(self.as_dict())
        return Assignment(
            tuple(
                (key, implementation)
                for key, implementation in self.choices
                if key in named or any(node not in named for node in nodes_by_op.get(key, ()))
            )
        )

    def lowered(self, implementations: Mapping[str, str], nodes_by_op: Mapping[str, Sequence[str]]) -> "Assignment":
        """What the keys of :meth:`effective` got in a lowering whose implementation per node name is
        ``implementations``: a node key its node's, an op-type key the one implementation its unnamed
        nodes share (each of them by name when they differ)."""
        effective = self.effective(nodes_by_op)
        keys = effective.as_dict()
        choices: list[tuple[str, str]] = []
        for key, _ in effective.choices:
            nodes = [key]
            if key in nodes_by_op:
                nodes = [node for node in nodes_by_op[key] if node not in keys]
                used = set(map(implementations.__getitem__, nodes))
                if len(used) == 1:
                    choices.append((key, used.pop()))
                    continue
            choices.extend((node, implementations[node]) for node in nodes)
        return Assignment(tuple(choices))


def per_op_type(implementations: Mapping[str, Sequence[str]]) -> Iterator[Assignment]:
    """Every key (op type or node name) gets one implementation; yields the product over the keys in
    input order."""
    keys = list(implementations)
    for combo in itertools.product(*(implementations[key] for key in keys)):
        yield Assignment(tuple(zip(keys, combo, strict=True)))


def node_candidates(
    nodes_by_op: Mapping[str, Sequence[str]], implementations: Mapping[str, Sequence[str]]
) -> list[tuple[str, list[str]]]:
    """Every node that ``implementations`` covers with the implementations it may take, in the order of
    the keys (an op type's nodes in program order): a node named as a key takes that key's, any other
    node of a listed op type the op type's.

    ``nodes_by_op`` maps an op type to the names of its nodes in program order.
    """
    nodes = {node for names in nodes_by_op.values() for node in names}
    found: dict[str, list[str]] = {}
    for key, names in implementations.items():
        covered = [key] if key in nodes else [node for node in nodes_by_op.get(key, ()) if node not in implementations]
        for node in covered:
            found.setdefault(node, list(names))
    return list(found.items())


def per_node(
    nodes_by_op: Mapping[str, Sequence[str]],
    implementations: Mapping[str, Sequence[str]],
    max_assignments: int,
) -> Iterator[Assignment]:
    """The full product over the nodes :func:`node_candidates` lists: each chooses freely among its
    implementations. Raises a :class:`DcaccelError` when the product exceeds ``max_assignments``."""
    candidates = node_candidates(nodes_by_op, implementations)
    count = math.prod(len(names) for _, names in candidates)
    if count > max_assignments:
        raise DcaccelError(
            f"per-node exploration has {count:,} assignments ({len(candidates)} nodes), more than "
            f"max_assignments={max_assignments:,}: use strategy 'per-op-type' or 'greedy', or raise the cap"
        )
    for combo in itertools.product(*(names for _, names in candidates)):
        yield Assignment(tuple(zip((node for node, _ in candidates), combo, strict=True)))
