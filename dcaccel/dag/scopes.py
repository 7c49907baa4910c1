"""The task scopes of a fully lowered SDFG: which top-level scopes are tasks and what each accesses.

This module is the only part of :mod:`dcaccel.dag` that reads an SDFG (it imports DaCe; the rest
of the package imports it lazily). It turns a fully lowered, inlined SDFG into a
:class:`LoweredProgram`: the steps of the program in order (task scopes and container-to-container
copies) plus the data containers with their buffer marks. Walking the steps into the task DAG is
the job of :mod:`dcaccel.dag.walk`, with its concrete (:mod:`dcaccel.dag.extract`) and closed-form
(:mod:`dcaccel.dag.symbolic`) back-ends.

Rules (architecture.md, Contract 2):

* states are visited in program order; inside a state, top-level nodes in DaCe's depth-first
  topological order (``dace.sdfg.utils.dfs_topological_sort``);
* every top-level map scope is a task scope. It is a **task map** when its body contains another
  map scope; then each iteration of its (outermost) map is a task, and the accesses recorded are
  those of one iteration: the memlets on the edges leaving its entry / entering its exit, which
  DaCe's memlet propagation has already summed over the inner maps. Their subsets and volumes are
  expressions in the task map's parameters, read once per scope and substituted per iteration by
  the caller (never re-propagated);
* a top-level tasklet, library node or nested SDFG is a single task scope; an *opaque task* (a node
  carrying the mark of :mod:`dcaccel.transforms.opaque`: an op dcaccel has no canonical
  implementation of) reads and writes whole tensors: each access's volume is the number of elements
  of the tensor it moves, raised to the largest of the node's inputs (outputs) when those differ,
  so that its in-edges (out-edges) carry one volume as the DAG contract requires; its record
  (:class:`~dcaccel.dag.task.TaskInfo`) has the opaque role and ``node`` (``op`` and ``implementation``
  come with the lowering's origins);
* a task scope's arithmetic (:mod:`dcaccel.dag.arithmetic`): its tasklets' MACs and other operations
  times the iterations of the maps around them (per iteration of a task map, in its parameters, and
  for the whole scope), an opaque task's from its op and the shapes of its tensors;
* a scope's accesses are listed in the order of its connectors (names the expansion gave them), not in
  DaCe's order of its edges, which simplify changes when it reconnects a node's producers: the order
  of a residual join's two reads would otherwise depend on the implementations of the branches;
* an edge between two access nodes at top level is a :class:`Copy`;
* a container is a buffer iff its descriptor carries a buffer mark (:mod:`dcaccel.buffers`); the
  non-transient containers of the SDFG (program inputs and outputs) are buffers even when the
  program was not marked (a bare SDFG): their reason is then ``PROGRAM_IO``.

Every expression is rewritten over plain SymPy symbols (program sizes without assumptions, or
positive integers on request; map parameters ``integer=True, nonnegative=True``) so that results
can be compared, summed and evaluated by symbol name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import dace
import sympy
from dace.sdfg import nodes as dnodes
from dace.sdfg.state import ControlFlowRegion, LoopRegion, SDFGState
from dace.transformation.passes.analysis.loop_analysis import get_init_assignment, get_loop_end, get_loop_stride

from dcaccel.buffers import BufferReason, buffer_reason
from dcaccel.dag import volume as vol
from dcaccel.dag.arithmetic import NONE, Arithmetic, count_statements, opaque_arithmetic, tasklet_arithmetic
from dcaccel.dag.cpp import cpp_arithmetic
from dcaccel.dag.task import NO_CANONICAL, Role, TaskInfo
from dcaccel.errors import DcaccelError
from dcaccel.transforms.opaque_mark import is_opaque


@dataclass(frozen=True)
class Access:
    """The accesses of one task (or of one iteration of a task map) to one container.

    ``begin``/``end`` bound the accessed elements per dimension (inclusive), ``elements`` is the
    number of distinct elements of the subset, ``volume`` the number of element accesses (re-reads
    count). All are SymPy expressions, in the task map's parameters for a per-iteration access.
    ``accumulate`` marks a write with write-conflict resolution (it reads what it updates).
    """

    data: str
    begin: tuple[sympy.Expr, ...]
    end: tuple[sympy.Expr, ...]
    elements: sympy.Expr
    volume: sympy.Expr
    dynamic: bool = False
    accumulate: bool = False


#: The record of a scope the lowering's origins do not name.
_UNKNOWN = TaskInfo()


@dataclass(frozen=True)
class TaskScope:
    """One top-level scope that is a task, or a task map whose iterations are tasks.

    ``reads``/``writes`` are per iteration for a task map (expressions in ``params``) and for the
    whole scope otherwise; ``whole_reads``/``whole_writes`` are always those of the whole scope
    (what ``granularity="coarse"`` uses). ``arithmetic`` and ``whole_arithmetic`` are its MACs and other
    operations likewise (:mod:`dcaccel.dag.arithmetic`).
    """

    label: str
    state: str
    params: tuple[sympy.Symbol, ...]
    ranges: tuple[tuple[sympy.Expr, sympy.Expr, sympy.Expr], ...]
    reads: tuple[Access, ...]
    writes: tuple[Access, ...]
    whole_reads: tuple[Access, ...]
    whole_writes: tuple[Access, ...]
    info: TaskInfo = field(default_factory=TaskInfo)
    arithmetic: Arithmetic = NONE
    whole_arithmetic: Arithmetic = NONE

    @property
    def is_task_map(self) -> bool:
        """Whether each iteration of the scope's outermost map is a task."""
        return bool(self.params)

    @property
    def iterations(self) -> sympy.Expr:
        """Number of iterations of the outermost map (1 for a single task)."""
        return vol.as_expr(vol.iterations(self.ranges))


