"""Partitioning a workload between an accelerator and its host, on the imported graph and its lowering
(TVM's annotate-target, merge-compiler-regions and partition-graph passes, on dcaccel's canonical model).

The transforms stage of ``dcaccel.partition`` (:mod:`dcaccel.partitioning` runs the whole chain):

1. **Annotate** (:func:`annotations_of`). Every operator of the imported graph (:func:`op_instances`) gets
   the first accelerator unit kind whose support declarations run it
   (:func:`dcaccel.architecture.support.annotate`: support rules with constraints, composite patterns),
   else the architecture's host with the reason (unsupported op, the violated constraint); an operator that
   lowering keeps as an opaque task (:func:`dcaccel.transforms.lower.opaque_node`) runs on the host whatever the
   kinds declare: one with no canonical implementation (reason :data:`NO_LOWERING`), or one the check of its
   implementation refuses (reason the refusal, ``canonical refuses it: sampling_ratio=0 ...``).
2. **Regions** (:func:`regions_of`). Maximal connected sets of offloaded operators (operators joined by a
   tensor one produces and the other reads) are the accelerator regions.
3. **Policy.** ``greedy`` offloads every region; ``min-region`` keeps a region on the host when it has
   fewer than ``min_nodes`` operators or less than ``min_work_share`` of the work (:func:`too_small`,
   reason "region too small"); ``cost`` compares schedules, so its loop lives with the orchestration.
4. **Lower** (:func:`lower_partitioned`). Host operators keep DaCe's default expansions (each one opaque
   task, ``lower(..., host=...)``); offloaded operators use the canonical implementation chosen for them
   (the user's choice when the unit kind allows it, else the first implementation its support rule lists,
   else the default).

Placing the extracted DAG on units is :mod:`dcaccel.dag.placement`; the link units are
:mod:`dcaccel.architecture.links`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import dace
from dace.libraries.onnx.nodes.onnx_op import ONNXOp

from dcaccel.architecture import Architecture
from dcaccel.architecture.support import Annotation, OpInstance, annotate
from dcaccel.errors import DcaccelError
from dcaccel.frontend.ops import library_nodes, op_type
from dcaccel.transforms.lower import ExpansionCache, LoweredWorkload, OpaqueOpWarning, lower, opaque_reasons

#: The partitioning policies.
POLICIES = ("greedy", "min-region", "cost")
#: Why a region kept on the host by ``min-region`` is there.
TOO_SMALL = "region too small"
#: The reason an operator without a canonical implementation runs on the host (DaCe's expansion, or onnxruntime).
NO_LOWERING = "no canonical implementation"

_CONSTRAINED_ATTRIBUTES = ("kernel_shape", "strides", "group")


def check_policy(policy: str, min_work_share: float) -> None:
    """Raise a one-line error for an unknown policy or a work share outside [0, 1]."""
    if policy not in POLICIES:
        raise DcaccelError(f"unknown partition policy '{policy}' (choose from {', '.join(POLICIES)})")
    check_work_share(min_work_share)


def check_work_share(min_work_share: float) -> None:
    """Raise a one-line error for a ``min-region`` work share outside [0, 1]."""
    if not 0 <= min_work_share <= 1:
        raise DcaccelError(f"min_work_share must be between 0 and 1, got {min_work_share}")


# ---------------------------------------------------------------- the imported graph


def op_instances(workload) -> list[OpInstance]:
    """The operators of ``workload``'s SDFG as the support rules see them (program order): constraint
    attributes (a Conv's kernel shape from its weight when the attribute is absent), element types,
    the largest tensor in elements (sizes at the workload's symbols), and the operators they read from."""
    symbols = dict(getattr(workload, "symbols", {}) or {})
    pairs = library_nodes(workload.sdfg)
    producer = {}
    for node, state in pairs:
        for edge in state.out_edges(node):
            producer[edge.data.data] = node.label
    instances = []
    for node, state in pairs:
        edges = [*state.in_edges(node), *state.out_edges(node)]
        descs = [state.sdfg.arrays[e.data.data] for e in edges if e.data.data is not None]
        attributes = {}
        for name in _CONSTRAINED_ATTRIBUTES:
            value = getattr(node, name, None) if isinstance(node, ONNXOp) else None
            if value is not None and value != []:
                attributes[name] = value if isinstance(value, int) else tuple(int(v) for v in value)
        if op_type(node) == "Conv" and "kernel_shape" not in attributes:
            weights = [e for e in state.in_edges(node) if e.dst_conn == "W"]
            if weights:
                shape = state.sdfg.arrays[weights[0].data.data].shape
                attributes["kernel_shape"] = tuple(int(_size(d, symbols)) for d in shape[2:])
        instances.append(
            OpInstance(
                name=node.label,
                op=op_type(node),
                attributes=attributes,
                dtypes=tuple(sorted({desc.dtype.type.__name__ for desc in descs})),
                max_elements=max((_elements(desc.shape, symbols) for desc in descs), default=0),
                producers=tuple(
                    dict.fromkeys(producer[e.data.data] for e in state.in_edges(node) if e.data.data in producer)
                ),
            )
        )
    return instances


def _size(dimension, symbols: Mapping[str, int]) -> int:
    return int(dace.symbolic.evaluate(dimension, symbols)) if dace.symbolic.issymbolic(dimension) else int(dimension)


def _elements(shape, symbols: Mapping[str, int]) -> int:
    try:
        return math.prod(_size(d, symbols) for d in shape)
    except (TypeError, KeyError, ValueError):  # a size left symbolic: no element count to check
        return 0


def regions_of(instances: list[OpInstance], offloaded: set[str]) -> list[list[str]]:
    """Maximal connected sets of ``offloaded`` operators, each in program order, ordered by first node."""
    parent = {name: name for name in offloaded}

    def find(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for instance in instances:
        if instance.name in offloaded:
            for producer in instance.producers:
                if producer in offloaded:
                    parent[find(producer)] = find(instance.name)
    groups: dict[str, list[str]] = {}
    for instance in instances:
        if instance.name in offloaded:
            groups.setdefault(find(instance.name), []).append(instance.name)
    return list(groups.values())


def annotations_of(
    workload, arch: Architecture, host: str | None, choices: Mapping[str, str] | None = None
) -> tuple[list[OpInstance], dict[str, Annotation]]:
    """The operators of ``workload`` and their annotation on ``arch`` (see the module docstring), the opaque
    tasks those of its lowering under ``choices``. Raises when an operator no accelerator kind runs has no host
    to run it."""
    instances = op_instances(workload)
    annotations = annotate(arch.units, instances)
    for name, opaque in opaque_reasons(workload.sdfg, choices).items():  # nothing an accelerator kind could run
        annotations[name] = Annotation(host, False, NO_LOWERING if opaque.refused_by is None else opaque.why)
    for instance in instances:
        if annotations[instance.name].target is None:
            raise DcaccelError(
                f"architecture {arch.name} has no host (a unit of role: host) to run {instance.op} node "
                f"'{instance.name}' ({annotations[instance.name].reason})"
            )
    return instances, annotations


def too_small(
    groups: Sequence[Sequence[str]], work: Mapping[str, int], min_nodes: int, min_work_share: float
) -> dict[int, str]:
    """The ``min-region`` decision: the regions (by index) kept on the host, with the reason, because they
    have fewer than ``min_nodes`` operators or less than ``min_work_share`` of the total ``work``
    (operator -> Σ T(v) of its tasks)."""
    total = sum(work.values()) or 1
    kept = {}
    for index, group in enumerate(groups):
        share = sum(work.get(name, 0) for name in group) / total
        if len(group) < min_nodes or share < min_work_share:
            kept[index] = f"{TOO_SMALL} ({len(group)} node(s), {share:.1%} of the work)"
    return kept


def lower_partitioned(
    workload,
    annotations: Mapping[str, Annotation],
    on_host: set[str],
    choices: Mapping[str, str],
    expansions: ExpansionCache | None = None,
) -> LoweredWorkload:
    """Lower with the host nodes as DaCe's opaque tasks and every offloaded node on an implementation its
    unit kind allows (:func:`partition_choices`); ``expansions``: the cache of the workload's earlier
    lowerings (``lower``'s)."""
    chosen = partition_choices(workload, annotations, on_host, choices)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpaqueOpWarning)  # the host's nodes are DaCe's opaque tasks by design
        return lower(workload, chosen, host=on_host, expansions=expansions)


def partition_choices(
    workload, annotations: Mapping[str, Annotation], on_host: set[str], choices: Mapping[str, str]
) -> dict[str, str]:
    """The choices :func:`lower_partitioned` lowers with: ``choices``, every offloaded node on an
    implementation its unit kind allows (the choice by node name or op type when allowed, else the first
    allowed), none for a host node. Two partitions with the same choices and host nodes lower to the same
    program, whatever their architectures."""
    chosen = dict(choices)
    for node, _ in library_nodes(workload.sdfg):
        allowed = annotations[node.label].implementations
        if node.label in on_host or allowed is None:
            continue
        wanted = choices.get(node.label, choices.get(op_type(node)))
        chosen[node.label] = wanted if wanted in allowed else allowed[0]
    for name in on_host:
        chosen.pop(name, None)
    return chosen
