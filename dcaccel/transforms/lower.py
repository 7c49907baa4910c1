"""Full lowering: every library node of a workload to a canonical implementation, then maps only.

``lower(workload, choices)`` picks an implementation for every library node (ONNX nodes, and the
DaCe library nodes a ``@dace.program`` produces), expands them until no library node is left,
inlines every nested SDFG and simplifies without destroying the canonical structure (Contract 3:
the operand copies and im2col containers must survive), then marks the program inputs and outputs
as ``PROGRAM_IO`` buffers.

Choice resolution, per library node: its name in ``choices``, else its op type in ``choices``, else
the implementation already set on the node if dcaccel has it, else the default — ``"canonical"``
for every op, the MMM's default shape (``"mv"``) for the matrix products (Conv, Gemm, MatMul, ``@``
and MMM nodes). The op type of an ONNX node is its ONNX op (``"Conv"``); a
DaCe matrix product (``dace.libraries.blas`` ``MatMul``) is ``"MatMul"``; any other DaCe library node
is its class name (``"Inv"``, ``"Transpose"``) and needs a dcaccel implementation registered on its
class. Library nodes that an expansion creates with an implementation already set (the MMM nodes of
a Conv) keep it; those created without one are resolved like the workload's own nodes. The chosen
implementation's ``check`` runs on every node before anything is expanded.

A node with no dcaccel implementation at all, or one the check of its implementation refuses
(:class:`UnsupportedOpError`: a CumSum along an axis that is data, RoiAlign's adaptive sampling), becomes an
opaque task (:mod:`dcaccel.transforms.opaque`): DaCe's own implementation expands it into one nested SDFG that is
kept whole and marked, or onnxruntime runs it on the host; the ``LoweredWorkload`` lists it in ``opaque``
and why in ``opaque_reasons``, and one warning (:class:`OpaqueOpWarning`) names every such node (with the
refusal, for a refused one). ``strict=True`` refuses it instead, with :class:`UnsupportedOpError` naming the
node and why, the graph untouched; so does naming such a node or its op type in ``choices`` (nothing to
choose, or a choice that does not apply). :func:`opaque_node` is that rule, applied before anything is
lowered by :func:`opaque_reasons` (``dcaccel info``, the sweep's warning, a partition's annotation) and
:func:`refuse_opaque` (the CLI's ``--strict``).
"""

import contextlib
import copy
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import dace
from dace.sdfg import nodes
from dace.sdfg.utils import inline_sdfgs
from dace.transformation.passes.simplify import SimplifyPass

from dcaccel.buffers import BufferReason, mark_buffer
from dcaccel.errors import DcaccelError, ImportedShapeError, UnsupportedOpError
from dcaccel.expansions import register
from dcaccel.expansions.implementation import CANONICAL
from dcaccel.expansions.mmm import MMM
from dcaccel.expansions.registry import implementation_of, node_implementations
from dcaccel.frontend.ops import library_nodes, op_type
from dcaccel.transforms.opaque import OpaqueOpWarning, expand_opaque, fallback_implementation
from dcaccel.transforms.opaque_mark import is_opaque

__all__ = [
    "NO_IMPLEMENTATION",
    "LoweredWorkload",
    "OpaqueNode",
    "OpaqueOpWarning",
    "SourceNode",
    "available_implementations",
    "chosen_implementation",
    "describe_opaque",
    "expand_all",
    "lower",
    "lowered_implementation",
    "op_type",
    "opaque_node",
    "opaque_nodes",
    "opaque_reasons",
    "refuse_opaque",
]

# Simplification passes that break the canonical structure: ArrayElimination removes containers that
# are only copied on as redundant (the im2col X_col copied into the MMM operand buffer ``_b_copy``),
# which would change the buffer nodes of Contract 3.
STRUCTURE_BREAKING_PASSES = frozenset({"ArrayElimination"})


@dataclass(frozen=True)
class SourceNode:
    """The library node of the source program that a map scope of the lowered SDFG implements."""

    node: str  # the node's name (e.g. "conv1")
    op_type: str  # its op type (e.g. "Conv")
    implementation: str  # the implementation it was lowered with


@dataclass
class LoweredWorkload:
    """A workload lowered to maps: the fully lowered SDFG and the implementation chosen per node."""

    workload: Any  # the source Workload (None when lower() was given a bare SDFG)
    sdfg: dace.SDFG
    implementations: dict[str, str] = field(default_factory=dict)  # node name -> implementation name
    unused_choices: dict[str, str] = field(default_factory=dict)  # choices naming no node or op type
    origins: dict[nodes.Node, SourceNode] = field(default_factory=dict)  # map scope / opaque task -> node it lowers
    opaque: dict[str, str] = field(default_factory=dict)  # node name -> op type, nodes kept as opaque tasks
    opaque_reasons: dict[str, "OpaqueNode"] = field(default_factory=dict)  # node name -> why it is an opaque task


