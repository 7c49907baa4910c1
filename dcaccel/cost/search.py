"""The best mapping of one layer on a hierarchy: spatial unrolling, loop order, and tiles that fill memories.

The space and its order follow ZigZag 3.9's own search, so that two models of the same hardware search
the same mappings (``docs/validation.md``):

- *Spatial*: each array dimension unrolls one of the loops its ``spatial`` choices allow (by default every
  loop) by a divisor of min(loop extent, dimension size) (so a 112-long loop takes 32 on a 32-wide
  dimension and leaves ⌈112/32⌉ = 4 iterations); a loop may spread over several dimensions while its
  unrolling stays within its extent (C = 84 as 14 × 6); of these assignments the ``spatial_candidates``
  with the most units in use whose tiles fit the memories (with every temporal loop outside them) are
  searched, so a unit whose lanes share a small register still finds the unrollings it can hold.
- *Temporal*: what the unrolling leaves of each loop is split into its prime factors; while there are more
  than ``lpf_limit`` factors, the two smallest factors of the loop with the most factors are merged
  (LOMA's rule); every distinct order of the factors is tried, at most :data:`MAX_ORDERS` of them (a
  layer whose unrolling leaves 7 or 8 loops, each of one factor, has 7! or 8! orders: the first
  ``MAX_ORDERS`` in lexical order are searched, so a grouped, batched Conv stays seconds, not minutes).
- *Tiles*: memories are filled innermost first, as LOMA's allocator does (:func:`allocate`); the
  outermost memory of an operand takes what is left.

Each candidate is evaluated (:func:`dcaccel.cost.evaluate.evaluate`) and the best by ``objective``
(``makespan``: cycles, ZigZag's "latency"; ``energy``; ``edp``; ties: the other two) is kept.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from dcaccel.cost.evaluate import LayerCost, LayerMapping, Tiles, evaluate, fits, stored_bits
from dcaccel.cost.hierarchy import Hierarchy
from dcaccel.cost.nest import OPERANDS, LayerNest
from dcaccel.errors import DcaccelError
from dcaccel.mapping.onchip import check_objective
from dcaccel.mapping.space import divisors

#: The most temporal orders searched per spatial unrolling (6! = 720 under LOMA's default limit).
MAX_ORDERS = 720


def _prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return factors


def spatial_unrollings(
    nest: LayerNest,
    hierarchy: Hierarchy,
    choices: Mapping[str, Sequence[str]] | None = None,
    candidates: int = 3,
) -> list[tuple[tuple[str, str, int], ...]]:
    """The ``candidates`` unrollings of loops onto the array's dimensions that use the most units and whose
    tiles fit (ties: the order of the choices, larger factors first); ``[()]`` when none fits."""
    options = []
    for dim, size in hierarchy.array.items():
        allowed = [loop for loop in (choices or {}).get(dim, nest.loops) if nest.loops.get(loop, 1) > 1]
        unrolled = [
            (dim, loop, f) for loop in allowed for f in reversed(divisors(min(nest.loops[loop], size))) if f > 1
        ]
        options.append([*unrolled, (dim, None, 1)])
    found = []
    for combination in itertools.product(*options):
        unrolled: dict[str, int] = {}
        for _, loop, factor in combination:
            if loop is not None:
                unrolled[loop] = unrolled.get(loop, 1) * factor
        if all(factor <= nest.loops[loop] for loop, factor in unrolled.items()):
            found.append(tuple((d, loop, f) for d, loop, f in combination if loop is not None))
    unique = list(dict.fromkeys(found))
    unique.sort(key=lambda unrolling: -math.prod(f for _, _, f in unrolling))
    if not _holds(nest, hierarchy, ()):  # the smallest tiles: if they do not fit, no unrolling's do
        return [()]
    return list(itertools.islice((u for u in unique if _holds(nest, hierarchy, u)), candidates)) or [()]


def _holds(nest: LayerNest, hierarchy: Hierarchy, spatial) -> bool:
    """Whether the memories hold the tiles of ``spatial`` with every temporal loop outside them."""
    temporal = tuple(loop_factors(nest, spatial))
    bounds = {op: (*[0] * (len(hierarchy.levels(op)) - 1), len(temporal)) for op in OPERANDS}
    return fits(nest, hierarchy, LayerMapping(tuple(spatial), temporal, bounds)) is None


def loop_factors(nest: LayerNest, spatial, lpf_limit: int = 6) -> list[tuple[str, int]]:
    """The temporal loop factors left by ``spatial``: prime factors, merged down to ``lpf_limit`` (at least
    one per loop) by multiplying the two smallest of the loop with the most."""
    unrolled: dict[str, int] = {}
    for _, loop, factor in spatial:
        unrolled[loop] = unrolled.get(loop, 1) * factor
    factors = {}
    for loop, extent in nest.loops.items():
        remaining = math.ceil(extent / unrolled.get(loop, 1))
        if remaining > 1:
            factors[loop] = _prime_factors(remaining)
    limit = max(lpf_limit, len(factors))
    while sum(len(f) for f in factors.values()) > limit:
        loop = max(factors, key=lambda name: len(factors[name]))
        merged = sorted(factors[loop])
        factors[loop] = sorted([merged[0] * merged[1], *merged[2:]])
    return [(loop, factor) for loop in factors for factor in factors[loop]]


def _distinct_orders(items: list[tuple[str, int]]) -> Iterator[tuple[tuple[str, int], ...]]:
    """Every distinct order of ``items`` (a multiset), each once."""
    counts = Counter(items)
    keys = sorted(counts)
    order: list[tuple[str, int]] = []

    def extend():
        if len(order) == len(items):
            yield tuple(order)
            return
        for key in keys:
            if counts[key]:
                counts[key] -= 1
                order.append(key)
                yield from extend()
                order.pop()
                counts[key] += 1

    yield from extend()


def allocate(hierarchy: Hierarchy, tiles: Tiles) -> LayerMapping | None:
    """Fill the memories innermost first, as LOMA's allocator does: each memory takes, per operand it holds,
    a run of that operand's next loops, the combination whose tiles fit together and that least often
    refills them from the level above (Σ iterations outside × tile bits; ties: the later, longer runs).
    None: nothing fits."""
    temporal = tiles.temporal
    count = len(temporal)
    placed = dict.fromkeys(OPERANDS, 0)
    bounds: dict[str, list[int]] = {operand: [] for operand in OPERANDS}
    outermost = {operand: hierarchy.levels(operand)[-1] for operand in OPERANDS}
    for memory in hierarchy.memories:
        operands = sorted(memory.operands)
        options = []
        for operand in operands:
            if memory is outermost[operand]:
                options.append([(count, 0, 0)])
                continue
            choices = []
            for bound in range(placed[operand], count + 1):
                bits = tiles.footprint(operand, memory.served, bound) * stored_bits(hierarchy, tiles, operand, bound)
                if memory.size_bits is not None and bits > memory.size_bits:
                    break
                choices.append((bound, bits, tiles.iterations(bound) * bits))
            if not choices:
                return None
            options.append(choices)
        best, best_refills = None, None
        for combination in itertools.product(*options):
            if memory.size_bits is not None and sum(bits for _, bits, _ in combination) > memory.size_bits:
                continue
            refills = sum(refill for _, _, refill in combination)
            if best_refills is None or refills <= best_refills:
                best, best_refills = combination, refills
        if best is None:
            return None
        for operand, (bound, _, _) in zip(operands, best, strict=True):
            bounds[operand].append(bound)
            placed[operand] = bound
    return LayerMapping(tiles.spatial, temporal, {operand: tuple(bounds[operand]) for operand in OPERANDS})


def _key(cost: LayerCost, objective: str) -> tuple:
    energy, cycles = cost.energy_total_pj, cost.cycles
    return {
        "makespan": (cycles, energy),
        "energy": (energy, cycles),
        "edp": (energy * cycles, cycles, energy),
    }[objective]


def best_mapping(
    nest: LayerNest,
    hierarchy: Hierarchy,
    objective: str = "makespan",
    spatial_choices: Mapping[str, Sequence[str]] | None = None,
    spatial_candidates: int = 3,
    lpf_limit: int = 6,
) -> LayerCost:
    """The best :class:`LayerCost` of ``nest`` on ``hierarchy`` by ``objective`` over the space above."""
    check_objective(objective)
    best, best_key = None, None
    for spatial in spatial_unrollings(nest, hierarchy, spatial_choices, spatial_candidates):
        for temporal in itertools.islice(_distinct_orders(loop_factors(nest, spatial, lpf_limit)), MAX_ORDERS):
            tiles = Tiles(nest, spatial, temporal)
            mapping = allocate(hierarchy, tiles)
            if mapping is None:
                continue
            cost = evaluate(nest, hierarchy, mapping, tiles)
            key = _key(cost, objective)
            if best_key is None or key < best_key:
                best, best_key = cost, key
    if best is None:
        raise DcaccelError(f"layer {nest.name}: no mapping fits the memories of {hierarchy.name}")
    return best
