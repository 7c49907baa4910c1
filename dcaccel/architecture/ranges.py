"""The numbers of an architecture description: their types and documented ranges.

Every number is strict (``true`` or ``"16"`` is not a number, an integer field takes no fraction) and
finite, and lies in a range (``docs/architecture_description.md``, "Ranges") chosen so that what the
schedulers compute from it stays exact and finite: a rate or bandwidth becomes a fraction whose
denominator is at most 2**20 (:mod:`dcaccel.cost.rates`), so none may be so small that it
rounds to zero, and energies, areas and times multiplied by the largest counts and volumes stay far
below the largest float and int64.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

#: The most units of one kind (a count, a mesh's rows or cols, an open count's P). A schedule places
#: at most one node per unit, so it never instantiates more units of a kind than its DAG has nodes.
MAX_UNITS = 2**40
#: Elements (or MACs) per cycle of a unit, also at the reference clock (× frequency_mhz / clock_mhz).
MIN_RATE, MAX_RATE = 1e-6, 1e9
#: Bytes per cycle of a memory or a link (at the largest element, still MIN_RATE elements per cycle).
MIN_BANDWIDTH, MAX_BANDWIDTH = 1e-3, 1e9
#: A clock in MHz (1 kHz to 1 THz).
MIN_CLOCK_MHZ, MAX_CLOCK_MHZ = 1e-3, 1e6
#: Picojoules per element read, written or moved, or per MAC.
MAX_ENERGY_PJ = 1e6
#: Square millimetres of one unit or memory.
MAX_AREA_MM2 = 1e6
#: Bytes per element.
MAX_ELEMENT_BYTES = 256
#: Bytes of one memory (1 PiB).
MAX_CAPACITY_BYTES = 2**50
#: Cycles of a link's latency.
MAX_LATENCY_CYCLES = 10**9
#: Unit kinds and memories of a description (each), links of a description.
MAX_KINDS = 64
MAX_LINKS = 1024
#: Entries of any other list: a unit's ops, support rules and patterns, a support rule's constraints.
MAX_ENTRIES = 1024


def _plus_zero(value: float) -> float:
    """-0.0 as 0.0 (a figure never prints as -0)."""
    return value + 0.0


def count(high: int):
    """An integer of at least 1 and at most ``high``."""
    return Annotated[int, Field(strict=True, gt=0, le=high)]


def amount(low: float, high: float):
    """A finite number (an integer is taken as one) in ``[low, high]``."""
    return Annotated[float, Field(strict=True, ge=low, le=high, allow_inf_nan=False), AfterValidator(_plus_zero)]


Units = count(MAX_UNITS)
Rate = amount(MIN_RATE, MAX_RATE)
Bandwidth = amount(MIN_BANDWIDTH, MAX_BANDWIDTH)
Clock = amount(MIN_CLOCK_MHZ, MAX_CLOCK_MHZ)
Energy = amount(0.0, MAX_ENERGY_PJ)
Area = amount(0.0, MAX_AREA_MM2)
ElementBytes = count(MAX_ELEMENT_BYTES)
Capacity = count(MAX_CAPACITY_BYTES)
Latency = Annotated[int, Field(strict=True, ge=0, le=MAX_LATENCY_CYCLES)]
#: A constraint of a support rule (a kernel size, a stride, a group count, a tensor's elements).
Positive = count(2**62)