def available_implementations(node: nodes.LibraryNode) -> list[str]:
    """Names of dcaccel's implementations that can expand ``node``."""
    register()
    return node_implementations(node)


def _default_implementation(available: list[str]) -> str | None:
    if CANONICAL in available:
        return CANONICAL
    if MMM.default_implementation in available:
        return MMM.default_implementation
    return None


def chosen_implementation(node: nodes.LibraryNode, choices: Mapping[str, str]) -> str | None:
    """The implementation :func:`lower` gives ``node`` under ``choices``: its name in ``choices``, else its
    op type, else the implementation already set on it (if dcaccel has it), else the default; None when
    dcaccel has none (an opaque task). Nothing is checked or expanded: :func:`lowered_implementation` also
    says None when that implementation refuses the node."""
    available = available_implementations(node)
    if not available:
        return None
    preset = node.implementation if node.implementation in available else None
    return choices.get(node.label, choices.get(op_type(node), preset or _default_implementation(available)))


#: Why a node dcaccel has no implementation of is an opaque task (and the detail of ``strict``'s refusal of it).
NO_IMPLEMENTATION = "no dcaccel implementation"
#: Why a node a partition puts on the host is an opaque task (:mod:`dcaccel.transforms.offload`).
ON_THE_HOST = "on the host side of a partition"


@dataclass(frozen=True)
class OpaqueNode:
    """A library node that lowering keeps as an opaque task, and why: dcaccel has no implementation of it
    (``reason`` :data:`NO_IMPLEMENTATION`), or the check of the implementation it was given (``refused_by``)
    refuses it (``reason``: the refusal's detail, as :class:`UnsupportedOpError` words it)."""

    op: str
    reason: str
    refused_by: str | None = None

    @property
    def why(self) -> str:
        """The reason in one phrase: ``no dcaccel implementation``, ``canonical refuses it: equation ...``."""
        return self.reason if self.refused_by is None else f"{self.refused_by} refuses it: {self.reason}"


def opaque_node(
    node: nodes.LibraryNode, state: dace.SDFGState, choices: Mapping[str, str], strict: bool = False
) -> OpaqueNode | None:
    """Whether lowering keeps ``node`` as an opaque task under ``choices``, and why; None when it lowers with
    the implementation it is given (:func:`chosen_implementation`). The one rule of it (lowering,
    :func:`opaque_nodes`, :func:`refuse_opaque` and a partition's annotation apply it): an opaque task when dcaccel
    has no implementation of the node, or when the check of the implementation it is given raises
    :class:`UnsupportedOpError` (a CumSum along an axis that is data, RoiAlign's adaptive sampling) and the user
    did not name the node or its op type in ``choices``. With ``strict``, or when ``choices`` name it, that raises
    instead (:class:`UnsupportedOpError` naming op and node), as does a node whose imported shapes are not its
    op's (:class:`ImportedShapeError`: the host could not write its output either); an implementation the node
    does not have raises :class:`DcaccelError` listing those it has. Nothing is expanded."""
    op = op_type(node)
    named = node.label in choices or op in choices
    available = available_implementations(node)
    if not available:
        if strict or named:
            raise UnsupportedOpError(op, node.label, NO_IMPLEMENTATION)
        return OpaqueNode(op, NO_IMPLEMENTATION)
    chosen = chosen_implementation(node, choices)
    if chosen not in available:
        raise DcaccelError(f"{op} node '{node.label}': no implementation '{chosen}'; available: {', '.join(available)}")
    try:
        implementation_of(node, chosen).expansion.check(node, state, state.sdfg)
    except UnsupportedOpError as refusal:
        if strict or named or isinstance(refusal, ImportedShapeError):
            raise
        return OpaqueNode(op, refusal.detail, chosen)
    return None


def lowered_implementation(node: nodes.LibraryNode, state: dace.SDFGState, choices: Mapping[str, str]) -> str | None:
    """The implementation ``node`` is lowered with under ``choices`` (:func:`chosen_implementation`), None when it
    becomes an opaque task (:func:`opaque_node`); raises where lowering would. Nothing is expanded."""
    return None if opaque_node(node, state, choices) is not None else chosen_implementation(node, choices)


