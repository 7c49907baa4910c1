"""The closed-form back-end of the DAG walk, and the metrics it gives when sizes are symbolic.

A DAG with a symbolic number of tasks cannot be materialised, but its metrics can be summed in
closed form. :class:`SymbolicGraph` is the back-end of the one walk (:mod:`dcaccel.dag.walk`) that
keeps each task map as one *family* of tasks: its per-iteration volumes stay expressions in the map
parameters and are summed over the iteration range with SymPy. :func:`symbolic_metrics` returns
the number of tasks, buffer nodes and edges, the work W = Σ max(I, O) and the I/O volume (Σ over
buffer nodes of volume in + out, pseudo-source edges excluded) as expressions in the program's
symbols; ``evaluate(N=..., ...)`` substitutes sizes. ``extract`` uses the same back-end when sizes
stay symbolic, and materialises the families whose number of iterations is concrete.

The rules are those of ``extract`` (docs/dag.md), decided in closed form:

* which iterations of a task map feed which task must follow from the memlets: a family writes (or
  reads) a box that provably lies inside the box its partner reads (or writes);
* a collapsed container that a consumer may re-read becomes a buffer node; when the re-read depends
  on the sizes the condition is kept in ``assumptions``;
* unequal in-volumes into a task and non-uniform outputs are repaired as in ``extract``: the
  differences are decided by SymPy, or by evaluating them at every iteration when the range is
  concrete; a difference that holds only for some sizes is kept in ``assumptions``;
* ``("tiles", T)`` needs a concrete number of iterations (each tile is then its own node), and the
  pseudo sink is added by the same rule as ``extract``'s ``sink``.

What cannot be decided raises a one-line :class:`DcaccelError` (never a silent skip); unequal
volumes on edges from or into buffers, which no repair can fix, raise :class:`DAGContractError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import sympy

from dcaccel.dag import volume as vol
from dcaccel.dag.task import TaskInfo
from dcaccel.dag.taskdag import NodeKind
from dcaccel.dag.walk import (
    Edge,
    Fault,
    Granularity,
    Node,
    add_edge,
    check_options,
    iteration_arithmetic,
    iteration_points,
    tiles_of,
    walk_program,
)
from dcaccel.errors import DAGContractError, DcaccelError

if TYPE_CHECKING:
    from dcaccel.dag.scopes import Access, TaskScope


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
            found |= vol.as_expr(getattr(self, name)).free_symbols
        for condition in self.assumptions:
            found |= condition.free_symbols
        return found

    def plain(self) -> SymbolicMetrics:
        """The same metrics over plain symbols (no assumptions), the symbols of :class:`TaskDAG` volumes."""
        substitution = {s: sympy.Symbol(s.name) for s in self.symbols}
        metrics = {name: vol.as_expr(getattr(self, name)).xreplace(substitution) for name in _METRICS}
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
        metrics = {name: vol.evaluate(vol.as_expr(getattr(self, name)), values) for name in _METRICS}
        return SymbolicMetrics(**metrics, assumptions=tuple(remaining))


_METRICS = tuple(f.name for f in fields(SymbolicMetrics) if f.name != "assumptions")


# -- families ----------------------------------------------------------------------------------


@dataclass
class _Family:
    """A set of DAG nodes built by one step: one buffer, one task, or the tasks of a task map."""

    kind: NodeKind
    label: str
    info: TaskInfo
    params: tuple[sympy.Symbol, ...] = ()
    ranges: tuple[tuple[sympy.Expr, sympy.Expr, sympy.Expr], ...] = ()

    @property
    def multiple(self) -> bool:
        return bool(self.params)

    def count(self) -> sympy.Expr:
        return vol.as_expr(vol.iterations(self.ranges))

    def first(self) -> dict[sympy.Symbol, sympy.Expr]:
        """The parameters of the first iteration."""
        return {p: begin for p, (begin, _, _) in zip(self.params, self.ranges, strict=True)}

    def points(self) -> np.ndarray | None:
        """The iterations as an (n × params) array when their number is concrete, else None."""
        if any(vol.is_symbolic(v) for rng in self.ranges for v in rng):
            return None
        axes = [np.arange(int(b), int(e) + 1, int(s), dtype=np.int64) for b, e, s in self.ranges]
        grids = np.meshgrid(*axes, indexing="ij")
        return np.stack([g.reshape(-1) for g in grids], axis=1)

    def total(self, expr: sympy.Expr) -> sympy.Expr:
        """Σ of ``expr`` over the iterations of the family (``expr`` itself for a single node)."""
        return vol.as_expr(vol.summed(vol.as_expr(expr), self.params, self.ranges))


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

    def whole_size(self) -> sympy.Expr:
        return sympy.Mul(*(h - b + 1 for b, h in zip(self.whole_lo, self.whole_hi, strict=True)))


@dataclass
class _FamilyGroup:
    """The families one task scope becomes (one, or one per tile) and their accesses per container."""

    families: list[_Family]
    reads: dict[str, tuple[_Box, ...]]
    writes: dict[str, tuple[_Box, ...]]
    accumulated: frozenset[str]


def _proven(relation) -> bool:
    return vol.decide(relation) is True


def _contains(outer_lo, outer_hi, inner_lo, inner_hi) -> bool:
    """Whether the box ``inner`` provably lies inside ``outer``."""
    return all(vol.provably_le(o, i) for o, i in zip(outer_lo, inner_lo, strict=True)) and all(
        vol.provably_le(i, o) for o, i in zip(outer_hi, inner_hi, strict=True)
    )


def _disjoint(a_lo, a_hi, b_lo, b_hi) -> bool:
    """Whether the boxes ``a`` and ``b`` provably share no element."""
    return any(
        _proven(sympy.Gt(bl - ah, 0)) or _proven(sympy.Gt(al - bh, 0))
        for al, ah, bl, bh in zip(a_lo, a_hi, b_lo, b_hi, strict=True)
    )


def _overlap(a_lo, a_hi, b_lo, b_hi) -> sympy.Expr:
    return sympy.Mul(
        *(
            sympy.Max(0, sympy.Min(ah, bh) - sympy.Max(al, bl) + 1)
            for al, ah, bl, bh in zip(a_lo, a_hi, b_lo, b_hi, strict=True)
        )
    )


def _box(access: Access, whole: Access) -> _Box:
    return _Box(access.begin, access.end, access.elements, access.volume, whole.begin, whole.end)


def _row_box(rows, t: int) -> _Box:
    """Tile ``t`` of :class:`~dcaccel.dag.walk.Rows` as a box of SymPy integers."""
    lo = tuple(sympy.Integer(int(v)) for v in rows.lo[t])
    hi = tuple(sympy.Integer(int(v)) for v in rows.hi[t])
    return _Box(lo, hi, sympy.Integer(int(rows.elements[t])), sympy.Integer(int(rows.volume[t])), lo, hi)


def _union(boxes: tuple[_Box, ...]) -> tuple[tuple, tuple]:
    """The bounding box of the whole boxes of ``boxes``."""
    lo = tuple(sympy.Min(*values) for values in zip(*(b.whole_lo for b in boxes), strict=True))
    hi = tuple(sympy.Max(*values) for values in zip(*(b.whole_hi for b in boxes), strict=True))
    return lo, hi


def _undecidable(writer: str, reader: str, data: str) -> DcaccelError:
    return DcaccelError(
        f"symbolic metrics: cannot decide which parts of '{data}' written by '{writer}' are read by '{reader}'; "
        "use extract with concrete sizes"
    )


class SymbolicGraph:
    """The closed-form back-end of :class:`~dcaccel.dag.walk.Walk`: members of a step are tuples of
    family ids, accesses tuples of :class:`_Box` (one per member family)."""

    def __init__(self, granularity: Granularity):
        self.granularity = granularity
        self.families: list[_Family] = []
        self.edges: dict[tuple[int, int], Edge] = {}
        self.produced: dict[int, sympy.Expr] = {}

    # -- nodes and edges
    def add(self, family: _Family) -> int:
        self.families.append(family)
        return len(self.families) - 1

    def add_edge(self, src: int, dst: int, exact, reference, via: str | None = None) -> None:
        """Edges from ``src`` to ``dst``: one, or one per iteration of the family at the multiple end."""
        over = src if self.families[src].multiple else dst if self.families[dst].multiple else None
        add_edge(self.edges, src, dst, vol.as_expr(exact), vol.as_expr(reference), via, over)

    def add_buffer(self, data: str, info: TaskInfo) -> int:
        return self.add(_Family(NodeKind.BUFFER, data, info))

    def one(self, node: int) -> tuple[int]:
        return (node,)

    def single(self, access: Access) -> tuple[_Box]:
        return (_box(access, access),)

    def task_group(self, index: int, scope: TaskScope) -> _FamilyGroup:
        base = scope.info.derive(state=scope.state)
        accumulated = frozenset(a.data for a in scope.whole_writes if a.accumulate)
        mode = self.granularity.mode if scope.is_task_map else "coarse"
        if mode == "tiles":
            if vol.is_symbolic(count := vol.iterations(scope.ranges)):
                raise DcaccelError(
                    f"symbolic metrics: granularity ('tiles', {self.granularity.tiles}) needs a concrete number of "
                    f"iterations of task map '{scope.label}' ({_plain(count)}); pass symbols=..."
                )
            tiles = tiles_of(scope, self.granularity)
            macs, ops = iteration_arithmetic(scope, iteration_points(scope))
            families = [
                _Family(
                    NodeKind.TASK,
                    f"{scope.label}{t}",
                    base.derive(
                        tile=t,
                        iterations=b - a,
                        iteration_range=(a, b),
                        macs=vol.total(macs[a:b]),
                        ops=vol.total(ops[a:b]),
                    ),
                )
                for t, (a, b) in enumerate(tiles.bounds)
            ]
            count = len(tiles.bounds)
            reads = {d: tuple(_row_box(r, t) for t in range(count)) for d, r in tiles.reads.items()}
            writes = {d: tuple(_row_box(r, t) for t in range(count)) for d, r in tiles.writes.items()}
            return _FamilyGroup(families, reads, writes, accumulated)
        whole_reads = {a.data: a for a in scope.whole_reads}
        whole_writes = {a.data: a for a in scope.whole_writes}
        if mode == "coarse":
            if scope.is_task_map:
                base = base.derive(iterations=vol.concrete(vol.iterations(scope.ranges)))
            family = _Family(NodeKind.TASK, scope.label, base.derive(**scope.whole_arithmetic.counts()))
            reads = {d: (_box(a, a),) for d, a in whole_reads.items()}
            writes = {d: (_box(a, a),) for d, a in whole_writes.items()}
        else:
            info = base.derive(**scope.arithmetic.counts())  # in the parameters: each task's when materialised
            family = _Family(NodeKind.TASK, scope.label, info, scope.params, scope.ranges)
            reads = {a.data: (_box(a, whole_reads.get(a.data, a)),) for a in scope.reads}
            writes = {a.data: (_box(a, whole_writes.get(a.data, a)),) for a in scope.writes}
        return _FamilyGroup([family], reads, writes, accumulated)

    def add_tasks(self, group: _FamilyGroup) -> tuple[int, ...]:
        return tuple(self.add(family) for family in group.families)

    def buffer_edges(self, sources: tuple[int, ...], targets: tuple[int, ...], boxes: tuple[_Box, ...]) -> None:
        """One edge family per box (from or into a single buffer node), carrying the box's volume."""
        for i, box in enumerate(boxes):
            src = sources[i] if len(sources) > 1 else sources[0]
            dst = targets[i] if len(targets) > 1 else targets[0]
            self.add_edge(src, dst, box.volume, box.volume)

    def record_output(self, members: tuple[int, ...], boxes: tuple[_Box, ...]) -> None:
        for member, box in zip(members, boxes, strict=True):
            self.produced.setdefault(member, box.volume)

    # -- collapsed containers
    def link(self, producers, written, consumers, read, via: str) -> sympy.Basic:
        """Edge families from ``producers`` to ``consumers`` through the collapsed ``via`` (see
        :meth:`ConcreteGraph.link <dcaccel.dag.extract.ConcreteGraph.link>`); returns the condition on
        the sizes under which a consumer re-reads the stream."""
        rereads: sympy.Basic = sympy.false
        for producer, w in zip(producers, written, strict=True):
            for consumer, r in zip(consumers, read, strict=True):
                rereads = sympy.Or(rereads, self.link_pair(producer, w, consumer, r, via))
        return rereads

    def link_pair(self, producer: int, w: _Box, consumer: int, r: _Box, via: str) -> sympy.Basic:
        writer, reader = self.families[producer], self.families[consumer]
        if writer.multiple and reader.multiple:
            raise DcaccelError(
                f"symbolic metrics: task maps '{writer.label}' and '{reader.label}' communicate through "
                f"'{via}'; use extract with concrete sizes"
            )
        if _disjoint(w.whole_lo, w.whole_hi, r.whole_lo, r.whole_hi):
            return sympy.false
        if writer.multiple:
            if not _contains(r.lo, r.hi, w.whole_lo, w.whole_hi):
                raise _undecidable(writer.label, reader.label, via)
            overlap = w.size()
        elif reader.multiple:
            if not _contains(w.lo, w.hi, r.whole_lo, r.whole_hi):
                raise _undecidable(writer.label, reader.label, via)
            overlap = r.size()
        else:
            overlap = _overlap(w.lo, w.hi, r.lo, r.hi)
        exact = r.volume * overlap * w.elements / (w.size() * r.elements)
        excess = sympy.simplify(exact - w.volume * overlap / w.size())
        self.add_edge(producer, consumer, exact, r.volume, via)
        if vol.provably_le(excess, 0):
            return sympy.false
        if writer.multiple or reader.multiple:
            raise _undecidable(writer.label, reader.label, via)
        return sympy.Gt(excess, 0)

    def dense(self, members: tuple[int, ...], boxes: tuple[_Box, ...]) -> bool:
        """Whether ``members`` provably write every element of the bounding box of what they write."""
        lo, hi = _union(boxes)
        size = sympy.Mul(*(h - b + 1 for b, h in zip(lo, hi, strict=True)))
        written = sum((b.elements * self.families[m].count() for m, b in zip(members, boxes, strict=True)), 0)
        return vol.provably_le(size, written)

    def not_overwritten(self, producers, written, members, boxes):
        """The producers whose box is not provably inside the bounding box ``members`` overwrite."""
        lo, hi = _union(boxes)
        kept = [
            (p, w) for p, w in zip(producers, written, strict=True) if not _contains(lo, hi, w.whole_lo, w.whole_hi)
        ]
        return (tuple(p for p, _ in kept), tuple(w for _, w in kept)) if kept else None

    def forward(self, producers, written, src, dst, src_data: str, dst_data: str):
        """A copy ``src`` → ``dst`` between collapsed containers: a producer whose box lies inside the copied
        part becomes a producer of the whole target box."""
        (read,), (target,) = src, dst
        moved = []
        for producer, w in zip(producers, written, strict=True):
            if _disjoint(w.whole_lo, w.whole_hi, read.lo, read.hi):
                continue
            if not _contains(read.lo, read.hi, w.whole_lo, w.whole_hi):
                raise _undecidable(self.families[producer].label, f"the copy {src_data} -> {dst_data}", src_data)
            moved.append((producer, _Box(target.lo, target.hi, w.elements, w.volume, target.lo, target.hi)))
        return (tuple(p for p, _ in moved), tuple(b for _, b in moved)) if moved else None

    # -- contract repair
    def seen_volumes(self, index: int, edge: Edge, rule: str) -> list[sympy.Expr]:
        """The volumes of ``edge`` as one node of family ``index`` sees them: one expression (in the
        family's parameters) or, for an edge family over the other end, one per iteration of it."""
        volume = vol.as_expr(edge.volume(rule))
        if edge.over is None or edge.over == index:
            return [volume]
        other = self.families[edge.over]
        if not volume.free_symbols & set(other.params):
            return [volume]
        points = other.points()
        if points is None:
            raise DcaccelError(
                f"symbolic metrics: the volumes between '{self.families[index].label}' and the task map "
                f"'{other.label}' vary over its iterations; use extract with concrete sizes"
            )
        values = vol.at_points(volume, other.params, points)
        return list(dict.fromkeys(vol.as_expr(v) for v in values.tolist()))

    def differ(self, index: int, a: sympy.Expr, b: sympy.Expr) -> sympy.Basic:
        """The condition under which a node of family ``index`` sees the volumes ``a`` and ``b`` differ."""
        family = self.families[index]
        difference = sympy.simplify(a - b)
        if difference == 0:
            return sympy.false
        free = difference.free_symbols
        if not free:
            return sympy.true
        if free <= set(family.params) and (points := family.points()) is not None:
            return sympy.true if np.any(vol.at_points(difference, family.params, points) != 0) else sympy.false
        if not free & set(family.params):
            return sympy.Ne(difference, 0)
        raise DcaccelError(
            f"symbolic metrics: cannot decide whether the volumes {a} and {b} of task '{family.label}' are equal; "
            "use extract with concrete sizes"
        )

    def largest(self, index: int, values: list[sympy.Expr]) -> sympy.Expr:
        """The provably largest of ``values`` (:class:`DcaccelError` when it depends on the sizes)."""
        best = values[0]
        for value in values[1:]:
            if vol.provably_le(value, best):
                continue
            if not vol.provably_le(best, value):
                raise DcaccelError(
                    f"symbolic metrics: cannot decide which volume into or out of task '{self.families[index].label}' "
                    f"is the largest ({best} or {value}); use extract with concrete sizes"
                )
            best = value
        return best

    def faults(self, rule: str) -> dict[str, Fault]:
        """The repairs of ``extract`` for unequal in-volumes into a task family and non-uniform outputs
        of one, decided in closed form (a difference that holds only for some sizes is a conditional fault).
        Unequal volumes that no repair can fix (from or into buffers) raise, as ``TaskDAG.validate`` would."""
        found: dict[str, Fault] = {}
        sides: tuple[dict[int, list[Edge]], dict[int, list[Edge]]] = ({}, {})
        for (src, dst), edge in self.edges.items():
            sides[0].setdefault(dst, []).append(edge)
            sides[1].setdefault(src, []).append(edge)
        for side, what in ((0, "unequal in-volumes into"), (1, "non-uniform output of")):
            for index, edges in sides[side].items():
                family = self.families[index]
                if family.kind is not NodeKind.TASK and (family.kind is not NodeKind.BUFFER or side == 1):
                    continue
                seen = [(value, edge.via) for edge in edges for value in self.seen_volumes(index, edge, rule)]
                if len({sympy.srepr(value) for value, _ in seen}) < 2:
                    continue
                fixed = [value for value, via in seen if not via or family.kind is NodeKind.BUFFER]
                target = fixed[0] if fixed else self.largest(index, [value for value, _ in seen])
                for value, via in seen:
                    condition = self.differ(index, value, target)
                    if condition is sympy.false:
                        continue
                    if not via or family.kind is NodeKind.BUFFER:
                        raise _unrepairable(family, side, target, value, condition)
                    for data in sorted(via):
                        found.setdefault(data, Fault(f"{what} task {family.label}", condition))
        return found

    # -- results
    def metrics(self, rule: str, sink: str, assumptions: tuple[sympy.Basic, ...]) -> SymbolicMetrics:
        """The metrics of the DAG the families stand for, with a pseudo sink by the rule of ``extract``."""
        first_in: dict[int, Edge] = {}
        first_out: dict[int, Edge] = {}
        for (src, dst), edge in self.edges.items():
            first_in.setdefault(dst, edge)
            first_out.setdefault(src, edge)
        exits = [i for i in range(len(self.families)) if i not in first_out]
        with_sink = self.needs_sink(exits, sink)
        tasks = buffers = edges = work = io = sympy.Integer(0)
        for (src, dst), edge in self.edges.items():
            edges += self.families[edge.over].count() if edge.over is not None else 1
            ends = [self.families[src].kind, self.families[dst].kind].count(NodeKind.BUFFER)
            if ends:
                volume = edge.volume(rule)
                io += ends * (self.families[edge.over].total(volume) if edge.over is not None else volume)
        for index, family in enumerate(self.families):
            if with_sink and index in exits:
                edges += family.count()
            if family.kind is NodeKind.BUFFER:
                buffers += 1
                continue
            tasks += family.count()
            incoming = self.seen_from(index, first_in.get(index), rule)
            outgoing = self.seen_from(index, first_out.get(index), rule)
            if outgoing is None and with_sink:
                outgoing = self.produced.get(index)
            if incoming is None:
                incoming = outgoing if outgoing is not None else sympy.Integer(0)
            cost = incoming if outgoing is None else sympy.Max(incoming, outgoing)
            work += family.total(cost)
        return SymbolicMetrics(*(_simplify(v) for v in (tasks, buffers, edges, work, io)), assumptions=assumptions)

    def needs_sink(self, exits: list[int], sink: str) -> bool:
        """Whether the DAG gets a pseudo sink: always, or (``"auto"``) when it has several exits."""
        if sink == "always":
            return True
        several = vol.decide(sympy.Gt(sum((self.families[i].count() for i in exits), sympy.Integer(0)), 1))
        if several is None:
            labels = ", ".join(self.families[i].label for i in exits)
            raise DcaccelError(f"symbolic metrics: cannot decide whether the exits ({labels}) are several; pass sizes")
        if several and sink == "never":
            raise DAGContractError("symbolic metrics: the DAG has several exits and sink='never'")
        return several

    def seen_from(self, index: int, edge: Edge | None, rule: str) -> sympy.Expr | None:
        """The volume of ``edge`` as one node of family ``index`` sees it (its first such edge)."""
        if edge is None:
            return None
        volume = vol.as_expr(edge.volume(rule))
        if edge.over is None or edge.over == index:
            return volume
        return volume.xreplace(self.families[edge.over].first())

    def materialise(self) -> tuple[list[Node], dict[tuple[int, int], Edge], dict[int, Any]]:
        """The nodes, edges and first writes of the DAG, each family expanded into its tasks (their number
        must be concrete); volumes over plain symbols, as :class:`~dcaccel.dag.taskdag.TaskDAG` keeps them."""
        nodes: list[Node] = []
        members: list[list[int]] = []
        substitutions: list[list[dict]] = []
        for family in self.families:
            if not family.multiple:
                members.append([len(nodes)])
                substitutions.append([{}])
                nodes.append(Node(family.kind, family.label, _plain_counts(family.info)))
                continue
            points = family.points()
            if points is None:
                raise DcaccelError(
                    f"extract: task map '{family.label}' has a symbolic number of iterations "
                    f"({_plain(family.count())}); pass symbols=..., use granularity='coarse' "
                    "or dcaccel.dag.symbolic.symbolic_metrics"
                )
            names = [p.name for p in family.params]
            members.append(list(range(len(nodes), len(nodes) + len(points))))
            substitutions.append([dict(zip(family.params, map(sympy.Integer, p), strict=True)) for p in points])
            for i, point in enumerate(points.tolist()):
                info = family.info.derive(
                    iteration=i,
                    index=tuple(zip(names, point, strict=True)),
                    macs=vol.as_expr(family.info.macs).xreplace(substitutions[-1][i]),
                    ops=vol.as_expr(family.info.ops).xreplace(substitutions[-1][i]),
                )
                nodes.append(Node(family.kind, f"{family.label}{i}", _plain_counts(info)))
        edges: dict[tuple[int, int], Edge] = {}
        for (src, dst), edge in self.edges.items():
            over = edge.over if edge.over is not None else src
            for i, substitution in enumerate(substitutions[over]):
                pair = (members[src][i if src == over else 0], members[dst][i if dst == over else 0])
                edges[pair] = Edge(
                    _plain(edge.exact.xreplace(substitution)), _plain(edge.reference.xreplace(substitution)), edge.via
                )
        produced = {
            members[index][i]: _plain(volume.xreplace(substitution))
            for index, volume in self.produced.items()
            for i, substitution in enumerate(substitutions[index])
        }
        return nodes, edges, produced


