"""Task timings and the insertion rule that places a task on one PE (``STREAMING_MODEL.md`` §4.3).

A PE's events are kept sorted by ``(end, start)``. A task of duration D that may start at ``est``
goes before the first event if it ends strictly before that event starts, else into the first
gap between consecutive events that holds it, else after the last event. Zero-length events
(buffers, pseudo nodes) are events too and split gaps, as in the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Timing:
    """Per node (indexed by id): PE, start, end and the time its first output element appears (never
    modified once built: the makespan is computed once)."""

    pe: list[int]
    start: list[int]
    end: list[int]
    first_output: list[int]

    @cached_property
    def makespan(self) -> int:
        return max(self.end, default=0)

    @cached_property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``pe``, ``start``, ``end`` and ``first_output`` as int64 arrays, built once."""
        return tuple(np.asarray(times, dtype=np.int64) for times in (self.pe, self.start, self.end, self.first_output))


def insertion_start(events: list[tuple[int, int]], est: int, duration_floor: int, duration_ceil: int) -> int:
    """The start the insertion rule gives a task ready at ``est`` on a PE whose ``(end, start)``
    events are ``events`` (sorted). The duration D may be a fraction; only ⌊D⌋ and ⌈D⌉ matter
    since all times are integers: x - D > 0 iff x > ⌊D⌋, and x - D >= 0 iff x >= ⌈D⌉."""
    if not events:
        return est
    if events[0][1] - est > duration_floor:
        return est
    last = len(events) - 1
    for idx in range(last):
        begin = est if est > events[idx][0] else events[idx][0]
        if events[idx + 1][1] - begin >= duration_ceil:
            return begin
    return max(est, events[last][0])
