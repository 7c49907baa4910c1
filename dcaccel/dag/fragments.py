"""DAG fragments: the part of a lowered program that one node of the source program lowers to.

A :class:`Fragment` is, for one library node of the workload and one implementation, the steps of
the fully lowered program that this node became (task scopes and copies, as :mod:`dcaccel.dag.scopes`
reads them, in program order) and the containers it added; every other container a step touches is
a tensor of the source program, shared with the other nodes (its boundary containers: what it
reads and writes, and whether each is a buffer, is in the steps and in the program's containers).
:func:`harvest` cuts a real ``LoweredWorkload`` (``lower()`` of the whole program) into its nodes'
fragments: fragments are always taken from the node lowered in its program, never from a template.
:mod:`dcaccel.dag.compose` joins fragments of several lowerings into the program of an assignment.

What is not local to a node is how DaCe names what it inlines (:func:`inline_names`): the lowering
inlines the nodes' nested SDFGs one at a time, the last node first, and a container of a node keeps
its name unless the program already has one of that name, in which case it becomes
``{nested SDFG}_{name}`` (then ``..._0``, ``..._1``: DaCe's ``find_new_name``); the node's states
are renamed the same way against every state label of the program. So the names of a node depend
on the implementations of the nodes after it. A fragment therefore keeps, besides its steps in the
names of the lowering it came from, the names before inlining (:class:`Inlining`, read from the
workload's expansion of the node, inlined on its own), and the names of a composed program are
recomputed by replaying DaCe's rule. After inlining, DaCe fuses the states: a step is in a state of
its own node (``own``), or in the state the previous step is in.

A lowering whose structure this model does not describe raises :class:`NotComposable` with the
reason (the nodes' steps interleave in program order, a step touches another node's container,
sizes stay symbolic, the program has several top-level states, ...): the caller then lowers every
assignment of that workload whole.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from dcaccel.errors import DcaccelError

if TYPE_CHECKING:
    from dcaccel.dag.scopes import Access, Container, Copy, LoweredProgram, TaskScope


class NotComposable(DcaccelError):
    """A lowering that cannot be cut into fragments and composed again (the message says why)."""


@dataclass(frozen=True)
class Inlining:
    """What inlining one node's nested SDFG into the program adds: the nested SDFG's ``label``, its
    transient containers in the order DaCe adds them, and its state labels in the order DaCe renames
    them (both as they are before the node is inlined into the program)."""

    label: str
    transients: tuple[str, ...]
    blocks: tuple[str, ...]


@dataclass(frozen=True)
class Vertex:
    """A top-level node of the lowered program's state, as DaCe's depth-first program order sees it:
    ``key`` is ``("own", i)`` for the fragment's i-th scope or container (a map scope counts as one node,
    its exit's successors are its successors) or ``("shared", data)`` for an access node of a tensor of the
    source program, which several fragments meet. ``hosted``: the node sits at this place of the
    fragment in the state's node order. ``successors``: the keys of the successors this fragment
    connects it to, in DaCe's order. ``steps``: the fragment's steps it yields, in order (a scope its
    step, an access node the copies into it)."""

    key: tuple
    hosted: bool
    successors: tuple[tuple, ...]
    steps: tuple[int, ...]


@dataclass(frozen=True)
class StateGraph:
    """A fragment's part of one state's graph: its :class:`Vertex` list in the state's node order, and
    which state it is (``state``: the node that owns the state's label and the index of that state
    among the states the owner has steps in; ``(None, label)`` for a label no node owns)."""

    state: tuple
    vertices: tuple[Vertex, ...]


@dataclass(frozen=True)
class Fragment:
    """The steps one node became under one implementation, in the names of the lowering they come from.

    ``own`` maps each container the node added (its name in that lowering) to its name before
    inlining, ``own_states`` likewise for state labels; ``inherits[i]`` says that step ``i`` sits in the
    state of the step before it (its label comes from another node). ``containers`` are the node's
    own containers. ``inlining`` is None for a node that is not inlined (an opaque task). ``node`` is
    None for steps of the program itself (:class:`Harvest`, ``glue``): their states keep their labels.
    ``vertices``: the fragment's part of the graph of each state it has steps in (:class:`Vertex`, one
    group per state), which orders the steps when the nodes' steps interleave; None when the lowering's
    graph was not recorded.
    """

    node: str | None
    implementation: str | None
    steps: tuple[TaskScope | Copy, ...]
    inherits: tuple[bool, ...]
    own: Mapping[str, str]
    own_states: Mapping[str, str]
    containers: Mapping[str, Container]
    inlining: Inlining | None
    vertices: tuple[StateGraph, ...] | None = None


@dataclass(frozen=True)
class Skeleton:
    """What the names of a composed program depend on besides the fragments: the top-level library
    nodes in program order, the names the program has before anything is inlined (containers,
    symbols, constants) and the label of its one top-level state."""

    order: tuple[str, ...]
    names: frozenset[str]
    state: str


@dataclass(frozen=True)
class Naming:
    """The names every node's own containers and states get when the program is inlined: node →
    (name before inlining → name in the program)."""

    data: Mapping[str, Mapping[str, str]]
    states: Mapping[str, Mapping[str, str]]


def find_new_name(name: str, taken) -> str:
    """DaCe's ``find_new_name``: ``name``, else ``name_0``, ``name_1``, ... whichever is free."""
    from dace.utils import find_new_name as dace_find_new_name

    return dace_find_new_name(name, taken)