@dataclass(frozen=True)
class Copy:
    """A copy between two containers (an edge between two access nodes)."""

    state: str
    src: Access
    dst: Access


@dataclass(frozen=True)
class Container:
    """A data container of the program and whether it is a buffer node."""

    name: str
    shape: tuple[sympy.Expr, ...]
    transient: bool
    reason: BufferReason | None

    @property
    def is_buffer(self) -> bool:
        return self.reason is not None


@dataclass
class LoweredProgram:
    """A fully lowered program as the task DAG sees it: steps in program order and containers."""

    name: str
    steps: list[TaskScope | Copy]
    containers: dict[str, Container]
    symbols: frozenset[sympy.Symbol]


def program_symbol(name: str, positive: bool = False) -> sympy.Symbol:
    """The SymPy symbol standing for the program size ``name``: a plain one (the symbol
    ``TaskDAG.evaluate`` and a JSON round-trip produce), or a positive integer one for closed forms."""
    return sympy.Symbol(name, integer=True, positive=True) if positive else sympy.Symbol(name)


@lru_cache(maxsize=1024)
def parameter_symbol(name: str) -> sympy.Symbol:
    """The plain SymPy symbol standing for the map parameter ``name``."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


class _Reader:
    """Reads one SDFG into a :class:`LoweredProgram` (see the module docstring for the rules)."""

    def __init__(
        self,
        sdfg: dace.SDFG,
        symbols: Mapping[str, int] | None,
        positive: bool,
        sources: Mapping[str, TaskInfo] | None,
    ):
        self.sdfg = sdfg
        self.positive = positive
        self.sources = sources or {}
        self.values = {name: sympy.Integer(v) for name, v in (symbols or {}).items()}
        self.program_symbols: set[sympy.Symbol] = set()

    # -- expressions -------------------------------------------------------------------------
    def expr(self, value, params: Mapping[str, sympy.Symbol]) -> sympy.Expr:
        """``value`` as a SymPy expression over plain symbols, with known sizes substituted."""
        if isinstance(value, sympy.Integer):
            return value
        expr = vol.as_expr(dace.symbolic.pystr_to_symbolic(value) if isinstance(value, str) else value)
        replacements = {}
        for sym in expr.free_symbols:
            name = str(sym)
            if name in params:
                replacements[sym] = params[name]
            elif name in self.values:
                replacements[sym] = self.values[name]
            else:
                plain = program_symbol(name, self.positive)
                self.program_symbols.add(plain)
                replacements[sym] = plain
        return expr.xreplace(replacements)

    def count(self, value, params: Mapping[str, sympy.Symbol]) -> vol.Volume:
        """A count (an int, or an expression over symbols named as in the SDFG) as :meth:`expr` reads it."""
        return value if type(value) is int else vol.concrete(self.expr(value, params))

    def access(self, data: str, subset, memlet, params: Mapping[str, sympy.Symbol]) -> Access:
        """The :class:`Access` of ``memlet`` to ``data`` over ``subset``."""
        if subset is None:
            subset = dace.subsets.Range.from_array(self.sdfg.arrays[data])
        begin = tuple(self.expr(b, params) for b in subset.min_element())
        end = tuple(self.expr(e, params) for e in subset.max_element())
        elements = self.expr(subset.num_elements(), params)
        dynamic = bool(memlet.dynamic)
        volume = self.expr(memlet.volume, params)
        if dynamic and volume == 0:
            volume = elements
        return Access(data, begin, end, elements, volume, dynamic, memlet.wcr is not None)

    # -- program order -----------------------------------------------------------------------
    def states(self, region: ControlFlowRegion):
        """The states of ``region`` in program order; any other control flow is refused."""
        for block in dace.sdfg.utils.dfs_topological_sort(region, sources=[region.start_block]):
            if isinstance(block, SDFGState):
                yield block
            elif type(block) is ControlFlowRegion:
                yield from self.states(block)
            else:
                raise DcaccelError(
                    f"extract: control-flow block '{block.label}' ({type(block).__name__}) in SDFG "
                    f"'{self.sdfg.name}' has no static task structure; unroll or convert it to maps first"
                )

    def read(self) -> LoweredProgram:
        steps: list[TaskScope | Copy] = []
        for state in self.states(self.sdfg):
            steps.extend(self.state_steps(state))
        containers = {}
        for name, desc in self.sdfg.arrays.items():
            reason = buffer_reason(desc)
            if reason is None and not desc.transient:
                reason = BufferReason.PROGRAM_IO
            shape = tuple(self.expr(s, {}) for s in desc.shape)
            containers[name] = Container(name, shape, bool(desc.transient), reason)
        return LoweredProgram(self.sdfg.name, steps, containers, frozenset(self.program_symbols))

    def state_steps(self, state: SDFGState):
        scope_dict = state.scope_dict()
        children = state.scope_children()
        for node in dace.sdfg.utils.dfs_topological_sort(state):
            if scope_dict[node] is not None:
                continue
            if isinstance(node, dnodes.MapEntry):
                yield self.map_scope(state, node, children)
            elif isinstance(node, dnodes.AccessNode):
                for edge in state.in_edges(node):
                    if isinstance(edge.src, dnodes.AccessNode) and not edge.data.is_empty():
                        yield self.copy(state, edge)
            elif isinstance(node, (dnodes.Tasklet, dnodes.LibraryNode, dnodes.NestedSDFG)):
                yield self.node_scope(state, node)
            elif isinstance(node, dnodes.EntryNode):
                raise DcaccelError(
                    f"extract: scope '{node.label}' ({type(node).__name__}) in state '{state.label}' is not a map"
                )

    # -- steps -------------------------------------------------------------------------------
    def copy(self, state: SDFGState, edge) -> Copy:
        memlet = edge.data
        src = self.access(edge.src.data, memlet.get_src_subset(edge, state), memlet, {})
        dst = self.access(edge.dst.data, memlet.get_dst_subset(edge, state), memlet, {})
        return Copy(state.label, src, dst)

    def outer_accesses(self, state: SDFGState, node) -> tuple[tuple[Access, ...], tuple[Access, ...]]:
        """The accesses of the whole scope of ``node``: the edges from and to top-level access nodes."""
        exit_node = state.exit_node(node) if isinstance(node, dnodes.EntryNode) else node
        reads = [
            self.access(e.src.data, e.data.get_src_subset(e, state), e.data, {})
            for e in _by_connector(state.in_edges(node), "dst_conn")
            if isinstance(e.src, dnodes.AccessNode) and not e.data.is_empty()
        ]
        writes = [
            self.access(e.dst.data, e.data.get_dst_subset(e, state), e.data, {})
            for e in _by_connector(state.out_edges(exit_node), "src_conn")
            if isinstance(e.dst, dnodes.AccessNode) and not e.data.is_empty()
        ]
        return _merge(reads), _merge(writes)

    def node_scope(self, state: SDFGState, node) -> TaskScope:
        reads, writes = self.outer_accesses(state, node)
        info = self.sources.get(node.guid, _UNKNOWN).derive(library_node=type(node).__name__)
        if is_opaque(node):
            reads, writes = _whole_tensors(reads), _whole_tensors(writes)
            info = info.derive(role=Role.OPAQUE, reason=NO_CANONICAL, node=info.node or node.label)
            arithmetic = self.opaque_arithmetic(state, node, info.op)
        else:
            arithmetic = self.node_arithmetic(state, node, {}, None)
        return TaskScope(node.label, state.label, (), (), reads, writes, reads, writes, info, arithmetic, arithmetic)

    def map_scope(self, state: SDFGState, entry: dnodes.MapEntry, children) -> TaskScope:
        whole_reads, whole_writes = self.outer_accesses(state, entry)
        info = self.sources.get(entry.guid, _UNKNOWN).derive(map=entry.map.label)
        label = entry.map.label
        params = {p: parameter_symbol(p) for p in entry.map.params}
        ranges = tuple(tuple(self.expr(v, {}) for v in rng) for rng in entry.map.range.ranges)
        arithmetic = self.body_arithmetic(state, entry, children, params)
        whole = Arithmetic(*(vol.summed(count, params.values(), ranges) for count in (arithmetic.macs, arithmetic.ops)))
        if not any(isinstance(child, dnodes.MapEntry) for child in children[entry]):
            return TaskScope(
                label, state.label, (), (), whole_reads, whole_writes, whole_reads, whole_writes, info, whole, whole
            )
        reads = self.inner_accesses(state, entry, params, reading=True)
        writes = self.inner_accesses(state, state.exit_node(entry), params, reading=False)
        return TaskScope(
            label,
            state.label,
            tuple(params.values()),
            ranges,
            reads,
            writes,
            whole_reads,
            whole_writes,
            info,
            arithmetic,
            whole,
        )

    # -- arithmetic (dcaccel.dag.arithmetic) -------------------------------------------------
    def body_arithmetic(self, state: SDFGState, entry, children, params: Mapping[str, sympy.Symbol]) -> Arithmetic:
        """The arithmetic of one iteration of the map of ``entry`` (in ``params``, its and the enclosing maps'
        parameters): every node in its body, an inner map's summed over the inner map's range."""
        total = NONE
        for child in children[entry]:
            if isinstance(child, dnodes.MapEntry):
                inner = {**params, **{p: parameter_symbol(p) for p in child.map.params}}
                ranges = [tuple(self.expr(v, inner) for v in rng) for rng in child.map.range.ranges]
                body = self.body_arithmetic(state, child, children, inner)
                names = [inner[p] for p in child.map.params]
                total = total + Arithmetic(*(vol.summed(count, names, ranges) for count in (body.macs, body.ops)))
            elif not isinstance(child, dnodes.AccessNode | dnodes.ExitNode):
                total = total + self.node_arithmetic(state, child, params, entry)
        return total

    def node_arithmetic(self, state: SDFGState, node, params: Mapping[str, sympy.Symbol], scope) -> Arithmetic:
        """The arithmetic of one execution of ``node`` (a tasklet, or a nested SDFG of plain states)."""
        if isinstance(node, dnodes.Tasklet):
            wcr = tuple(sorted((e.src_conn, e.data.wcr) for e in state.out_edges(node) if e.data.wcr is not None))
            connectors = frozenset(node.in_connectors) | frozenset(node.out_connectors)
            if node.code.language != dace.Language.Python:
                counted = cpp_arithmetic(node.label, node.code.as_string, connectors, wcr)
            elif isinstance(node.code.code, list):  # DaCe keeps the parsed statements: no text round trip
                counted = count_statements(node.label, node.code.code, connectors, wcr)
            else:
                counted = tasklet_arithmetic(node.label, node.code.as_string, connectors, wcr)
            return Arithmetic(*(self.count(value, params) for value in (counted.macs, counted.ops)))
        if isinstance(node, dnodes.NestedSDFG):
            return self.nested_arithmetic(node, params)
        where = f"in map '{scope.map.label}'" if scope is not None else f"in state '{state.label}'"
        raise DcaccelError(
            f"extract: {type(node).__name__} '{node.label}' {where} has no countable arithmetic; lower it first"
        )

    def nested_arithmetic(self, node: dnodes.NestedSDFG, params: Mapping[str, sympy.Symbol]) -> Arithmetic:
        """The arithmetic of one execution of a nested SDFG, its symbols mapped to the parent's."""
        inner = _Reader(node.sdfg, None, self.positive, None)
        total = inner.region_arithmetic(node.sdfg)
        mapping = {name: self.expr(value, params) for name, value in node.symbol_mapping.items()}
        return Arithmetic(*(_substituted(count, mapping) for count in (total.macs, total.ops)))

    def region_arithmetic(self, region: ControlFlowRegion) -> Arithmetic:
        """The arithmetic of a control-flow region run once: each state once, a loop's body summed over
        the loop's range; other control flow is refused."""
        total = NONE
        for block in dace.sdfg.utils.dfs_topological_sort(region, sources=[region.start_block]):
            if isinstance(block, SDFGState):
                total = total + self.state_arithmetic(block)
            elif isinstance(block, LoopRegion):
                bounds = (get_init_assignment(block), get_loop_end(block), get_loop_stride(block))
                if any(bound is None for bound in bounds):
                    raise DcaccelError(f"extract: loop '{block.label}' in SDFG '{self.sdfg.name}' has no static range")
                variable = self.expr(block.loop_variable, {})
                body = self.region_arithmetic(block)
                ranges = [tuple(self.expr(bound, {}) for bound in bounds)]
                total = total + Arithmetic(*(vol.summed(c, [variable], ranges) for c in (body.macs, body.ops)))
            elif type(block) is ControlFlowRegion:
                total = total + self.region_arithmetic(block)
            else:
                raise DcaccelError(
                    f"extract: control-flow block '{block.label}' ({type(block).__name__}) in SDFG "
                    f"'{self.sdfg.name}' has no countable arithmetic"
                )
        return total

    def state_arithmetic(self, state: SDFGState) -> Arithmetic:
        """The arithmetic of one execution of ``state`` (its top-level maps summed over their ranges)."""
        total = NONE
        children = state.scope_children()
        for child in children[None]:
            if isinstance(child, dnodes.MapEntry):
                names = {p: parameter_symbol(p) for p in child.map.params}
                ranges = [tuple(self.expr(v, names) for v in rng) for rng in child.map.range.ranges]
                body = self.body_arithmetic(state, child, children, names)
                total = total + Arithmetic(*(vol.summed(c, names.values(), ranges) for c in (body.macs, body.ops)))
            elif not isinstance(child, dnodes.AccessNode | dnodes.ExitNode):
                total = total + self.node_arithmetic(state, child, {}, None)
        return total

    def opaque_arithmetic(self, state: SDFGState, node, op: str | None) -> Arithmetic:
        """An opaque task's arithmetic from its op and the shapes its connectors read and write."""
        inputs = {
            e.dst_conn: [self.expr(size, {}) for size in e.data.get_src_subset(e, state).size()]
            for e in state.in_edges(node)
            if e.dst_conn and not e.data.is_empty()
        }
        outputs = {
            e.src_conn: [self.expr(size, {}) for size in e.data.get_dst_subset(e, state).size()]
            for e in state.out_edges(node)
            if e.src_conn and not e.data.is_empty()
        }
        return opaque_arithmetic(op, node.label, inputs, outputs)

    def inner_accesses(self, state: SDFGState, scope_node, params, reading: bool) -> tuple[Access, ...]:
        """Per-iteration accesses of a task map: memlets just inside its entry (reads) or exit (writes)."""
        outer_data = {}
        if reading:
            for e in state.in_edges(scope_node):
                if e.dst_conn and isinstance(e.src, dnodes.AccessNode):
                    outer_data[e.dst_conn[3:]] = e.src.data
            inner = [(e, e.src_conn[4:]) for e in _by_connector(state.out_edges(scope_node), "src_conn") if e.src_conn]
        else:
            for e in state.out_edges(scope_node):
                if e.src_conn and isinstance(e.dst, dnodes.AccessNode):
                    outer_data[e.src_conn[4:]] = e.dst.data
            inner = [(e, e.dst_conn[3:]) for e in _by_connector(state.in_edges(scope_node), "dst_conn") if e.dst_conn]
        accesses = []
        for edge, conn in inner:
            if conn not in outer_data or edge.data.is_empty():
                continue
            data = outer_data[conn]
            memlet = edge.data
            if memlet.data == data:
                subset = memlet.subset
            else:
                subset = memlet.get_src_subset(edge, state) if reading else memlet.get_dst_subset(edge, state)
            accesses.append(self.access(data, subset, memlet, params))
        return _merge(accesses)