def _resolve(
    node: nodes.LibraryNode,
    state: dace.SDFGState,
    choices: dict[str, str],
    seen: set[str],
    strict: bool,
    host: frozenset[str] = frozenset(),
) -> tuple[str, OpaqueNode | None]:
    """Choose ``node``'s implementation and check that it applies (:func:`opaque_node`); adds the node's name and
    op type to ``seen``. Returns the implementation and, for a node that becomes an opaque task, why: the rule of
    :func:`opaque_node`, or its name in ``host`` (it runs on the host, dcaccel.transforms.offload). An opaque
    task's implementation is DaCe's or the host's (:func:`~dcaccel.transforms.opaque.fallback_implementation`);
    when neither can run a node its implementation refused, the error gives both reasons (:func:`_with_refusal`)."""
    op = op_type(node)
    seen.update((node.label, op))
    opaque = OpaqueNode(op, ON_THE_HOST) if node.label in host else opaque_node(node, state, choices, strict)
    if opaque is None:
        return chosen_implementation(node, choices), None
    try:
        return fallback_implementation(node, state, refused=opaque.refused_by is not None), opaque
    except UnsupportedOpError as failure:
        raise _with_refusal(node, opaque, failure) from failure


def _with_refusal(node: nodes.LibraryNode, opaque: OpaqueNode, failure: UnsupportedOpError) -> UnsupportedOpError:
    """The error for ``node``, an opaque task because of ``opaque``, that neither DaCe nor onnxruntime runs
    (``failure``): ``failure`` itself, or for a node its implementation refused, the refusal then the failure
    (``exclusive=5 (0 or 1); onnxruntime cannot run it on the host: ...``)."""
    if opaque.refused_by is None:
        return failure
    detail = failure.detail if failure.node_name == node.label else str(failure)  # a node DaCe's expansion made
    return UnsupportedOpError(opaque.op, node.label, f"{opaque.reason}; {detail}")


def opaque_reasons(sdfg: dace.SDFG, choices: Mapping[str, str] | None = None) -> dict[str, OpaqueNode]:
    """The library nodes of ``sdfg`` that lowering under ``choices`` would keep as opaque tasks, and why
    (:func:`opaque_node`), by name in program order. Raises where lowering would (a node ``choices`` name that
    its implementation refuses). Nothing is expanded."""
    choices = choices or {}
    found = ((node, opaque_node(node, state, choices)) for node, state in library_nodes(sdfg))
    return {node.label: opaque for node, opaque in found if opaque is not None}


def opaque_nodes(sdfg: dace.SDFG, choices: Mapping[str, str] | None = None) -> dict[str, str]:
    """The library nodes of ``sdfg`` that lowering under ``choices`` would keep as opaque tasks, name -> op type,
    in program order (:func:`opaque_reasons` says why). Nothing is expanded."""
    return {name: opaque.op for name, opaque in opaque_reasons(sdfg, choices).items()}


def refuse_opaque(sdfg: dace.SDFG, choices: Mapping[str, str] | None = None) -> None:
    """Raise the error of ``lower(..., choices, strict=True)`` for the first node of ``sdfg`` that lowering would
    keep as an opaque task (:func:`opaque_node`), before anything is lowered."""
    for node, state in library_nodes(sdfg):
        opaque_node(node, state, choices or {}, strict=True)


def describe_opaque(opaque: Mapping[str, OpaqueNode]) -> str:
    """The opaque tasks as the warnings list them: ``name (Op)``, and why for one its implementation refused."""
    return ", ".join(
        f"{name} ({node.op})" if node.refused_by is None else f"{name} ({node.op}: {node.why})"
        for name, node in opaque.items()
    )


@dataclass(frozen=True)
class CachedExpansion:
    """A node's full expansion, kept by the workload for later lowerings: the nested SDFG that replaced
    the node and the input connectors the expansion disconnected (inputs it folded in)."""

    nested: nodes.NestedSDFG
    dropped: frozenset[str]


class ExpansionCache(dict):
    """(node name, implementation) -> :class:`CachedExpansion`: the expansions a lowering reuses when it is
    given the cache of earlier lowerings of the same workload (:func:`expand_all` says how), so that lowering
    it again under another assignment re-expands only the nodes whose choice is new. The caller keeps it
    (the sweep: one per workload and process, :func:`dcaccel.exploration.dags.expansions_for`); a workload
    holds no lowering state."""


