"""The load stage: the workload a study names, and what the sweep checks on it before anything is lowered
(its op types and nodes, the implementations asked for, the ops without a canonical implementation, the
architectures' units for its ops) and what its numbers depend on (:func:`fingerprint`).
"""

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dcaccel.architecture import Architecture
from dcaccel.errors import DcaccelError
from dcaccel.frontend import ops
from dcaccel.frontend.execution import program_fingerprint
from dcaccel.frontend.ops import library_nodes
from dcaccel.transforms.lower import (
    OpaqueOpWarning,
    available_implementations,
    describe_opaque,
    op_type,
    opaque_reasons,
    refuse_opaque,
)
from dcaccel.transforms.opaque import fallback_implementation


def fingerprint(workload) -> dict[str, object]:
    """What the numbers of ``workload`` depend on besides its name: its program
    (:func:`~dcaccel.frontend.execution.program_fingerprint`: operators, shapes, attributes) and the values
    of its symbolic sizes; one entry each, named after the workload."""
    return {
        f"program of {workload.name}": program_fingerprint(workload.sdfg),
        f"sizes of {workload.name}": dict(sorted(workload.symbols.items())),
    }


def nodes_by_op_type(workload) -> dict[str, list[str]]:
    """Names of the workload's library nodes per op type, in program order."""
    return ops.nodes_by_op_type(workload.sdfg)


def default_implementations(workload) -> dict[str, list[str]]:
    """Per op type of ``workload``, dcaccel's implementations, for the op types that have a choice."""
    choices: dict[str, list[str]] = {}
    for node, _ in library_nodes(workload.sdfg):
        available = available_implementations(node)
        if len(available) > 1:
            choices.setdefault(op_type(node), available)
    return choices


def check_implementations(workload, implementations: Mapping[str, Sequence[str]]) -> None:
    """Raise :class:`DcaccelError` for an implementation a node named by ``implementations`` (through its
    op type or its name) does not have, before anything is lowered."""
    for node, _ in library_nodes(workload.sdfg):
        op = op_type(node)
        names = [*implementations.get(op, ()), *implementations.get(node.label, ())]
        available = available_implementations(node)
        for name in names:
            if name not in available:
                raise DcaccelError(
                    f"{op} node '{node.label}': no implementation '{name}'; available: {', '.join(available) or 'none'}"
                )


def drop_unknown_keys(workload, implementations: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """``implementations`` without the keys that name no op type or node of ``workload`` (with one
    warning naming them), each key's implementations without repeats, in order."""
    known = set(ops.choice_keys(workload.sdfg))
    unknown = [key for key in implementations if key not in known]
    if unknown:
        warnings.warn(
            f"explore {workload.name}: no node or op type named {', '.join(map(repr, unknown))}; ignored",
            UserWarning,
            stacklevel=3,
        )
    return {key: list(dict.fromkeys(names)) for key, names in implementations.items() if key in known}


def report_opaque(workload, strict: bool) -> None:
    """Refuse (``strict``) or announce in one warning the nodes of ``workload`` that are lowered as opaque tasks
    (no canonical implementation, or one whose check refuses them: :func:`~dcaccel.transforms.lower.opaque_node`).
    A node that DaCe cannot expand either would fail every assignment: it is refused (:class:`UnsupportedOpError`,
    as ``lower`` and ``dcaccel dag`` refuse it)."""
    if strict:
        refuse_opaque(workload.sdfg)
    opaque = opaque_reasons(workload.sdfg)
    if not opaque:
        return
    for node, state in library_nodes(workload.sdfg):
        if node.label in opaque:
            fallback_implementation(node, state, refused=opaque[node.label].refused_by is not None)
    warnings.warn(
        f"explore {workload.name}: {len(opaque)} node(s) with no canonical implementation lowered as opaque "
        "tasks: " + describe_opaque(opaque),
        OpaqueOpWarning,
        stacklevel=3,
    )


def check_ops_run(workload, archs: Sequence[Architecture]) -> None:
    """Refuse an architecture with no unit kind that runs an op of ``workload`` (``ops`` holding it or
    ``"*"``): every task of that op, so every assignment, would fail to be costed or placed on it."""
    ops = dict.fromkeys(op_type(node) for node, _ in library_nodes(workload.sdfg))
    for arch in archs:
        for op in ops:
            arch.unit_for(op)


@dataclass(frozen=True)
class LoadedModel:
    """A model of a study, loaded: its workload, and whether worker processes rebuild it by its name (a
    built-in workload at its own sizes) rather than receive it pickled."""

    workload: object
    builtin: bool = False


def load_model(spec: str, symbols: Mapping[str, int]) -> LoadedModel:
    """The model ``spec`` names (a built-in workload, an ONNX file, ``path/to/file.py:attribute``:
    :func:`dcaccel.frontend.load.resolve`), its symbolic sizes given by ``symbols``."""
    from dcaccel import workloads
    from dcaccel.frontend.load import resolve

    if spec in workloads.names() and not symbols:
        return LoadedModel(workloads.get(spec), builtin=True)
    return LoadedModel(resolve(spec, symbols=dict(symbols) or None))