def skeleton(sdfg) -> Skeleton:
    """The :class:`Skeleton` of a workload's (not lowered) SDFG; :class:`NotComposable` when its
    library nodes are not all in its one top-level state."""
    from dcaccel.frontend.ops import library_nodes

    states = list(sdfg.states())
    if len(states) != 1 or list(sdfg.all_control_flow_blocks()) != states:
        raise NotComposable(f"the program '{sdfg.name}' has {len(states)} top-level states")
    order = []
    for node, state in library_nodes(sdfg):
        if state is not states[0]:
            raise NotComposable(f"node '{node.label}' is inside a nested SDFG")
        order.append(node.label)
    if len(set(order)) != len(order):
        raise NotComposable(f"two library nodes of '{sdfg.name}' share a name")
    names = frozenset(sdfg.arrays) | frozenset(map(str, sdfg.symbols)) | frozenset(sdfg.constants)
    return Skeleton(tuple(order), names, states[0].label)


def inlining_of(nested) -> Inlining:
    """The :class:`Inlining` of a node's expansion (the ``NestedSDFG`` that replaced it, its own nested
    SDFGs not yet inlined): a copy is inlined on its own, as the lowering does before it inlines the
    node into the program, and its transients are listed in the order DaCe's multi-state inlining
    adds them (states in order, access nodes in order)."""
    from dace.sdfg import nodes as dnodes
    from dace.sdfg.utils import inline_sdfgs

    sdfg = copy.deepcopy(nested).sdfg
    inline_sdfgs(sdfg, multistate=True)
    transients = []
    for state in sdfg.states():
        for node in state.nodes():
            if isinstance(node, dnodes.AccessNode) and sdfg.arrays[node.data].transient and node.data not in transients:
                transients.append(node.data)
    blocks = tuple(block.label for block in sdfg.all_control_flow_blocks(recursive=True))
    if len(set(blocks)) != len(blocks):
        raise NotComposable(f"two states of the expansion '{sdfg.label}' share a label")
    return Inlining(sdfg.label, tuple(transients), blocks)


