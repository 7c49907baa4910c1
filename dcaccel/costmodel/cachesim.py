"""A window of a step's memory accesses run through a model of this machine's data caches and TLBs.

What a step costs per element depends on where its accesses hit: an im2col writing 576-element patches
4,096 bytes apart puts every line into one set of the L1 cache and 32 of the L2, fewer lines than the patch,
and misses the L1 and the L2 on every write, half its accesses (10.3 ns an element); the same patches 9,216
bytes apart spread over 128 sets of the L2 and hit (2.2 ns). A reduction that reads its partial sums a page
apart misses the TLB once the pages outnumber its entries. Strides and footprints alone do not tell these
apart; running the accesses through the caches does, in part (docs/costmodel.md, "The cache features", says
what it misses).

:func:`access_window` lists the first :data:`WINDOW` accesses of a loop nest (:class:`Loop`, outermost
first) whose body makes some accesses (:class:`Access`: an element offset that is a function of the loop
parameters, and the elements a tasklet reads or writes around it); :func:`miss_rates` runs them through
:data:`LEVELS`, each a set-associative cache with least-recently-used replacement that sees the misses of
the level before it, and returns each level's misses per access.

The levels are this machine's (AMD EPYC, Zen 4, read from sysfs: L1d 32 KiB 8-way, L2 1 MiB 8-way, 64-byte
lines; the L1 DTLB, 72 entries, fully associative, and the L2 DTLB, 3,072 entries (12-way here, an
assumption), from AMD's optimisation guide; 4 KiB pages, as transparent huge pages are given only on request
here). The learned models are of this machine; on another, these are the numbers to change (and the rows to
measure anew).
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Level:
    """A set-associative cache (or TLB) with least-recently-used replacement: ``sets`` sets of ``ways``
    blocks of ``block`` bytes (a line, or a page for a TLB)."""

    name: str
    sets: int
    ways: int
    block: int


#: The caches and TLBs an access goes through, in the order it meets them; a level sees the misses of the
#: level before it of the same kind (caches of lines, TLBs of pages).
LEVELS = (
    Level("l1", 64, 8, 64),
    Level("l2", 2048, 8, 64),
    Level("dtlb", 1, 72, 4096),
    Level("stlb", 256, 12, 4096),
)
#: Accesses simulated of a step (the first ones, in the loops' order).
WINDOW = 1 << 15
#: Where the containers of a step are placed: the k-th at k times this many bytes, plus k times
#: :data:`STAGGER` (so that two containers do not start in the same cache set, as nothing aligns them so;
#: the stagger is less than a page: the first few start in one set of the TLBs).
SPACING = 1 << 32
STAGGER = 17 * 64


@dataclass(frozen=True)
class Loop:
    """A loop of a nest: its first value, its step and its number of iterations."""

    begin: int
    step: int
    count: int


@dataclass(frozen=True)
class Access:
    """A tasklet's access in the body of a loop nest: its container's place (``base``, bytes), its element
    size, its first element's offset as a function of the loop parameters (``offset``: arrays of the
    parameters' values, outermost first, to an array of element offsets) and the offsets of the elements it
    touches relative to that one (one ``0`` for a single element; in order for a subset of several)."""

    base: int
    itemsize: int
    offset: Callable[..., np.ndarray]
    pattern: np.ndarray


def container_base(index: int) -> int:
    """The address of the ``index``-th container of a step (:data:`SPACING`, :data:`STAGGER`)."""
    return index * (SPACING + STAGGER)


def access_window(loops: Sequence[Loop], accesses: Sequence[Access], budget: int = WINDOW) -> np.ndarray:
    """The byte addresses of the first accesses of the nest (at most ``budget``, whole iterations), in
    order: iteration after iteration of the innermost loop, and in each the accesses in the given order."""
    per_iteration = sum(len(access.pattern) for access in accesses)
    total = math.prod(loop.count for loop in loops)
    if per_iteration == 0 or total == 0:
        return np.zeros(0, dtype=np.int64)
    iterations = max(1, min(total, budget // per_iteration))
    digits = np.unravel_index(np.arange(iterations), [loop.count for loop in loops]) if loops else ()
    values = [loop.begin + loop.step * digit for loop, digit in zip(loops, digits, strict=True)]
    columns = []
    for access in accesses:
        first = np.broadcast_to(np.asarray(access.offset(*values), dtype=np.int64), (iterations,))
        columns.append(access.base + access.itemsize * (first[:, None] + access.pattern[None, :]))
    return np.hstack(columns).reshape(-1)[:budget]


def miss_rates(addresses: np.ndarray, levels: Sequence[Level] = LEVELS) -> dict[str, float]:
    """Each level's misses per access of ``addresses``, the levels empty at the first (0 for no accesses).
    Remembered by the addresses' digest: the steps two assignments of one program share (an im2col, an
    activation) are simulated once per process."""
    key = (hashlib.blake2b(addresses.tobytes(), digest_size=16).digest(), tuple(levels))
    if key not in _REMEMBERED:
        _REMEMBERED[key] = _simulate(addresses, levels)
    return dict(_REMEMBERED[key])


#: :func:`miss_rates` of the windows simulated in this process (a few floats each).
_REMEMBERED: dict[tuple[bytes, tuple[Level, ...]], dict[str, float]] = {}


def _simulate(addresses: np.ndarray, levels: Sequence[Level]) -> dict[str, float]:
    rates = {}
    seen = {"line": addresses, "page": addresses}
    for level in levels:
        kind = "page" if level.block >= 4096 else "line"
        missed = seen[kind][_misses(seen[kind], level)]
        rates[level.name] = len(missed) / len(addresses) if len(addresses) else 0.0
        seen[kind] = missed
    return rates


def _misses(addresses: np.ndarray, level: Level) -> np.ndarray:
    """The positions in ``addresses`` of the accesses that miss in ``level`` (an access to the block of the
    access just before hits and leaves the order of the set as it is)."""
    blocks = addresses // level.block
    if len(blocks) == 0:
        return np.zeros(0, dtype=np.int64)
    fresh = np.flatnonzero(np.concatenate(([True], blocks[1:] != blocks[:-1])))
    sets: dict[int, OrderedDict[int, None]] = {}
    missed = []
    for position, block in zip(fresh.tolist(), blocks[fresh].tolist(), strict=True):
        ways = sets.get(block % level.sets)
        if ways is None:
            ways = sets[block % level.sets] = OrderedDict()
        if block in ways:
            ways.move_to_end(block)
            continue
        missed.append(position)
        if len(ways) == level.ways:
            ways.popitem(last=False)
        ways[block] = None
    return np.array(missed, dtype=np.int64)
