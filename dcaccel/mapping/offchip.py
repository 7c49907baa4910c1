"""The off-chip stage: rank the off-chip choices of a layer by off-chip traffic, without scheduling.

The traffic of a choice (in elements) is the sum of two closed forms:

- the *re-fetch traffic of the tiled loop nest* (Marvel's off-chip model): with tiles (tn, tk, tm)
  of C[n×m] = A[n×k]·B[k×m] (``groups`` times) and the operand ``stay`` kept resident, an operand
  that is not resident is fetched once per tile of the loop that does not index it:

  ======  =====================================================================
  stay    traffic
  ======  =====================================================================
  ``C``   A·m/tm + B·n/tn + C                  (partial sums stay on chip)
  ``A``   A + B·n/tn + C·(2·k/tk − 1)          (partial sums leave and return)
  ``B``   A·m/tm + B + C·(2·k/tk − 1)
  ======  =====================================================================

  built once per layer and order as a SymPy expression in tn, tk, tm and evaluated for every tile
  choice at once with ``lambdify``; a choice is kept only when its tiles fit on chip,
  tn·tk + tk·tm + tn·tm ≤ the architecture's on-chip capacity in elements. The re-fetches beyond
  one pass (traffic − A − B − C) are the choice's ``refetch``;
- the *buffer traffic of the realised program*: the I/O volume (Σ over buffer nodes of the volume in
  and out, :func:`dcaccel.dag.metrics.io_volume`) of the layer's task DAG with the implementation and
  the task granularity of the choice, one extraction per (implementation, task tile), never a schedule.

The tile of the implementation's task dimension is also the task granularity, which decides how
many PEs the layer can use: that is the on-chip subspace's parallelisation (Marvel's split). The stage
therefore ranks *groups*: the choices that differ only in the task tile form one group, ranked by its
least traffic; :meth:`OffchipStage.top` returns the fitting members of the ``k`` best groups, and the
on-chip stage picks their task tile along with fusion and placement (ties: fewer re-fetches, then the
order of the space). Choices of the same implementation, task tile and re-fetches realise the same
program with the same extra traffic, so they cost the same under every on-chip choice: ``top`` keeps
the first of them and counts only groups that still hold a member.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import sympy

from dcaccel.mapping.layers import LoopNest
from dcaccel.mapping.realise import TASK_DIMENSION
from dcaccel.mapping.space import MappingSpace, OffchipChoice

TILE_SYMBOLS = {name: sympy.Symbol(f"t{name}", positive=True, integer=True) for name in ("n", "k", "m")}


def traffic_expression(nest: LoopNest, stay: str) -> sympy.Expr:
    """Off-chip traffic (elements) of the tiled loop nest of ``nest`` with ``stay`` resident."""
    tn, tk, tm = (TILE_SYMBOLS[name] for name in ("n", "k", "m"))
    volumes = nest.operand_volumes
    a, b, c = (sympy.Integer(volumes[name]) for name in ("A", "B", "C"))
    partial_sums = c * (2 * nest.k / tk - 1)
    return {
        "C": a * nest.m / tm + b * nest.n / tn + c,
        "A": a + b * nest.n / tn + partial_sums,
        "B": a * nest.m / tm + b + partial_sums,
    }[stay]


def footprint_expression() -> sympy.Expr:
    """Elements on chip for one tile of each operand: tn·tk + tk·tm + tn·tm."""
    tn, tk, tm = (TILE_SYMBOLS[name] for name in ("n", "k", "m"))
    return tn * tk + tk * tm + tn * tm


@dataclass(frozen=True)
class RankedChoice:
    """An off-chip choice with its traffic: re-fetches of the tiled nest plus the program's buffer I/O."""

    choice: OffchipChoice
    refetch: int
    buffer_io: int

    @property
    def traffic(self) -> int:
        return self.refetch + self.buffer_io

    @property
    def program(self) -> tuple[str, int, int]:
        """What decides the choice's cost: implementation, task tile (the realised program), re-fetches."""
        implementation = self.choice.implementation
        return implementation, dict(self.choice.tiles)[TASK_DIMENSION[implementation]], self.refetch


@dataclass(frozen=True)
class OffchipStage:
    """What the off-chip stage did: every choice that fits, ranked, and how many were evaluated.

    ``groups``: the fitting choices grouped by everything but the task tile, best group first, each
    group least traffic first; ``ranked``: the fitting choices, least traffic first."""

    groups: list[list[RankedChoice]]
    evaluated: int

    @property
    def ranked(self) -> list[RankedChoice]:
        return sorted((c for group in self.groups for c in group), key=lambda c: (c.traffic, c.refetch))

    @property
    def fitting(self) -> int:
        return sum(len(group) for group in self.groups)

    @property
    def members(self) -> list[RankedChoice]:
        """Every fitting choice, group by group (what the exhaustive search schedules)."""
        return [choice for group in self.groups for choice in group]

    def top(self, k: int) -> list[RankedChoice]:
        """The distinct members of the ``k`` best groups that hold any.

        Two choices with the same implementation, task tile and re-fetches realise the same program
        and add the same re-fetch cost, so they cost the same under every on-chip choice: only the
        first in rank order is kept, and a group whose members all repeat earlier ones is skipped."""
        seen, kept, groups = set(), [], 0
        for group in self.groups:
            fresh = [choice for choice in group if choice.program not in seen]
            if not fresh:
                continue
            seen.update(choice.program for choice in fresh)
            kept.extend(fresh)
            groups += 1
            if groups == k:
                break
        return kept


def rank(space: MappingSpace, capacity: int, buffer_io: Callable[[str, int], int]) -> OffchipStage:
    """Every off-chip choice of ``space`` that fits ``capacity`` elements, least traffic first.

    ``buffer_io(implementation, task_tile)`` is the I/O volume of the realised program.
    """
    names = [name for name, _ in space.tiles]
    symbols = [TILE_SYMBOLS[name] for name in names]
    choices = list(space.offchip())
    tiles = np.array([[size for _, size in choice.tiles] for choice in choices], dtype=np.int64)
    columns = [tiles[:, i].astype(float) for i in range(len(names))]
    fits = sympy.lambdify(symbols, footprint_expression(), "numpy")(*columns) <= capacity
    compulsory = sum(space.nest.operand_volumes.values())
    traffic = np.zeros(len(choices))
    for stay in space.orders:
        selected = np.array([choice.stay == stay for choice in choices])
        function = sympy.lambdify(symbols, traffic_expression(space.nest, stay), "numpy")
        traffic[selected] = np.broadcast_to(function(*columns), traffic.shape)[selected]
    ranked = []
    for index in np.flatnonzero(fits):
        choice = choices[index]
        task_tile = dict(choice.tiles)[TASK_DIMENSION[choice.implementation]]
        refetch = int(round(traffic[index])) - compulsory
        ranked.append((index, RankedChoice(choice, refetch, buffer_io(choice.implementation, task_tile))))
    ranked.sort(key=lambda item: (item[1].traffic, item[1].refetch, item[0]))
    groups: dict[tuple, list[RankedChoice]] = {}
    for _, item in ranked:
        choice = item.choice
        task = TASK_DIMENSION[choice.implementation]
        key = (choice.implementation, choice.stay, tuple(t for t in choice.tiles if t[0] != task))
        groups.setdefault(key, []).append(item)
    return OffchipStage(list(groups.values()), len(choices))