def inline_names(frame: Skeleton, inlinings: Mapping[str, Inlining | None]) -> Naming:
    """Replay DaCe's naming while it inlines the nodes' nested SDFGs into the program (the last node
    first; see the module docstring). ``inlinings`` has every node of ``frame.order`` (None: not
    inlined)."""
    arrays = set(frame.names)
    pending = Counter(label for inlining in inlinings.values() if inlining for label in inlining.blocks)
    placed = {frame.state}
    current = frame.state
    data: dict[str, dict[str, str]] = {}
    states: dict[str, dict[str, str]] = {}
    for node in reversed(frame.order):
        inlining = inlinings[node]
        if inlining is None:
            continue
        # The node's state is split around it (DaCe's isolate_nested_sdfg); the nodes before it stay in
        # the state before.
        placed.discard(current)
        placed.update((f"{current}_pre_state", f"{current}_post_state"))
        current = f"{current}_pre_state"
        labels = placed | {label for label, count in pending.items() if count > 0}
        renamed = {}
        for label in inlining.blocks:
            new = find_new_name(label, labels)
            labels.add(new)
            renamed[label] = new
        pending.subtract(inlining.blocks)
        placed.update(renamed.values())
        states[node] = renamed
        names = {}
        for name in inlining.transients:
            new = f"{inlining.label}_{name}" if name in arrays else name
            new = find_new_name(new, arrays).replace(".", "_")
            new = find_new_name(new, arrays)
            arrays.add(new)
            names[name] = new
        data[node] = names
    return Naming(data, states)


def accesses(step: TaskScope | Copy) -> tuple[Access, ...]:
    """Every access of a step (a copy's source and target, a task scope's per-iteration and whole ones)."""
    from dcaccel.dag.scopes import Copy

    if isinstance(step, Copy):
        return (step.src, step.dst)
    return (*step.reads, *step.writes, *step.whole_reads, *step.whole_writes)


def rename_step(step: TaskScope | Copy, names: Mapping[str, str], state: str) -> TaskScope | Copy:
    """``step`` in state ``state`` with its containers renamed by ``names`` (the others keep theirs)."""
    from dcaccel.dag.scopes import Copy

    def access(a: Access) -> Access:
        new = names.get(a.data)
        return a if new is None else replace(a, data=new)

    if isinstance(step, Copy):
        return replace(step, state=state, src=access(step.src), dst=access(step.dst))
    if not names or not any(a.data in names for a in accesses(step)):
        return step if step.state == state else replace(step, state=state)
    return replace(
        step,
        state=state,
        reads=tuple(map(access, step.reads)),
        writes=tuple(map(access, step.writes)),
        whole_reads=tuple(map(access, step.whole_reads)),
        whole_writes=tuple(map(access, step.whole_writes)),
    )


@dataclass(frozen=True)
class Harvest:
    """The fragments of one lowering (one per top-level node, in program order), the program's own
    steps that belong to no node (``glue[i]``: a fragment whose ``node`` is None, before the i-th node;
    ``i`` = the number of nodes: at the end) and the containers of the source program (by name)."""

    fragments: tuple[Fragment, ...]
    glue: Mapping[int, Fragment]
    shared: Mapping[str, Container]
    interleaved: bool = False  # the nodes' steps interleave: the program order is replayed on the graph
    layout: tuple | None = None  # per state: its reference and its parts in node order (program_graph)