def _by_connector(edges, connector: str) -> list:
    """``edges`` in the order of their connector names (``connector``: ``"dst_conn"`` or ``"src_conn"``;
    edges of one connector, or of none, keep DaCe's order). DaCe's order of a node's edges is the order in
    which they were added, which simplify changes when it reconnects the node's producers or consumers
    (state fusion reconnects the two producers of a residual join in an order set by their
    implementations); the connectors are named by the expansion, so this order is the node's own."""
    return sorted(edges, key=lambda edge: getattr(edge, connector) or "")


def _whole_tensors(accesses: tuple[Access, ...]) -> tuple[Access, ...]:
    """The accesses of an opaque task: each moves its tensor once (volume = its elements), raised to the
    largest tensor's size when they differ (a smaller input counts as re-read, as a canonical task
    re-reads a broadcast operand), so that every edge of the task on that side carries one volume."""
    if not accesses:
        return accesses
    volume = sympy.Max(*(access.elements for access in accesses))
    return tuple(
        Access(a.data, a.begin, a.end, a.elements, volume, dynamic=False, accumulate=a.accumulate) for a in accesses
    )


def _substituted(count, mapping: Mapping[str, sympy.Expr]):
    """``count`` with the symbols named in ``mapping`` replaced (a nested SDFG's symbols by the parent's)."""
    if not vol.is_symbolic(count):
        return vol.concrete(count)
    return vol.concrete(count.xreplace({s: mapping[s.name] for s in count.free_symbols if s.name in mapping}))


