"""Closed-form metrics of a lowered program whose sizes are symbolic.

A DAG with a symbolic number of tasks cannot be materialised, but its metrics can be summed in
closed form. :func:`symbolic_metrics` walks the same program steps as :func:`dcaccel.dag.extract`
with the same rules (docs/dag.md), keeping each task map as one *family* of tasks: its
per-iteration volumes stay expressions in the map parameters and are summed over the iteration
range with SymPy. The result gives the number of tasks, buffer nodes and edges, the work
W = Σ max(I, O) and the I/O volume (Σ over buffer nodes of volume in + out, pseudo-source edges
excluded) as expressions in the program's symbols; ``evaluate(N=..., ...)`` substitutes sizes.

Which iterations of a task map feed which task must be decidable from the memlets: a family
writes (or reads) a box that lies inside the box its partner reads (or writes), which SymPy proves
from the map ranges; anything else raises :class:`DcaccelError`. Like ``extract``, a collapsed
container that a consumer provably reads more often than it was written becomes a buffer node;
the other contract repairs of ``extract`` (unequal in-volumes, non-uniform outputs) are not
decidable in closed form and are not made here. The DAG is assumed to have no pseudo sink (a
single exit, as with ``sink="auto"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import sympy

from dcaccel.dag.extract import EDGE_VOLUME_RULES, Granularity
from dcaccel.dag.taskdag import NodeKind
from dcaccel.dag.versions import BufferVersions
from dcaccel.errors import DcaccelError

if TYPE_CHECKING:
    from dcaccel.dag.scopes import Access, Copy, LoweredProgram, TaskScope


@dataclass(frozen=True)
class SymbolicMetrics:
    """Metrics of the canonical task DAG as expressions in the program's symbols (ints once evaluated).

    ``tasks``, ``buffers``: number of task and buffer nodes; ``edges``: number of edges between them
    (pseudo-source edges excluded); ``work``: Σ over tasks of max(I, O) (an exit task costs I);
    ``io_volume``: Σ over buffer nodes of the volumes in and out, pseudo-source edges excluded.
    """

    tasks: sympy.Expr | int
    buffers: sympy.Expr | int
    edges: sympy.Expr | int
    work: sympy.Expr | int
    io_volume: sympy.Expr | int
    #: Conditions on the sizes under which the closed form holds (a collapsed container re-read).
    assumptions: tuple[sympy.Basic, ...] = ()

    @property
    def symbols(self) -> set[sympy.Symbol]:
        """The symbols the metrics depend on."""
        found: set[sympy.Symbol] = set()
        for name in _METRICS:
            found |= sympy.sympify(getattr(self, name)).free_symbols
        for condition in self.assumptions:
            found |= condition.free_symbols
        return found

    def plain(self) -> SymbolicMetrics:
        """The same metrics over plain symbols (no assumptions), the symbols of :class:`TaskDAG` volumes."""
        substitution = {s: sympy.Symbol(s.name) for s in self.symbols}
        metrics = {name: sympy.sympify(getattr(self, name)).xreplace(substitution) for name in _METRICS}
        metrics = {name: int(v) if v.is_Integer else v for name, v in metrics.items()}
        return SymbolicMetrics(**metrics, assumptions=tuple(c.xreplace(substitution) for c in self.assumptions))

    def evaluate(self, **values: int) -> SymbolicMetrics:
        """The metrics with the symbols named in ``values`` substituted (ints when none remain).

        Raises :class:`DcaccelError` when the values violate one of the ``assumptions``.
        """
        by_name = {s.name: s for s in self.symbols}
        unknown = sorted(set(values) - set(by_name))
        if unknown:
            raise DcaccelError(f"symbolic metrics: unknown symbol(s) {', '.join(unknown)} (known: {sorted(by_name)})")
        substitution = {by_name[n]: sympy.Integer(v) for n, v in values.items()}
        remaining = []
        for condition in self.assumptions:
            holds = condition.xreplace(substitution)
            if holds is sympy.false:
                raise DcaccelError(f"symbolic metrics: the closed form assumes {condition}, false for {values}")
            if holds is not sympy.true:
                remaining.append(holds)
        metrics = {name: _value(getattr(self, name), substitution) for name in _METRICS}
        return SymbolicMetrics(**metrics, assumptions=tuple(remaining))


_METRICS = tuple(f.name for f in fields(SymbolicMetrics) if f.name != "assumptions")


def _value(expr, substitution):
    result = sympy.sympify(expr).xreplace(substitution).doit()
    return int(result) if result.is_Integer else sympy.simplify(result)


# -- families ----------------------------------------------------------------------------------


@dataclass
class _Family:
    """A set of DAG nodes built by one step: one buffer, one task, or the tasks of a task map."""

    kind: NodeKind
    label: str
    params: tuple[sympy.Symbol, ...] = ()
    ranges: tuple[tuple[sympy.Expr, sympy.Expr, sympy.Expr], ...] = ()

    @property
    def multiple(self) -> bool:
        return bool(self.params)

    def count(self) -> sympy.Expr:
        total = sympy.Integer(1)
        for begin, end, step in self.ranges:
            total *= sympy.floor((end - begin) / step) + 1
        return total

    def first(self) -> dict[sympy.Symbol, sympy.Expr]:
        """The parameters of the first iteration."""
        return {p: begin for p, (begin, _, _) in zip(self.params, self.ranges, strict=True)}

    def total(self, expr: sympy.Expr) -> sympy.Expr:
        """Σ of ``expr`` over the iterations of the family (``expr`` itself for a single node)."""
        expr = sympy.sympify(expr)
        for p, (begin, end, step) in reversed(list(zip(self.params, self.ranges, strict=True))):
            if p not in expr.free_symbols:
                expr = expr * (sympy.floor((end - begin) / step) + 1)
                continue
            u = sympy.Symbol(f"{p.name}_step", integer=True, nonnegative=True)
            expr = sympy.summation(expr.xreplace({p: begin + step * u}), (u, 0, sympy.floor((end - begin) / step)))
        return expr


@dataclass
class _Box:
    """A per-iteration access of a family: bounds, distinct elements, accesses; and the whole-family box."""

    lo: tuple[sympy.Expr, ...]
    hi: tuple[sympy.Expr, ...]
    elements: sympy.Expr
    volume: sympy.Expr
    whole_lo: tuple[sympy.Expr, ...]
    whole_hi: tuple[sympy.Expr, ...]

    def size(self) -> sympy.Expr:
        return sympy.Mul(*(h - b + 1 for b, h in zip(self.lo, self.hi, strict=True)))


@dataclass
class _EdgeFamily:
    """Edges from ``src`` to ``dst``, one per iteration of ``over`` (a family id, or None for one edge)."""

    src: int
    dst: int
    exact: sympy.Expr
    reference: sympy.Expr
    over: int | None


def _proven(relation) -> bool:
    return sympy.sympify(relation) is sympy.true


def _contains(outer_lo, outer_hi, inner_lo, inner_hi) -> bool:
    """Whether the box ``inner`` provably lies inside ``outer``."""
    return all(_proven(sympy.simplify(i - o) >= 0) for o, i in zip(outer_lo, inner_lo, strict=True)) and all(
        _proven(sympy.simplify(o - i) >= 0) for o, i in zip(outer_hi, inner_hi, strict=True)
    )


def _disjoint(a_lo, a_hi, b_lo, b_hi) -> bool:
    """Whether the boxes ``a`` and ``b`` provably share no element."""
    return any(
        _proven(sympy.simplify(bl - ah) > 0) or _proven(sympy.simplify(al - bh) > 0)
        for al, ah, bl, bh in zip(a_lo, a_hi, b_lo, b_hi, strict=True)
    )


def _overlap(a_lo, a_hi, b_lo, b_hi) -> sympy.Expr:
    return sympy.Mul(
        *(
            sympy.Max(0, sympy.Min(ah, bh) - sympy.Max(al, bl) + 1)
            for al, ah, bl, bh in zip(a_lo, a_hi, b_lo, b_hi, strict=True)
        )
    )


class _SymbolicWalk(BufferVersions):
    """The walk of :mod:`dcaccel.dag.extract` over families instead of materialised tasks."""

    def __init__(self, program: LoweredProgram, granularity: Granularity, inserted: Mapping[str, sympy.Basic]):
        super().__init__()
        self.program = program
        self.granularity = granularity
        self.inserted = inserted
        self.reused: dict[str, sympy.Basic] = {}
        self.families: list[_Family] = []
        self.edges: list[_EdgeFamily] = []
        self.producers: dict[str, list[tuple[int, _Box]]] = {}

    def add(self, family: _Family) -> int:
        self.families.append(family)
        return len(self.families) - 1

    def is_buffer(self, data: str) -> bool:
        return self.program.containers[data].is_buffer or data in self.inserted

    def create_buffer(self, data: str) -> int:
        return self.add(_Family(NodeKind.BUFFER, data))

    def run(self) -> _SymbolicWalk:
        from dcaccel.dag.scopes import Copy

        for step in self.program.steps:
            if isinstance(step, Copy):
                self.copy(step)
            else:
                self.task(step)
        return self

    def task(self, scope: TaskScope) -> None:
        per_iteration = scope.is_task_map and self.granularity.mode == "task"
        if scope.is_task_map and self.granularity.mode == "tiles":
            raise DcaccelError("symbolic metrics: granularity ('tiles', T) needs concrete sizes; use extract")
        family = _Family(NodeKind.TASK, scope.label, scope.params, scope.ranges) if per_iteration else None
        reads = _boxes(scope.reads if per_iteration else scope.whole_reads, scope.whole_reads)
        writes = _boxes(scope.writes if per_iteration else scope.whole_writes, scope.whole_writes)
        read_buffers = {data: self.read_buffer(data) for data in reads if self.is_buffer(data)}
        node = self.add(family or _Family(NodeKind.TASK, scope.label))
        over = node if per_iteration else None
        for data, box in reads.items():
            if data in read_buffers:
                self.edges.append(_EdgeFamily(read_buffers[data], node, box.volume, box.volume, over))
            else:
                self.consume(data, node, box)
        accumulated = {a.data for a in scope.whole_writes if a.accumulate}
        for data, box in writes.items():
            if data in accumulated and not self.is_buffer(data):
                self.consume(data, node, box)
            elif data in accumulated and data in self.buffer_node:
                self.edges.append(_EdgeFamily(self.read_buffer(data), node, box.volume, box.volume, over))
            if self.is_buffer(data):
                self.edges.append(_EdgeFamily(node, self.write_buffer(data), box.volume, box.volume, over))
            else:
                self.produce(data, node, box)

    def copy(self, copy: Copy) -> None:
        src, dst = _boxes([copy.src], [copy.src])[copy.src.data], _boxes([copy.dst], [copy.dst])[copy.dst.data]
        if self.is_buffer(copy.src.data):
            source = self.read_buffer(copy.src.data)
            if self.is_buffer(copy.dst.data):
                self.edges.append(_EdgeFamily(source, self.write_buffer(copy.dst.data), dst.volume, dst.volume, None))
            else:
                self.produce(copy.dst.data, source, dst)
        elif self.is_buffer(copy.dst.data):
            self.consume(copy.src.data, self.write_buffer(copy.dst.data), src)
        else:
            self.forward(copy.src.data, src, copy.dst.data, dst)

    def consume(self, data: str, consumer: int, read: _Box) -> None:
        reader = self.families[consumer]
        for producer, written in self.producers.get(data, []):
            writer = self.families[producer]
            if writer.multiple and reader.multiple:
                raise DcaccelError(
                    f"symbolic metrics: task maps '{writer.label}' and '{reader.label}' communicate through "
                    f"'{data}'; use extract with concrete sizes"
                )
            if _disjoint(written.whole_lo, written.whole_hi, read.whole_lo, read.whole_hi):
                continue
            if writer.multiple:
                if not _contains(read.lo, read.hi, written.whole_lo, written.whole_hi):
                    raise _undecidable(writer.label, reader.label, data)
                overlap, over = written.size(), producer
            elif reader.multiple:
                if not _contains(written.lo, written.hi, read.whole_lo, read.whole_hi):
                    raise _undecidable(writer.label, reader.label, data)
                overlap, over = read.size(), consumer
            else:
                overlap, over = _overlap(written.lo, written.hi, read.lo, read.hi), None
            exact = read.volume * overlap * written.elements / (written.size() * read.elements)
            excess = sympy.simplify(exact - written.volume * overlap / written.size())
            if not _proven(excess <= 0):
                if writer.multiple or reader.multiple:
                    raise _undecidable(writer.label, reader.label, data)
                self.reused.setdefault(data, excess > 0)
            self.edges.append(_EdgeFamily(producer, consumer, exact, read.volume, over))

    def produce(self, data: str, producer: int, written: _Box) -> None:
        dense = _proven(sympy.simplify(written.elements * self.families[producer].count() - _whole_size(written)) >= 0)
        if dense:
            self.producers[data] = [
                (p, box)
                for p, box in self.producers.get(data, [])
                if not _contains(written.whole_lo, written.whole_hi, box.whole_lo, box.whole_hi)
            ]
        self.producers.setdefault(data, []).append((producer, written))

    def forward(self, src: str, read: _Box, dst: str, target: _Box) -> None:
        for producer, written in self.producers.get(src, []):
            if _disjoint(written.whole_lo, written.whole_hi, read.lo, read.hi):
                continue
            if not _contains(read.lo, read.hi, written.whole_lo, written.whole_hi):
                raise _undecidable(self.families[producer].label, f"the copy {src} -> {dst}", src)
            self.produce(
                dst, producer, _Box(target.lo, target.hi, written.elements, written.volume, target.lo, target.hi)
            )

    # -- metrics
    def metrics(self, rule: str) -> SymbolicMetrics:
        first_in: dict[int, _EdgeFamily] = {}
        first_out: dict[int, _EdgeFamily] = {}
        for edge in self.edges:
            first_in.setdefault(edge.dst, edge)
            first_out.setdefault(edge.src, edge)
        tasks = buffers = edges = work = io = sympy.Integer(0)
        for edge in self.edges:
            multiplicity = self.families[edge.over].count() if edge.over is not None else 1
            edges += multiplicity
            ends = [self.families[edge.src].kind, self.families[edge.dst].kind].count(NodeKind.BUFFER)
            if ends:
                volume = getattr(edge, rule)
                io += ends * (self.families[edge.over].total(volume) if edge.over is not None else volume)
        for index, family in enumerate(self.families):
            if family.kind is NodeKind.BUFFER:
                buffers += 1
                continue
            tasks += family.count()
            incoming = self.seen_from(index, first_in.get(index), rule)
            outgoing = self.seen_from(index, first_out.get(index), rule)
            if incoming is None:
                incoming = outgoing if outgoing is not None else sympy.Integer(0)
            cost = incoming if outgoing is None else sympy.Max(incoming, outgoing)
            work += family.total(cost)
        assumptions = tuple(c for c in self.inserted.values() if c is not sympy.true)
        return SymbolicMetrics(*(_simplify(v) for v in (tasks, buffers, edges, work, io)), assumptions=assumptions)

    def seen_from(self, index: int, edge: _EdgeFamily | None, rule: str) -> sympy.Expr | None:
        """The volume of ``edge`` as one node of family ``index`` sees it (its first such edge)."""
        if edge is None:
            return None
        volume = sympy.sympify(getattr(edge, rule))
        if edge.over is None or edge.over == index:
            return volume
        return volume.xreplace(self.families[edge.over].first())


def _boxes(accesses: tuple[Access, ...], whole: tuple[Access, ...]) -> dict[str, _Box]:
    whole_by_data = {a.data: a for a in whole}
    boxes = {}
    for a in accesses:
        w = whole_by_data.get(a.data, a)
        boxes[a.data] = _Box(a.begin, a.end, a.elements, a.volume, w.begin, w.end)
    return boxes


def _whole_size(box: _Box) -> sympy.Expr:
    return sympy.Mul(*(h - b + 1 for b, h in zip(box.whole_lo, box.whole_hi, strict=True)))


def _undecidable(writer: str, reader: str, data: str) -> DcaccelError:
    return DcaccelError(
        f"symbolic metrics: cannot decide which parts of '{data}' written by '{writer}' are read by '{reader}'; "
        "use extract with concrete sizes"
    )


def _simplify(expr: sympy.Expr):
    expr = sympy.simplify(sympy.sympify(expr).doit())
    return int(expr) if expr.is_Integer else expr


def symbolic_metrics(
    lowered,
    granularity: str | tuple = "task",
    edge_volume: str = "exact",
    *,
    symbols: Mapping[str, int] | None = None,
) -> SymbolicMetrics:
    """Number of tasks, buffers and edges, work and I/O volume of the canonical task DAG of ``lowered``
    (a ``LoweredWorkload`` or a fully lowered SDFG) in closed form, without materialising the DAG.

    ``granularity`` and ``edge_volume`` are those of :func:`dcaccel.dag.extract` (tiles excepted);
    ``symbols`` fixes some sizes and keeps the others symbolic.
    """
    from dcaccel.dag.scopes import read_program

    granularity = Granularity.parse(granularity)
    if edge_volume not in EDGE_VOLUME_RULES:
        raise DcaccelError(f"symbolic metrics: edge_volume must be one of {EDGE_VOLUME_RULES}, got {edge_volume!r}")
    program = read_program(getattr(lowered, "sdfg", lowered), symbols, positive_sizes=True)
    inserted: dict[str, sympy.Basic] = {}
    while True:
        walk = _SymbolicWalk(program, granularity, inserted).run()
        if walk.reused.keys() <= inserted.keys():
            return walk.metrics(edge_volume).plain()
        inserted = {**walk.reused, **inserted}
