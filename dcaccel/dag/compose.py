"""Composition: the task DAG of an implementation assignment, from the fragments of its nodes.

A :class:`Composer` belongs to one workload (one per process: :func:`composer_for`). It keeps the
:mod:`fragments <dcaccel.dag.fragments>` of every whole-program lowering it is given
(:meth:`Composer.add`) and the tasks of their steps, instantiated once per granularity. For an
assignment whose every node has a fragment, :meth:`Composer.dag` builds the program the lowering
would give without lowering anything:

1. each node's implementation is resolved as ``lower()`` resolves it
   (:func:`~dcaccel.transforms.lower.lowered_implementation`);
2. the fragments' steps are joined in program order, the nodes' own containers and states renamed
   as DaCe's inlining would name them in this program (:func:`~dcaccel.dag.fragments.inline_names`);
3. the joined program is walked by the one walk of :mod:`dcaccel.dag.walk`, exactly as
   :func:`~dcaccel.dag.extract.extract` walks a lowered program: buffer marks, stream or buffer at
   every boundary, contract repair (inserted buffers, repeated passes), both edge-volume rules, the
   pseudo source and sink, node and edge order are the whole-program rules applied to the whole
   program, never per fragment. Those rules are global (a collapsed container becomes a buffer
   because of a consumer in another node; an edge's volume depends on both ends), which is why
   composition joins steps, not task sub-DAGs.

The result is the DAG of the whole-program extraction, JSON for JSON. Where the model of DaCe's
inlining does not describe a workload's lowering (:class:`~dcaccel.dag.fragments.NotComposable`),
or the first composed DAG differs from the whole-program one (:meth:`Composer.check`), ``reason``
says why and :meth:`Composer.dag` returns None: the caller lowers the whole program instead.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dcaccel.dag.extract import Granularity, TaskGroup, extract_program, instantiate, origins_of
from dcaccel.dag.fragments import (
    Fragment,
    NotComposable,
    Skeleton,
    fragment_key,
    harvest,
    inline_names,
    inlining_of,
    rename_step,
    skeleton,
)
from dcaccel.dag.walk import without_cycle_collection

if TYPE_CHECKING:
    from dcaccel.dag.scopes import Container
    from dcaccel.dag.taskdag import TaskDAG

__all__ = ["Composer", "composer_for"]


class Composer:
    """The fragments of one workload's lowerings, and the DAGs of assignments composed from them.

    ``reason`` is None while composition applies, else why every assignment must be lowered whole.
    ``verified`` turns true once a composed DAG matched the whole-program extraction (:meth:`check`).
    """

    def __init__(self, workload, expansions=None):
        self.name = workload.name
        self.program_name = workload.sdfg.name
        self.symbols = workload.symbols
        self.reason: str | None = None
        self.verified = False
        self.lowerings: set[str] = set()  # the assignments whose whole-program lowerings were added
        self.composed_back: set[frozenset] = set()  # their implementations per node (composes_back)
        self.fragments: dict[tuple[str, str | None], Fragment] = {}
        self.shared: dict[str, Container] = {}
        self.glue: dict[int, Fragment] | None = None
        self.ordered = False  # the program order must be replayed on the graph (the nodes' steps interleave)
        self.layout: tuple | None = None  # per state: its reference and its parts in node order
        self.hosts: dict = {}  # (state reference, tensor) -> the part its access node sits with
        self.inlinings: dict[tuple[str, str | None], Any] = {}
        self.tasks: dict[tuple, TaskGroup] = {}
        self.frame: Skeleton | None = None
        self.attach(workload, expansions)
        try:
            if self.expansions is None:
                raise NotComposable("no cache of its lowerings' expansions was given")
            self.frame = skeleton(workload.sdfg)
        except NotComposable as err:
            self.reason = str(err)

    def attach(self, workload, expansions=None) -> Composer:
        """Bind to ``workload`` (this process's copy of the workload of the fragments): its library nodes, and
        ``expansions``, the :class:`~dcaccel.transforms.lower.ExpansionCache` its lowerings in this process
        fill (the fragments' nested programs are read from it). Returns the composer."""
        from dcaccel.frontend.ops import library_nodes

        self.expansions = expansions
        self.nodes = library_nodes(workload.sdfg)
        return self

    def __getstate__(self) -> dict:
        """The composer as another process receives it (:func:`composer_for`, ``shipped``): the fragments
        and what was learnt of them, without what belongs to this process (the workload's expansions and
        nodes, the tasks instantiated here)."""
        return {**self.__dict__, "expansions": None, "nodes": [], "tasks": {}}

    # -- fragments
    def add(self, lowered, assignment: str) -> None:
        """Keep the fragments of ``lowered`` (this workload lowered whole under ``assignment``); a
        lowering that cannot be cut into fragments sets ``reason``."""
        self.lowerings.add(assignment)
        if self.reason is not None:
            return
        from dcaccel.dag.scopes import read_program

        try:
            for node in self.frame.order:
                key = fragment_key(node, lowered)
                if key not in self.inlinings:
                    cached = None if key[1] is None else self.expansions.get(key)
                    if key[1] is not None and cached is None:
                        raise NotComposable(f"the expansion of node '{node}' ({key[1]}) is not cached")
                    self.inlinings[key] = None if cached is None else inlining_of(cached.nested)
            sources = origins_of(lowered)
            program = read_program(lowered.sdfg, self.symbols, positive_sizes=True, sources=sources)
            cut = harvest(lowered, program, self.frame, self.inlinings)
            for name, container in cut.shared.items():
                if self.shared.setdefault(name, container) != container:
                    raise NotComposable(f"container '{name}' of the source program differs between lowerings")
            self.ordered = self.ordered or cut.interleaved
            if cut.layout is not None:
                if self.layout is None:
                    self.layout = cut.layout
                elif self.layout != cut.layout:
                    raise NotComposable("the order of the nodes in the program's states differs between lowerings")
                for place, host in _hosts([*cut.fragments, *cut.glue.values()]).items():
                    if self.hosts.setdefault(place, host) != host:
                        raise NotComposable(f"the place of tensor '{place[1]}' in its state differs between lowerings")
            if self.glue is None:
                self.glue = dict(cut.glue)
            elif self.glue != cut.glue:
                raise NotComposable("the program's own steps (of no node) differ between lowerings")
            for fragment in cut.fragments:
                self.fragments.setdefault((fragment.node, fragment.implementation), fragment)
            implementations = {f.node: f.implementation for f in cut.fragments}
            composed = self.program(implementations)
            if composed is None or composed[0].steps != program.steps:
                raise NotComposable("the fragments of a lowering do not compose back to it")
            self.composed_back.add(frozenset(implementations.items()))
        except NotComposable as err:
            self.reason = str(err)

    def composes_back(self, choices: Mapping[str, str]) -> bool:
        """Whether ``choices`` gives every node the implementation it had in a lowering whose program
        the kept fragments composed back to, step for step (:meth:`add`): its composed DAG is that
        lowering's and needs no check against it."""
        return frozenset(self.implementations(choices).items()) in self.composed_back

    def missing(self, choices: Mapping[str, str]) -> list[tuple[str, str | None]]:
        """The (node, implementation) pairs of ``choices`` that have no fragment yet."""
        if self.reason is not None:
            return []
        return [key for key in self.implementations(choices).items() if key not in self.fragments]

    def implementations(self, choices: Mapping[str, str]) -> dict[str, str | None]:
        """The implementation ``lower()`` gives each top-level node under ``choices`` (None: opaque)."""
        from dcaccel.transforms.lower import lowered_implementation

        return {node.label: lowered_implementation(node, state, choices) for node, state in self.nodes}

    # -- composition
    def program(self, implementations: Mapping[str, str | None], fragments=None):
        """The program of the assignment giving each node ``implementations[node]``, with the origin of
        each step (fragment, index in it, containers renamed, state); None when a fragment is missing.
        The program's own steps (``glue``) go between the nodes' where the lowerings had them."""
        from dcaccel.dag.scopes import LoweredProgram

        if fragments is None:
            fragments = [self.fragments.get((node, implementations[node])) for node in self.frame.order]
            if any(fragment is None for fragment in fragments):
                return None
        naming = inline_names(self.frame, {f.node: f.inlining for f in fragments})
        glue = self.glue or {}
        ordered = [part for at, f in enumerate(fragments) for part in (glue.get(at), f) if part is not None]
        if len(fragments) in glue:
            ordered.append(glue[len(fragments)])
        graph = all(fragment.vertices is not None for fragment in ordered)
        if self.ordered and not graph:
            return None
        placed = _graph_states(ordered, naming) if graph else {}
        if placed is None:
            return None
        containers = dict(self.shared)
        steps = []
        origin = []
        state = None
        for fragment in ordered:
            data = naming.data.get(fragment.node, {})
            states = naming.states.get(fragment.node, {})
            names = {final: data[local] for final, local in fragment.own.items()}
            for final, container in fragment.containers.items():
                new = names[final]
                containers[new] = container if new == final else replace(container, name=new)
            changed = {old: new for old, new in names.items() if old != new}
            for index, (step, inherits) in enumerate(zip(fragment.steps, fragment.inherits, strict=True)):
                if graph:
                    state = placed[id(fragment), index]
                elif not inherits:
                    local = fragment.own_states[step.state]
                    state = states.get(local, local)
                steps.append(rename_step(step, changed, state))
                origin.append((fragment, index, changed, state))
        if graph:
            order = depth_first_order(ordered, self.layout, [state for *_, state in origin])
            if order is None:
                return None
            steps = [steps[i] for i in order]
            origin = [origin[i] for i in order]
        return LoweredProgram(self.program_name, steps, containers, frozenset()), origin

    def dag(self, choices: Mapping[str, str], granularity: Granularity, edge_volume: str, strict: bool = False):
        """The task DAG of ``choices`` composed from fragments (as ``extract(lower(workload, choices))``
        would give it), or None when a fragment is missing, composition does not apply (``reason``),
        or ``strict`` meets an opaque node (the whole-program lowering refuses it)."""
        if self.reason is not None:
            return None
        implementations = self.implementations(choices)
        if strict and None in implementations.values():
            return None
        with without_cycle_collection():  # joining steps and instantiating tasks allocate, as walking does
            built = self.program(implementations)
            if built is None:
                return None
            program, origin = built
            groups = self._groups(origin, granularity)
        return extract_program(program, granularity, edge_volume, name=self.name, groups=groups)

    def _groups(self, origin, granularity: Granularity) -> dict[int, TaskGroup]:
        """The tasks of every task scope of a composed program, by step index: instantiated once per
        (fragment step, granularity), then renamed to the composed program's containers and state."""
        from dcaccel.dag.scopes import Copy

        groups = {}
        for index, (fragment, position, changed, state) in enumerate(origin):
            step = fragment.steps[position]
            if isinstance(step, Copy):
                continue
            key = (granularity, fragment.node, fragment.implementation, position)
            group = self.tasks.get(key)
            if group is None:
                group = self.tasks[key] = instantiate(step, granularity)
            groups[index] = _renamed(group, changed, state, step.state)
        return groups

    def check(self, composed: TaskDAG, whole: TaskDAG, assignment: str) -> bool:
        """Compare a composed DAG with the whole-program extraction of the same assignment; on a
        difference, composition stops for this workload (``reason`` names the assignment)."""
        if composed.to_json() == whole.to_json():
            self.verified = True
            return True
        self.reason = f"the composed DAG of {assignment} differs from the whole-program extraction"
        return False


def _renamed(group: TaskGroup, changed: Mapping[str, str], state: str, was: str) -> TaskGroup:
    """``group`` with its containers renamed by ``changed`` and its tasks in ``state`` (they were in ``was``)."""
    if not changed and state == was:
        return group
    infos = group.infos if state == was else [info.derive(state=state) for info in group.infos]
    return TaskGroup(
        group.labels,
        infos,
        {changed.get(name, name): rows for name, rows in group.reads.items()},
        {changed.get(name, name): rows for name, rows in group.writes.items()},
        frozenset(changed.get(name, name) for name in group.accumulated),
    )


#: One composer per workload object in this process (a sweep's workers each keep their own).
_COMPOSERS: dict[int, tuple[weakref.ref, Composer]] = {}


def composer_for(workload, shipped: Composer | None = None, expansions=None) -> Composer:
    """The :class:`Composer` of ``workload`` in this process, made at the first call with ``expansions``
    (the cache its lowerings in this process fill, :meth:`Composer.attach`). ``shipped`` (the
    composer another process built for a workload of the same program, e.g. the sweep's for its
    workers) is attached to ``workload`` and kept instead when it knows more: more lowerings, or the
    same ones and a checked composition."""
    entry = _COMPOSERS.get(id(workload))
    current = entry[1] if entry is not None and entry[0]() is workload else None
    same = shipped is not None and (shipped.name, shipped.program_name) == (workload.name, workload.sdfg.name)
    if current is not None and not (same and _knows_more(shipped, current)):
        return current
    for key in [key for key, (ref, _) in _COMPOSERS.items() if ref() is None]:
        del _COMPOSERS[key]
    composer = shipped.attach(workload, expansions) if same else Composer(workload, expansions)
    _COMPOSERS[id(workload)] = (weakref.ref(workload), composer)
    return composer


def _knows_more(shipped: Composer, current: Composer) -> bool:
    """Whether ``shipped`` knows more of the same workload than ``current``."""
    if shipped.lowerings == current.lowerings:
        return shipped.verified and not current.verified
    return shipped.lowerings > current.lowerings


def _graph_states(fragments, naming) -> dict | None:
    """The state of every step (fragment id, index → label) when the fragments carry their graphs: the
    state a :class:`~dcaccel.dag.fragments.StateGraph` names is the one whose label its owner node's
    steps of that state have in this program; None when the owner has no such state here."""
    by_node = {fragment.node: fragment for fragment in fragments if fragment.node is not None}
    labels: dict = {}

    def label(state) -> str | None:
        owner, which = state
        if owner is None:
            return which
        if state not in labels:
            fragment = by_node.get(owner)
            found = None
            if fragment is not None and which < len(fragment.vertices):
                group = fragment.vertices[which]
                for vertex in group.vertices:
                    for i in vertex.steps:
                        if not fragment.inherits[i]:
                            local = fragment.own_states[fragment.steps[i].state]
                            found = naming.states.get(owner, {}).get(local, local)
            labels[state] = found
        return labels[state]

    placed = {}
    for fragment in fragments:
        for group in fragment.vertices:
            name = label(group.state)
            if name is None:
                return None
            for vertex in group.vertices:
                for i in vertex.steps:
                    placed[id(fragment), i] = name
    return placed


def depth_first_order(fragments, layout, states: list[str]) -> list[int] | None:
    """The program order of the steps of ``fragments`` (numbered in fragment order; ``states[i]``: the
    state of step i): state by state as ``layout`` lists them, DaCe's depth-first topological order
    (``dace.sdfg.utils.dfs_topological_sort``) replayed on the state's graph as the fragments recorded it
    (:class:`~dcaccel.dag.fragments.Vertex`): the nodes part by part in the layout's order, each shared
    tensor where its first host puts it, a shared tensor's successors and copies part by part. None when
    the fragments do not fit the layout."""
    parts = {}
    offset = 0
    for fragment in fragments:
        if fragment.node is not None:
            parts[fragment.node] = (fragment, offset)
        offset += len(fragment.steps)
    glue = [(fragment, start) for fragment, start in _offsets(fragments) if fragment.node is None]
    result: list[int] = []
    for reference, members in layout:
        order: list = []
        successors: dict = {}
        yields: dict = {}
        for member in members:
            if isinstance(member, int):  # the program's own steps, kept with the node at that position
                found = glue.pop(0) if glue else None
            else:
                found = parts.get(member)
            if found is None:
                return None
            fragment, offset = found
            group = next((g for g in fragment.vertices if g.state == reference), None)
            if group is None:
                return None
            state = states[offset + next(vertex.steps[0] for vertex in group.vertices if vertex.steps)]

            def global_key(key, state=state, fragment=fragment):
                return ("shared", state, key[1]) if key[0] == "shared" else (id(fragment), key[1])

            for vertex in group.vertices:
                key = global_key(vertex.key)
                if vertex.hosted and key not in order:
                    order.append(key)
                successors.setdefault(key, []).extend(global_key(target) for target in vertex.successors)
                yields.setdefault(key, []).extend(offset + i for i in vertex.steps)
        for key in successors:
            if key not in order:
                order.append(key)
        result.extend(step for key in _dfs_topological(order, successors) for step in yields.get(key, ()))
    return result if sorted(result) == list(range(len(states))) else None


def _hosts(fragments) -> dict:
    """(state reference, tensor of the source program) → the node whose part of the state's node order
    holds its access node, and the nodes connecting it in order (what :func:`depth_first_order` assumes
    the same in every lowering)."""
    hosts: dict = {}
    for fragment in fragments:
        for group in fragment.vertices or ():
            for vertex in group.vertices:
                if vertex.key[0] == "shared":
                    place = hosts.setdefault((group.state, vertex.key[1]), [None, []])
                    if vertex.hosted:
                        place[0] = fragment.node
                    if vertex.successors or vertex.steps:
                        place[1].append(fragment.node)
    return {place: (host, tuple(users)) for place, (host, users) in hosts.items()}


def _offsets(fragments):
    """Each fragment with the number of the steps before it."""
    offset = 0
    for fragment in fragments:
        yield fragment, offset
        offset += len(fragment.steps)


def _dfs_topological(nodes: list, successors: Mapping) -> list:
    """``dace.sdfg.utils.dfs_topological_sort`` on the graph ``successors`` (successor lists in order,
    duplicates ignored) whose nodes are ``nodes`` in order: depth first from the nodes without
    predecessors, a node visited once all its predecessors were."""
    children = {node: list(dict.fromkeys(successors.get(node, ()))) for node in nodes}
    predecessors: dict = {node: [] for node in nodes}
    for node in nodes:
        for child in children[node]:
            predecessors.setdefault(child, []).append(node)
    visited = set()
    found = []
    for start in [node for node in nodes if not predecessors[node]]:
        if start in visited:
            continue
        found.append(start)
        visited.add(start)
        stack = [(start, iter(children[start]))]
        while stack:
            _, pending = stack[-1]
            child = next(pending, None)
            if child is None:
                stack.pop()
                continue
            if child in visited or any(pred not in visited for pred in predecessors[child]):
                continue
            visited.add(child)
            found.append(child)
            stack.append((child, iter(children.get(child, ()))))
    return found