def _merge(accesses: list[Access]) -> tuple[Access, ...]:
    """One access per container, in first-access order: volumes summed, bounds the bounding box."""
    merged: dict[str, Access] = {}
    for acc in accesses:
        old = merged.get(acc.data)
        if old is None:
            merged[acc.data] = acc
            continue
        begin = tuple(sympy.Min(a, b) for a, b in zip(old.begin, acc.begin, strict=True))
        end = tuple(sympy.Max(a, b) for a, b in zip(old.end, acc.end, strict=True))
        box = vol.product(e - b + 1 for b, e in zip(begin, end, strict=True))
        elements = sympy.Min(old.elements + acc.elements, box)
        merged[acc.data] = Access(
            acc.data,
            begin,
            end,
            elements,
            old.volume + acc.volume,
            old.dynamic or acc.dynamic,
            old.accumulate or acc.accumulate,
        )
    return tuple(merged.values())


def read_program(
    sdfg: dace.SDFG,
    symbols: Mapping[str, int] | None = None,
    positive_sizes: bool = False,
    sources: Mapping[str, TaskInfo] | None = None,
) -> LoweredProgram:
    """The steps and containers of the fully lowered ``sdfg``, with the sizes in ``symbols`` substituted;
    the remaining sizes become plain symbols, or positive integer ones with ``positive_sizes``.

    ``sources`` maps the guid of a top-level scope node (a map entry) to what the lowering knows of its
    origin (a :class:`~dcaccel.dag.task.TaskInfo` with e.g. ``op="Conv", node="conv1",
    implementation="mv"``); the scope's ``info`` is that record with what the scope adds (its map's label,
    its library node's class, its opaque role).
    """
    return _Reader(sdfg, symbols, positive_sizes, sources).read()