def harvest(lowered, program: LoweredProgram, frame: Skeleton, inlinings: Mapping) -> Harvest:
    """Cut ``program`` (the steps of ``lowered``, a workload lowered whole) into the fragments of its
    nodes. ``inlinings`` maps (node, implementation) to the node's :class:`Inlining`.

    A step belongs to the node its origin names, else to the node whose containers it touches; a step
    touching only the source program's tensors belongs to the node of the steps around it, or is a step
    of the program itself (glue) when it lies between two nodes.

    :raises NotComposable: when the nodes' steps interleave or come out of program order, a step
        touches the containers of two nodes, or the first step's state is not its own.
    """
    if program.symbols:
        names = ", ".join(sorted(map(str, program.symbols)))
        raise NotComposable(f"sizes stay symbolic ({names})")
    keys = {node: fragment_key(node, lowered) for node in frame.order}
    naming = inline_names(frame, {node: inlinings[keys[node]] for node in frame.order})
    owner = {name: node for node, names in naming.data.items() for name in names.values()}
    steps = program.steps
    owners = [_owner(step, owner) for step in steps]
    _fill_unowned(owners)
    position = {node: i for i, node in enumerate(frame.order)}
    runs = [node for i, node in enumerate(owners) if node is not None and (i == 0 or owners[i - 1] != node)]
    interleaved = len(set(runs)) != len(runs) or [position[n] for n in runs] != sorted(position[n] for n in runs)
    glue: dict[int, list[int]] = {}
    part_of: list = list(owners)
    for i, who in enumerate(owners):
        if who is None:
            after = next((position[n] for n in owners[i:] if n is not None), len(frame.order))
            glue.setdefault(after, []).append(i)
            part_of[i] = after
    try:
        state_owners = {node: tuple(labels.values()) for node, labels in naming.states.items()}
        graph, layout = program_graph(lowered.sdfg, steps, part_of, owner, state_owners)
    except NotComposable as err:
        if interleaved:
            raise NotComposable(
                f"the steps of the nodes interleave in program order (DaCe's depth-first order) and {err}"
            ) from None
        graph, layout = {}, None
    fragments = []
    for node in frame.order:
        inverse = {final: local for local, final in naming.data.get(node, {}).items()}
        inverse_states = {final: local for local, final in naming.states.get(node, {}).items()}
        mine = [i for i, who in enumerate(owners) if who == node]
        fragments.append(
            Fragment(
                node=node,
                implementation=keys[node][1],
                steps=tuple(steps[i] for i in mine),
                inherits=tuple(steps[i].state not in inverse_states for i in mine),
                own={final: local for final, local in inverse.items() if final in program.containers},
                own_states=inverse_states,
                containers={final: program.containers[final] for final in inverse if final in program.containers},
                inlining=inlinings[keys[node]],
                vertices=graph.get(node),
            )
        )
    glued = {}
    for at, members in glue.items():
        # a step in the state of the step before it keeps no label (it takes the composed program's)
        inherits = tuple(i > 0 and steps[i].state == steps[i - 1].state for i in members)
        kept = tuple(
            replace(steps[i], state="") if inherit else steps[i] for i, inherit in zip(members, inherits, strict=True)
        )
        glued[at] = Fragment(
            node=None,
            implementation=None,
            steps=kept,
            inherits=inherits,
            own={},
            own_states={step.state: step.state for step, inherit in zip(kept, inherits, strict=True) if not inherit},
            containers={},
            inlining=None,
            vertices=graph.get(at),
        )
    first = glued[0] if 0 in glued else (fragments[position[owners[0]]] if steps else None)
    if first is not None and first.inherits and first.inherits[0]:
        raise NotComposable("the first step of the program is not in a state of its own node")
    unknown = sorted(
        a.data for step in steps for a in accesses(step) if a.data not in owner and a.data not in frame.names
    )
    if unknown:
        raise NotComposable(f"container '{unknown[0]}' is neither a node's nor the source program's")
    shared = {name: container for name, container in program.containers.items() if name not in owner}
    return Harvest(tuple(fragments), glued, shared, interleaved, layout)