def expand_all(
    sdfg: dace.SDFG,
    choices: dict[str, str],
    cache: ExpansionCache | None = None,
    strict: bool = False,
    host: frozenset[str] = frozenset(),
) -> tuple[dict[str, str], set[str], dict[str, OpaqueNode]]:
    """Expand every library node of ``sdfg`` (in place) until none is left.

    The nodes present at the start are all resolved; nodes that expansions create are resolved when
    they carry no implementation. A node without a dcaccel implementation, or one the check of its implementation
    refuses, is expanded as an opaque task (:func:`opaque_node`; refused with ``strict``). Returns the
    implementation chosen per resolved node name, the names and op types of the resolved nodes, and the nodes
    kept as opaque tasks with why (name -> :class:`OpaqueNode`).

    ``cache`` (of lowerings of the workload whose SDFG this is a copy of) maps (node name, implementation) to a
    :class:`CachedExpansion`. Its rule: every implementation checks that it applies before it touches the
    graph, and the only edit an expansion makes outside the nested SDFG it returns is disconnecting the
    inputs it folds in (``dcaccel.expansions.node.drop_input``). So a node found in the cache is expanded
    by disconnecting the same inputs and putting a copy of the cached nested SDFG in its place, which is
    what expanding it again would give; every node expanded here is added to the cache.
    """
    from dcaccel.expansions.node import drop_input

    implementations: dict[str, str] = {}
    seen: set[str] = set()
    opaque: dict[str, OpaqueNode] = {}
    fallback: set[nodes.LibraryNode] = set()

    def resolve(node: nodes.LibraryNode, state: dace.SDFGState) -> None:
        chosen, opaque_task = _resolve(node, state, choices, seen, strict, host)
        node.implementation = implementations[node.label] = chosen
        if opaque_task is not None:
            fallback.add(node)
            opaque[node.label] = opaque_task

    def expand(node: nodes.LibraryNode, state: dace.SDFGState) -> None:
        if node not in fallback:
            node.expand(state)
            return
        try:
            expand_opaque(node, state, node.implementation)
        except UnsupportedOpError as failure:
            raise _with_refusal(node, opaque[node.label], failure) from failure

    pending = library_nodes(sdfg)
    for node, state in pending:
        resolve(node, state)
    inputs = {node.label: set(node.in_connectors) for node, _ in pending}
    for node, state in pending:  # in order: each expansion appends its nested SDFG to the state
        cached = None if cache is None else cache.get((node.label, node.implementation))
        if cached is None:
            expand(node, state)
            continue
        for connector in sorted(cached.dropped):
            drop_input(node, state, state.sdfg, connector)
        _substitute(state, node, copy.deepcopy(cached.nested))
    pending = library_nodes(sdfg)
    while pending:
        for node, state in pending:
            if node.implementation is None:
                resolve(node, state)
            expand(node, state)
        pending = library_nodes(sdfg)
    if cache is not None:
        for node, _ in sdfg.all_nodes_recursive():
            if isinstance(node, nodes.NestedSDFG) and node.label in inputs:
                dropped = frozenset(inputs[node.label] - set(node.in_connectors))
                key = (node.label, implementations[node.label])
                if key not in cache:
                    cache[key] = CachedExpansion(copy.deepcopy(node), dropped)
    return implementations, seen, opaque


def _substitute(state: dace.SDFGState, node: nodes.LibraryNode, expanded: nodes.NestedSDFG) -> None:
    """Put ``expanded`` (the nested SDFG an earlier lowering expanded ``node`` into) in ``node``'s place."""
    state.add_node(expanded)
    for edge in state.in_edges(node):
        state.add_edge(edge.src, edge.src_conn, expanded, edge.dst_conn, copy.deepcopy(edge.data))
    for edge in state.out_edges(node):
        state.add_edge(expanded, edge.src_conn, edge.dst, edge.dst_conn, copy.deepcopy(edge.data))
    state.remove_node(node)
    expanded.sdfg.parent = state
    expanded.sdfg.parent_sdfg = state.sdfg
    expanded.sdfg.parent_nsdfg_node = expanded


@contextlib.contextmanager
def _without_line_info():
    """Stop DaCe from inspecting the Python stack for the source line of every node it adds (the bulk of
    the expansion time of a large model); the nodes get no debug information instead."""
    previous = dace.Config.get("compiler", "lineinfo")
    dace.Config.set("compiler", "lineinfo", value="none")
    try:
        yield
    finally:
        dace.Config.set("compiler", "lineinfo", value=previous)