def _unrepairable(family: _Family, side: int, a, b, condition: sympy.Basic) -> DcaccelError:
    """The error for unequal volumes on edges from or into buffers (no repair applies): a
    :class:`DAGContractError` when they always differ, else the sizes must be given."""
    edges = f"{family.kind.value} '{family.label}' has {'in' if side == 0 else 'out'}-edges"
    if condition is sympy.true:
        return DAGContractError(f"symbolic metrics: {edges} with different volumes ({_plain(a)} and {_plain(b)})")
    return DcaccelError(
        f"symbolic metrics: {edges} whose volumes differ when {_plain(condition)}; pass the sizes (symbols=...)"
    )


def _plain_counts(info: TaskInfo) -> TaskInfo:
    """``info`` with its counts over plain symbols."""
    return info.derive(**{name: _plain(getattr(info, name)) for name in ("macs", "ops", "iterations")})


def _plain(value):
    """``value`` (an expression) over plain symbols."""
    if not isinstance(value, sympy.Basic):
        return value
    value = value.xreplace({s: sympy.Symbol(s.name) for s in value.free_symbols})
    return int(value) if value.is_Integer else value


def _simplify(expr: sympy.Expr):
    expr = sympy.simplify(vol.as_expr(expr).doit())
    return int(expr) if expr.is_Integer else expr


def symbolic_metrics(
    lowered,
    granularity: str | tuple = "task",
    edge_volume: str = "exact",
    *,
    sink: str = "auto",
    symbols: Mapping[str, int] | None = None,
) -> SymbolicMetrics:
    """Number of tasks, buffers and edges, work and I/O volume of the canonical task DAG of ``lowered``
    (a ``LoweredWorkload`` or a fully lowered SDFG) in closed form, without materialising the DAG.

    ``granularity``, ``edge_volume`` and ``sink`` are those of :func:`dcaccel.dag.extract` (tiles need a
    concrete number of iterations); ``symbols`` fixes some sizes and keeps the others symbolic.
    """
    from dcaccel.dag.scopes import read_program

    granularity = Granularity.parse(granularity)
    check_options("symbolic metrics", edge_volume, sink)
    program = read_program(getattr(lowered, "sdfg", lowered), symbols, positive_sizes=True)
    walk = walk_program(program, lambda: SymbolicGraph(granularity), edge_volume)
    assumptions = tuple(f.condition for f in walk.inserted.values() if f.condition is not sympy.true)
    return walk.graph.metrics(edge_volume, sink, assumptions).plain()