def program_graph(
    sdfg, steps: Sequence, part_of: Sequence, owner: Mapping[str, str], state_owners: Mapping[str, Sequence[str]]
) -> dict:
    """The fragments' parts of the graph of every state of ``sdfg`` (part → its :class:`Vertex` list, in
    the state's node order): what replaying DaCe's depth-first program order needs.

    ``part_of[i]`` is the node (or glue position) step ``i`` belongs to, ``owner`` maps a node's
    containers to it, ``state_owners`` a node to the state labels it owns; a part has one
    :class:`StateGraph` per state it has steps in. Also returns the layout of the program: per state in
    program order, its reference (:class:`StateGraph`) and its parts in the order of their nodes. Raises
    :class:`NotComposable` when the program has control flow other than states, a part has nodes but no
    step in a state, a tensor of the source program has two access nodes in one state, or an edge joins
    two nodes' scopes without a container between them.
    """
    from dace.sdfg.state import SDFGState
    from dace.sdfg.utils import dfs_topological_sort

    blocks = list(dfs_topological_sort(sdfg, sources=[sdfg.start_block]))
    if any(not isinstance(block, SDFGState) for block in blocks):
        raise NotComposable("the program has control flow other than states")
    local: dict[int, int] = {}
    counts: Counter = Counter()
    for i, part in enumerate(part_of):
        local[i] = counts[part]
        counts[part] += 1
    graph: dict = {}
    index = 0
    seen: dict = {}  # part -> the labels of the states it has steps in, in order
    layout = []  # (state label, the parts in the state's node order)
    for state in blocks:
        entries, index = _state_graph(state, index, part_of, local, owner)
        layout.append((state.label, tuple(entries)))
        for who, keyed in entries.items():
            group = tuple(
                Vertex(key, hosted, tuple(successors), tuple(mine)) for key, (hosted, successors, mine) in keyed.items()
            )
            if not any(vertex.steps for vertex in group):
                raise NotComposable(f"'{who}' has nodes but no step in state '{state.label}'")
            seen.setdefault(who, []).append(state.label)
            graph.setdefault(who, []).append((state.label, group))
    if index != len(steps):
        raise NotComposable("the program's graph does not give its steps")
    labels = {label: who for who, owned in state_owners.items() for label in owned}

    def reference(label: str) -> tuple:
        return (labels[label], seen[labels[label]].index(label)) if label in labels else (None, label)

    result = {
        who: tuple(StateGraph(reference(label), group) for label, group in groups) for who, groups in graph.items()
    }
    return result, tuple((reference(label), parts) for label, parts in layout)


def _state_graph(state, index: int, part_of: Sequence, local: Mapping[int, int], owner: Mapping[str, str]):
    """The parts of one state's graph (see :func:`program_graph`): part → key → [hosted, successor keys,
    step positions], and the index of the state's first step after this state's."""
    from dace.sdfg import nodes as dnodes
    from dace.sdfg.utils import dfs_topological_sort

    scope = state.scope_dict()
    step_of: dict = {}
    copies: dict = {}
    for node in dfs_topological_sort(state):  # the steps each node yields, as dcaccel.dag.scopes reads them
        if scope[node] is not None:
            continue
        if isinstance(node, (dnodes.MapEntry, dnodes.Tasklet, dnodes.LibraryNode, dnodes.NestedSDFG)):
            step_of[node] = [index]
            index += 1
        elif isinstance(node, dnodes.AccessNode):
            edges = [e for e in state.in_edges(node) if isinstance(e.src, dnodes.AccessNode) and not e.data.is_empty()]
            step_of[node] = list(range(index, index + len(edges)))
            copies.update((id(e), i) for e, i in zip(edges, step_of[node], strict=True))
            index += len(edges)
    top = [n for n in state.nodes() if scope[n] is None and not isinstance(n, dnodes.ExitNode)]
    keys: dict = {}  # node -> (part or None for a shared tensor, key)
    ordinal: Counter = Counter()
    for node in top:
        if isinstance(node, dnodes.AccessNode) and node.data not in owner:
            if ("shared", node.data) in keys.values():
                raise NotComposable(f"tensor '{node.data}' has two access nodes in state '{state.label}'")
            keys[node] = (None, ("shared", node.data))
            continue
        if isinstance(node, dnodes.AccessNode):
            who = owner[node.data]
        elif step_of.get(node):
            who = part_of[step_of[node][0]]
        else:
            raise NotComposable(f"scope '{node.label}' in state '{state.label}' yields no step")
        keys[node] = (who, ("own", ordinal[who]))
        ordinal[who] += 1
    parts = [keys[n][0] for n in top]
    entries: dict = {}
    for i, node in enumerate(top):
        who, key = keys[node]
        if who is None:
            who = _host(state, node, parts[:i], parts[i:], keys, copies, part_of)
        entries.setdefault(who, {}).setdefault(key, [False, [], []])[0] = True
    for node in top:
        exit_node = state.exit_node(node) if isinstance(node, dnodes.EntryNode) else node
        source_part, source = keys[node]
        for succ in state.successors(exit_node):
            if succ not in keys:
                raise NotComposable(f"an edge leaves '{node}' into a scope in state '{state.label}'")
            target_part, target = keys[succ]
            if source_part is not None:
                who = source_part
                if target_part is not None and target_part != who:
                    raise NotComposable(f"an edge joins the scopes of '{who}' and '{target_part}'")
            elif target_part is not None:
                who = target_part
            else:
                moved = [copies.get(id(e)) for e in state.edges_between(node, succ)]
                if None in moved:
                    raise NotComposable(f"an edge {node.data} -> {succ.data} moves no data")
                who = part_of[moved[0]]
            entries.setdefault(who, {}).setdefault(source, [False, [], []])[1].append(target)
        for i in step_of.get(node, []):
            entries.setdefault(part_of[i], {}).setdefault(keys[node][1], [False, [], []])[2].append(local[i])
    return entries, index


