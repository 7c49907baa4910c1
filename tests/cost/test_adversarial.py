"""Adversarial designs and layers for the loop-nest model (issue 22, "Trust, round two"): each ends in a
one-line error or a right number, never a traceback or a silently wrong figure."""

import math

import pytest

from dcaccel.architecture import Architecture
from dcaccel.cost.architecture import hierarchy
from dcaccel.cost.hierarchy import Hierarchy, Memory
from dcaccel.cost.nest import conv_nest, product_nest
from dcaccel.cost.search import best_mapping, spatial_unrollings
from dcaccel.errors import DcaccelError

#: One unit of 16 MAC lanes sharing a 4-byte weight register: at most 4 weights in the lanes at once.
LANES = """
name: lanes
element_bytes: 1
units:
  pe: {count: 1, macs_per_cycle: 16, energy_per_mac_pj: 1}
memories:
  wreg: {level: local, unit: pe, capacity_bytes: 4, operands: [weights], read_energy_pj: 0.1, write_energy_pj: 0.1}
  dram: {level: offchip, read_energy_pj: 100, write_energy_pj: 100}
"""


def test_lanes_that_overflow_a_shared_register_leave_unrollings_that_fit():
    nest = product_nest("fc", 8, 8, 1)  # K 8, C 8, D 1: 64 MACs, 64 weights
    target = hierarchy(Architecture.from_yaml(LANES), "pe")
    unrollings = spatial_unrollings(nest, target)
    assert unrollings == [(("lanes", "K", 4),), (("lanes", "C", 4),), (("lanes", "K", 2),)]
    cost = best_mapping(nest, target)
    assert cost.macs == 64 and cost.cycles >= math.ceil(64 / 4)
    assert cost.bits("dram") / 8 >= 64 + 8 + 8  # every weight, input and output at least once


def test_a_unit_at_another_clock_is_refused():
    faster = LANES.replace("energy_per_mac_pj: 1}", "energy_per_mac_pj: 1, frequency_mhz: 2000}")
    message = r"^units\.pe\.frequency_mhz: .* 2000 MHz is not the architecture's clock_mhz 1000$"
    with pytest.raises(DcaccelError, match=message):
        hierarchy(Architecture.from_yaml(faster), "pe")


@pytest.mark.slow
def test_a_layer_with_eight_temporal_loops_searches_a_bounded_number_of_orders():
    """A grouped, batched Conv on one unit leaves all 8 loops temporal (8! = 40,320 orders, minutes of
    search): at most MAX_ORDERS of them are evaluated."""
    from dcaccel.cost import search

    nest = conv_nest("g", {"group": 2}, (10, 3, 3, 3), (2, 10, 7, 7))
    assert len(search.loop_factors(nest, ())) == 8
    memories = (
        Memory("rf", frozenset("WIO"), 4096, math.inf, math.inf, 8, 8, 1.0, 1.0),
        Memory("dram", frozenset("WIO"), None, math.inf, math.inf, 8, 8, 1.0, 1.0, frozenset({"u"})),
    )
    target = Hierarchy("one", {"u": 1}, memories, 1.0)
    evaluated = []
    original = search.evaluate
    try:
        search.evaluate = lambda *args: evaluated.append(1) or original(*args)
        cost = search.best_mapping(nest, target)
    finally:
        search.evaluate = original
    assert len(evaluated) <= search.MAX_ORDERS
    assert cost.temporal_cycles == nest.macs  # one unit: every MAC in its own cycle