def map_origins(sdfg: dace.SDFG, sources: dict[str, str], implementations: dict[str, str]) -> dict:
    """The origin of every map scope of the expanded (not yet inlined) ``sdfg``: the top-level node that
    replaced a library node of the source program, named in ``sources`` (name -> op type), holds them.
    An opaque task (the nested SDFG itself) is its own origin's scope. A nested SDFG of the source program
    itself (not an expansion) is searched the same way: its library nodes were expanded where they were. Map
    scopes keep their identity through inlining, so the table stays valid for the lowered SDFG."""
    origins = {}
    for state in sdfg.states():
        for node in state.nodes():
            if is_opaque(node) and node.label in sources:
                origins[node] = SourceNode(node.label, sources[node.label], implementations[node.label])
            if isinstance(node, nodes.NestedSDFG) and node.label in sources:
                origin = SourceNode(node.label, sources[node.label], implementations[node.label])
                origins.update(
                    (inner, origin) for inner, _ in node.sdfg.all_nodes_recursive() if isinstance(inner, nodes.MapEntry)
                )
            elif isinstance(node, nodes.NestedSDFG):
                origins.update(map_origins(node.sdfg, sources, implementations))
    return origins


def simplify(sdfg: dace.SDFG) -> None:
    """Inline every nested SDFG and simplify, skipping the passes that break the canonical structure."""
    inline_sdfgs(sdfg, multistate=True)
    SimplifyPass(skip=set(STRUCTURE_BREAKING_PASSES)).apply_pass(sdfg, {})


def mark_program_io(sdfg: dace.SDFG) -> None:
    """Mark the non-transient containers of the top-level SDFG (program inputs and outputs) PROGRAM_IO."""
    for desc in sdfg.arrays.values():
        if not desc.transient:
            mark_buffer(desc, BufferReason.PROGRAM_IO)


def lower(
    workload,
    choices: dict[str, str] | None = None,
    *,
    strict: bool = False,
    host: Collection[str] = (),
    expansions: ExpansionCache | None = None,
) -> LoweredWorkload:
    """Lower ``workload`` (a Workload, or a bare SDFG) to maps with the implementations in ``choices``.

    ``choices`` maps an op type or a node name to an implementation name (``{"Conv": "op", "conv2":
    "lmv"}``); a node name wins over its op type. An implementation an op does not have raises
    :class:`DcaccelError` listing the ones it has. An op without any dcaccel implementation, or one its
    implementation's check refuses and ``choices`` do not name, becomes an opaque task (DaCe's expansion kept
    whole, or onnxruntime's on the host; listed in ``opaque``, why in ``opaque_reasons``, with one
    :class:`OpaqueOpWarning`), or raises :class:`UnsupportedOpError` with ``strict`` (or when neither DaCe nor
    onnxruntime can run it).
    Choices naming no node or op type of the workload are returned in ``unused_choices`` with one
    warning. The nodes named in ``host`` (a partition's host side) are expanded by DaCe as opaque tasks
    whatever dcaccel has for them. ``expansions``: the cache of earlier lowerings of ``workload`` to reuse
    and add this one's expansions to (:class:`ExpansionCache`; None: every node is expanded). The workload's
    SDFG is not modified.
    """
    if choices is not None and not isinstance(choices, Mapping):
        raise DcaccelError(
            f"lower: choices must map op types or node names to implementation names "
            f"(e.g. {{'Conv': 'op'}}), got a {type(choices).__name__}"
        )
    register()
    choices = dict(choices or {})
    source_sdfg = workload if isinstance(workload, dace.SDFG) else workload.sdfg
    sdfg = copy.deepcopy(source_sdfg)
    sources = {node.label: op_type(node) for node, _ in library_nodes(sdfg)}
    with _without_line_info(), warnings.catch_warnings():
        # DaCe's own ExpandTransformation passes connector sets to add_nested_sdfg and warns about it.
        warnings.filterwarnings("ignore", "Using sets for connectors", UserWarning)
        implementations, seen, opaque = expand_all(sdfg, choices, expansions, strict=strict, host=frozenset(host))
        origins = map_origins(sdfg, sources, implementations)
        simplify(sdfg)
    mark_program_io(sdfg)
    sdfg.validate()
    if opaque:
        warnings.warn(
            f"lower {sdfg.name}: {len(opaque)} node(s) with no canonical implementation kept as opaque tasks: "
            + describe_opaque(opaque),
            OpaqueOpWarning,
            stacklevel=2,
        )
    unused = {key: value for key, value in choices.items() if key not in seen}
    if unused:
        warnings.warn(
            f"choices naming no node or op type of '{sdfg.name}': {', '.join(sorted(unused))}",
            UserWarning,
            stacklevel=2,
        )
    return LoweredWorkload(
        None if isinstance(workload, dace.SDFG) else workload,
        sdfg,
        implementations,
        unused_choices=unused,
        origins=origins,
        opaque={name: node.op for name, node in opaque.items()},
        opaque_reasons=opaque,
    )