def _host(state, node, before: Sequence, after: Sequence, keys: Mapping, copies: Mapping, part_of: Sequence):
    """The part whose stretch of the state's node order holds the access node ``node`` of a tensor of the
    source program, given the parts of the nodes ``before`` and ``after`` it: of the nearest part on each
    side, the one that reads or writes the tensor in this state (the earlier one if both do), else the
    nearest part before it (else after it). Where a node's expansion adds its reads of a tensor, the access
    node comes first in that node's stretch, so the part before it need not touch it."""
    from dace.sdfg import nodes as dnodes

    nearest = [
        p
        for p in (
            next((p for p in reversed(before) if p is not None), None),
            next((p for p in after if p is not None), None),
        )
        if p is not None
    ]
    if not nearest:
        raise NotComposable(f"state '{state.label}' has no step of any node")
    users = set()
    for edge in (*state.in_edges(node), *state.out_edges(node)):
        other = edge.src if edge.dst is node else edge.dst
        if isinstance(other, dnodes.ExitNode):
            other = state.entry_node(other)
        part = keys[other][0] if other in keys else None
        if part is None and id(edge) in copies:
            part = part_of[copies[id(edge)]]
        users.add(part)
    return next((p for p in nearest if p in users), nearest[0])


def fragment_key(node: str, lowered) -> tuple[str, str | None]:
    """(node, implementation) of ``node`` in ``lowered``; an opaque task's implementation is None."""
    return node, None if node in lowered.opaque else lowered.implementations[node]


def _owner(step: TaskScope | Copy, owner: Mapping[str, str]) -> str | None:
    """The node a step belongs to: the node its origin names, else the one whose containers it touches
    (None when it touches only the source program's tensors)."""
    nodes = {owner[a.data] for a in accesses(step) if a.data in owner}
    node = step.info.node if hasattr(step, "info") else None  # a TaskScope's origin (a Copy has none)
    if node is not None:
        nodes.add(node)
    if len(nodes) > 1:
        raise NotComposable(f"{_describe(step)} touches the containers of nodes {', '.join(sorted(nodes))}")
    return next(iter(nodes), None)


def _describe(step: TaskScope | Copy) -> str:
    """A step as error messages name it."""
    from dcaccel.dag.scopes import Copy

    if isinstance(step, Copy):
        return f"the copy {step.src.data} -> {step.dst.data}"
    return f"the task scope '{step.label}'"


def _fill_unowned(owners: list[str | None]) -> None:
    """Give a step of no node (a copy between two tensors of the source program) to the node of the
    steps on both sides of it when they are the same node's; the others stay the program's own."""
    for i, who in enumerate(owners):
        if who is not None:
            continue
        before = next((owners[j] for j in range(i - 1, -1, -1) if owners[j] is not None), None)
        after = next((owners[j] for j in range(i + 1, len(owners)) if owners[j] is not None), None)
        if before is not None and before == after:
            owners[i] = before
