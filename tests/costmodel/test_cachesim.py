"""The cache model: a window of accesses of a loop nest, and where they miss."""

import numpy as np
import pytest

from dcaccel.costmodel.cachesim import (
    LEVELS,
    WINDOW,
    Access,
    Level,
    Loop,
    access_window,
    container_base,
    miss_rates,
)


def _patch_writes(stride_bytes: int, columns: int = 256, patch: int = 147) -> np.ndarray:
    """An im2col's writes: for each column, ``patch`` elements ``stride_bytes`` apart (the next column 4 bytes on)."""
    loops = [Loop(0, 1, columns), Loop(0, 1, patch)]
    return access_window(loops, [Access(0, 4, lambda column, k: column + k * (stride_bytes // 4), np.zeros(1, int))])


@pytest.mark.parametrize(
    ("stride_bytes", "l1"),
    [
        (4096, 1.0),  # 147 lines in one set of 8 ways: every write misses
        (25600, 1.0),  # 400 lines apart: 4 sets, 32 lines
        (3136, 1 / 16),  # 49 lines apart: every set; a line serves 16 columns
    ],
)
def test_set_conflicts_of_a_strided_patch(stride_bytes, l1):
    rates = miss_rates(_patch_writes(stride_bytes))
    assert rates["l1"] == pytest.approx(l1, rel=0.01)
    assert rates["l2"] <= rates["l1"]


def test_a_reduction_a_page_apart_misses_the_tlb():
    # 16,384 outputs, each the sum of 147 partial sums 64 KiB apart: every read a page the DTLB no longer holds
    loops = [Loop(0, 1, 16384)]
    reads = Access(0, 4, lambda j: j, np.arange(147) * 16384)
    write = Access(container_base(1), 4, lambda j: j, np.zeros(1, int))
    rates = miss_rates(access_window(loops, [reads, write]))
    assert rates["dtlb"] == pytest.approx(147 / 148, rel=0.01)
    assert rates["stlb"] < 0.01  # 147 pages fit the second-level TLB


def test_the_window_is_whole_iterations_in_loop_order():
    loops = [Loop(2, 3, 4), Loop(0, 1, 5)]
    read = Access(0, 8, lambda i, k: 10 * i + k, np.array([0, 1]))
    write = Access(1000, 4, lambda i, k: i, np.zeros(1, int))
    addresses = access_window(loops, [read, write], budget=7)
    # two iterations (three accesses each): (i=2, k=0), (i=2, k=1)
    assert addresses.tolist() == [160, 168, 1008, 168, 176, 1008]
    assert len(access_window(loops, [read, write])) == 4 * 5 * 3


@pytest.mark.parametrize("loops", [[Loop(0, 1, 0)], [Loop(0, 1, 3)]])
def test_no_accesses_no_misses(loops):
    accesses = [] if loops[0].count else [Access(0, 4, lambda i: i, np.zeros(1, int))]
    addresses = access_window(loops, accesses)
    assert len(addresses) == 0
    assert miss_rates(addresses) == dict.fromkeys((level.name for level in LEVELS), 0.0)


def test_a_level_sees_the_misses_of_the_one_before():
    # a stream of 64 KiB, then the same again: the L1 (32 KiB) misses it both times, the L2 (1 MiB) once
    stream = np.arange(0, 1 << 16, 4)
    rates = miss_rates(np.concatenate([stream, stream]))
    assert (rates["l1"], rates["l2"]) == (1 / 16, 1 / 32)


def test_least_recently_used_replacement():
    # one set of two ways: a, b miss; a hits; c misses and evicts b (used least recently); b misses and evicts
    # a; a misses
    level = Level("tiny", 1, 2, 64)
    addresses = np.array([0, 64, 0, 128, 64, 0])
    rates = miss_rates(addresses, levels=(level,))
    assert rates["tiny"] == pytest.approx(5 / 6)


def test_the_window_is_bounded():
    addresses = _patch_writes(4, columns=4096)
    assert len(addresses) <= WINDOW
