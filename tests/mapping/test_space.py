"""The bounded mapping space and the off-chip stage's closed forms."""

import math

import pytest
import sympy

from dcaccel.errors import DcaccelError
from dcaccel.mapping.layers import LoopNest
from dcaccel.mapping.offchip import TILE_SYMBOLS, rank, traffic_expression
from dcaccel.mapping.realise import TASK_DIMENSION
from dcaccel.mapping.space import MappingSpace, bounded, divisors


@pytest.mark.parametrize(("extent", "expected"), [(1, [1]), (7, [1, 7]), (12, [1, 2, 3, 4, 6, 12]), (25, [1, 5, 25])])
def test_divisors(extent, expected):
    assert divisors(extent) == expected


@pytest.mark.parametrize(
    ("values", "limit", "expected"),
    [([1, 2, 3, 4, 6, 12], 3, (1, 3, 12)), ([1, 2, 3, 4, 6, 12], None, (1, 2, 3, 4, 6, 12)), ([1], 4, (1,))],
)
def test_bounded(values, limit, expected):
    assert bounded(values, limit) == expected


@pytest.mark.parametrize(
    ("nest", "pes", "tile_limit", "offchip"),
    [
        (LoopNest(6, 25, 576), (16,), 4, 3 * 4 * 3 * 4 * 3),  # the seed conv: 6 → 1,2,3,6; 25 → 1,5,25
        (LoopNest(1, 9, 784, groups=32), (4, 16), 4, 3 * 1 * 3 * 4 * 3),  # depthwise 3×3
        (LoopNest(1, 1, 1), (1,), None, 3 * 3),  # degenerate: one element
    ],
)
def test_space_size_is_its_formula(nest, pes, tile_limit, offchip):
    space = MappingSpace.of("n0", nest, pes=pes, tile_limit=tile_limit)
    assert space.offchip_size == offchip == len(list(space.offchip()))
    assert space.size == offchip * 2 * len(pes) * 2 == len(list(space.offchip())) * len(list(space.onchip()))
    left, right = space.formula.split(" = ")
    assert math.prod(int(c) for c in right.split("·")) == space.size
    assert left.count("|") == 2 * len(space.dimensions())


def test_space_refuses_unknown_choices():
    with pytest.raises(DcaccelError, match="implementations must be among"):
        MappingSpace.of("n0", LoopNest(2, 2, 2), implementations=("direct",))
    with pytest.raises(DcaccelError, match="PE counts"):
        MappingSpace.of("n0", LoopNest(2, 2, 2), pes=(0,))


@pytest.mark.parametrize(
    ("stay", "tiles", "expected"),
    [
        # C[4×8] = A[4×2]·B[2×8]: A 8, B 16, C 32 elements
        ("C", (4, 2, 8), 8 + 16 + 32),  # whole tiles: every operand once
        ("C", (1, 2, 2), 8 * 4 + 16 * 4 + 32),  # A re-read per m tile, B per n tile
        ("A", (4, 1, 8), 8 + 16 + 32 * 3),  # partial sums leave and return once per k tile but the first
        ("B", (2, 2, 4), 8 * 2 + 16 + 32),
    ],
)
def test_traffic_expression(stay, tiles, expected):
    values = dict(zip((TILE_SYMBOLS[d] for d in "nkm"), tiles, strict=True))
    assert traffic_expression(LoopNest(4, 2, 8), stay).subs(values) == sympy.Integer(expected)


def test_rank_respects_capacity_and_orders_by_traffic():
    space = MappingSpace.of("n0", LoopNest(4, 2, 8), implementations=("mv",), tile_limit=None)
    stage = rank(space, capacity=20, buffer_io=lambda implementation, tile: 100 * tile)
    assert stage.evaluated == space.offchip_size
    for ranked in stage.ranked:
        n, k, m = (dict(ranked.choice.tiles)[d] for d in "nkm")
        assert n * k + k * m + n * m <= 20
        assert ranked.buffer_io == 100 * m  # the task dimension of mv is m
    traffic = [r.traffic for r in stage.ranked]
    assert traffic == sorted(traffic) and stage.fitting == len(stage.ranked) < stage.evaluated
    assert len(stage.top(1)) == len({dict(r.choice.tiles)["m"] for r in stage.top(1)}) > 1  # one group: the m tiles


def _group(ranked):
    task = TASK_DIMENSION[ranked.choice.implementation]
    return ranked.choice.implementation, ranked.choice.stay, tuple(t for t in ranked.choice.tiles if t[0] != task)


@pytest.mark.parametrize(("k", "groups"), [(1, 1), (2, 2), (4, 4), (100, None)])
def test_top_keeps_one_choice_per_program(k, groups):
    # depthwise 3×3: n = 1, so the k tile changes no re-fetch under Stay(C) and many choices repeat
    space = MappingSpace.of("n0", LoopNest(1, 9, 784, groups=32), tile_limit=4)
    stage = rank(space, capacity=10_000, buffer_io=lambda implementation, tile: 1000 + tile)
    assert len(stage.members) == stage.fitting == space.offchip_size == 108
    kept = stage.top(k)
    programs = [choice.program for choice in kept]
    assert len(set(programs)) == len(programs)
    for choice in stage.members:  # a repeated program is kept as a choice of no more traffic
        if choice.program in programs:
            assert kept[programs.index(choice.program)].traffic <= choice.traffic
    if groups is None:  # more groups than hold a new program: every program once
        assert set(programs) == {choice.program for choice in stage.members} and len(kept) < stage.fitting
    else:
        assert len({_group(choice) for choice in kept}) == groups
    if k == 1:  # the best group is whole: its members differ in the task tile
        assert kept == stage.groups[0]
