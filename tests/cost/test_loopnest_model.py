"""The loop-nest cost model on hierarchies small enough to count by hand."""

import dataclasses
import math

import pytest

from dcaccel.cost.evaluate import LayerMapping, evaluate, fits
from dcaccel.cost.hierarchy import Hierarchy, Memory
from dcaccel.cost.nest import conv_nest, product_nest
from dcaccel.cost.search import best_mapping, loop_factors, spatial_unrollings
from dcaccel.errors import DcaccelError

ALL = frozenset("WIO")


def _memory(name, size_bits, served=frozenset(), operands=ALL, bandwidth=math.inf, energy=1.0):
    return Memory(name, operands, size_bits, bandwidth, bandwidth, 8, 8, energy, energy, served)


def _hierarchy(units: int, rf_bits: int | None, dram_bandwidth=math.inf) -> Hierarchy:
    array = {"u": units}
    memories = (
        _memory("rf", rf_bits, energy=1.0),
        _memory("dram", None, frozenset(array), bandwidth=dram_bandwidth, energy=100.0),
    )
    return Hierarchy("tiny", array, memories, 0.5, {"W": 8, "I": 8, "O": 8, "psum": 8})


@pytest.mark.parametrize(
    ("extents", "expected"),
    # stride 2: four output columns of a one-column window read every other input column (4, not 7);
    # with a three-column window they read the 9 columns they span
    [({}, 3), ({"OX": 4}, 3 * 4), ({"OX": 4, "FX": 3}, 3 * 9), ({"OY": 2, "FY": 2, "OX": 1}, 3 * 4)],
)
def test_input_footprint_is_the_sliding_window(extents, expected):
    nest = conv_nest("c", {"strides": [2, 2]}, (8, 3, 3, 3), (1, 8, 5, 5))
    assert nest.footprint("I", {"C": 3, **extents}) == expected


def test_relevance_follows_the_indices():
    nest = conv_nest("c", {}, (8, 3, 3, 3), (1, 8, 5, 5))
    assert [loop for loop in nest.loops if nest.relevant("O", loop)] == ["B", "G", "K", "OY", "OX"]
    assert not nest.relevant("I", "K") and nest.relevant("I", "FX") and not nest.relevant("W", "OX")
    assert nest.macs == 8 * 3 * 3 * 3 * 5 * 5
    assert nest.size("I") == 3 * 7 * 7  # the input the outputs read (no padding here)


def test_incremental_footprints_equal_the_direct_ones():
    nest = conv_nest("c", {"strides": [2, 2], "dilations": [2, 1]}, (8, 3, 3, 3), (1, 8, 5, 5))
    steps = [("OX", 5), ("FY", 3), ("K", 2), ("OY", 5), ("FX", 3), ("C", 3)]
    extents, direct = {}, []
    direct.append(nest.footprint("I", extents))
    for loop, factor in steps:
        extents[loop] = extents.get(loop, 1) * factor
        direct.append(nest.footprint("I", extents))
    assert nest.footprints("I", {}, steps) == direct


def test_everything_on_chip_moves_each_operand_once():
    """K=4 outputs of C=8 inputs on one unit whose register file holds all of it: DRAM reads W (32) and I
    (8) once and receives the 4 outputs once."""
    nest = product_nest("mv", 4, 8, 1)
    hierarchy = _hierarchy(1, rf_bits=8 * (32 + 8 + 4))
    mapping = LayerMapping((), (("C", 8), ("K", 4)), {"W": (2, 2), "I": (2, 2), "O": (2, 2)})
    assert fits(nest, hierarchy, mapping) is None
    cost = evaluate(nest, hierarchy, mapping)
    dram = {op: cost.traffic[("dram", op)] for op in "WIO"}
    assert (dram["W"].read_elements, dram["I"].read_elements) == (32, 8)
    assert (dram["O"].write_elements, dram["O"].read_elements) == (4, 0)
    assert cost.temporal_cycles == 32 and cost.macs == 32
    # the register file feeds every MAC its weight and its input (C, inner, indexes both)
    rf = {op: cost.traffic[("rf", op)] for op in "WIO"}
    assert rf["W"].read_elements == 32 and rf["I"].read_elements == 32
    # the unit keeps no partial sum: every MAC writes it to the register file, and all but the first of
    # each output's 8 MACs read it back
    assert rf["O"].write_elements == 32 and rf["O"].read_elements == 28 + 4  # and the 4 finals read to go up


def test_stationarity_and_refetch_by_hand():
    """The register file holds one element of each operand: nothing is kept between MACs but what the loop
    order keeps at the unit, so DRAM serves every weight once (W is indexed by both loops), the input once
    per K iteration (K outer: I refetched 4 times) and each output once (C inner: accumulated in place)."""
    nest = product_nest("mv", 4, 8, 1)
    hierarchy = _hierarchy(1, rf_bits=3 * 8)
    mapping = LayerMapping((), (("C", 8), ("K", 4)), {"W": (0, 2), "I": (0, 2), "O": (0, 2)})
    cost = evaluate(nest, hierarchy, mapping)
    assert cost.traffic[("dram", "W")].read_elements == 32
    assert cost.traffic[("dram", "I")].read_elements == 32
    assert cost.traffic[("dram", "O")].write_elements == 4
    # loop order K inside: the input stays while K iterates, outputs are revisited C times
    swapped = LayerMapping((), (("K", 4), ("C", 8)), {"W": (0, 2), "I": (0, 2), "O": (0, 2)})
    cost = evaluate(nest, hierarchy, swapped)
    assert cost.traffic[("dram", "I")].read_elements == 8
    assert cost.traffic[("dram", "O")].write_elements == 32  # 4 outputs × 8 visits
    assert cost.traffic[("dram", "O")].read_elements == 28  # every visit but the first reads back


def test_a_transfer_rounds_up_to_whole_accesses():
    """A register file read and written in 24-bit accesses (ZigZag's ``bandwidth_min``): each transfer of one
    8-bit element costs a whole access, three elements' energy; DRAM, accessed by the element, is unchanged."""
    nest = product_nest("mv", 4, 8, 1)
    mapping = LayerMapping((), (("C", 8), ("K", 4)), {op: (0, 2) for op in "WIO"})
    plain = _hierarchy(1, rf_bits=3 * 8)
    rf, dram = plain.memories
    stepped = dataclasses.replace(
        plain, memories=(dataclasses.replace(rf, read_step_bits=24, write_step_bits=24), dram)
    )
    before, after = evaluate(nest, plain, mapping), evaluate(nest, stepped, mapping)
    assert after.energy_pj["rf"] == 3 * before.energy_pj["rf"]
    assert after.energy_pj["dram"] == before.energy_pj["dram"]
    assert after.traffic == before.traffic  # the bits moved are the data's; only the energy rounds


def test_multicast_reads_once_and_writes_every_copy():
    """K unrolled over 4 units: the input is irrelevant to K, so DRAM sends each input element once and
    each unit's register file receives it."""
    nest = product_nest("mv", 4, 8, 1)
    hierarchy = _hierarchy(4, rf_bits=8 * (8 + 8 + 1))
    mapping = LayerMapping((("u", "K", 4),), (("C", 8),), {"W": (1, 1), "I": (1, 1), "O": (1, 1)})
    cost = evaluate(nest, hierarchy, mapping)
    assert cost.traffic[("dram", "I")].read_elements == 8
    assert cost.traffic[("rf", "I")].write_elements == 32
    assert cost.traffic[("dram", "W")].read_elements == 32
    assert cost.temporal_cycles == 8 and cost.ideal_cycles == 8


def test_bandwidth_stalls_the_array():
    nest = product_nest("mv", 4, 8, 1)
    fast = evaluate(nest, _hierarchy(1, 3 * 8), LayerMapping((), (("C", 8), ("K", 4)), {op: (0, 2) for op in "WIO"}))
    slow = evaluate(
        nest,
        _hierarchy(1, 3 * 8, dram_bandwidth=4),
        LayerMapping((), (("C", 8), ("K", 4)), {op: (0, 2) for op in "WIO"}),
    )
    assert fast.stall_cycles == 0
    assert slow.cycles > fast.cycles and slow.stall_cycles > 0
    assert slow.energy_total_pj == fast.energy_total_pj


@pytest.mark.slow
def test_search_never_goes_below_compulsory_traffic():
    nest = conv_nest("c", {"strides": [1, 1]}, (16, 8, 3, 3), (1, 16, 6, 6))
    hierarchy = _hierarchy(4, rf_bits=8 * 64)
    cost = best_mapping(nest, hierarchy, "energy")
    compulsory = nest.size("W") + nest.size("I") + nest.size("O")
    dram = sum(t.read_elements + t.write_elements for (name, _), t in cost.traffic.items() if name == "dram")
    assert dram >= compulsory
    assert fits(nest, hierarchy, cost.mapping) is None
    assert cost.temporal_cycles >= cost.ideal_cycles == math.ceil(nest.macs / 4)


def test_spatial_candidates_use_most_units():
    nest = conv_nest("c", {}, (64, 64, 3, 3), (1, 64, 56, 56))
    hierarchy = Hierarchy(
        "a", {"D1": 14, "D2": 12}, (_memory("rf", 1024), _memory("dram", None, frozenset({"D1", "D2"}))), 1.0
    )
    unrollings = spatial_unrollings(nest, hierarchy, {"D1": ["K"], "D2": ["C", "OY"]})
    assert unrollings[0] in ((("D1", "K", 14), ("D2", "C", 12)), (("D1", "K", 14), ("D2", "OY", 12)))
    # 64 on 14: the divisor 14 of min(64, 14), leaving ceil(64 / 14) = 5 iterations
    assert ("K", 5) in loop_factors(nest, unrollings[0])


def test_lpf_limit_merges_the_smallest_factors():
    nest = product_nest("p", 64, 64, 1)
    factors = loop_factors(nest, (), lpf_limit=6)
    assert len(factors) == 6
    assert math.prod(f for loop, f in factors if loop == "K") == 64
    assert math.prod(f for loop, f in factors if loop == "C") == 64


def test_a_mapping_that_misses_iterations_is_refused():
    nest = product_nest("mv", 4, 8, 1)
    with pytest.raises(DcaccelError, match="loop K covers 2 of its 4"):
        evaluate(nest, _hierarchy(1, None), LayerMapping((), (("C", 8), ("K", 2)), {op: (0, 2) for op in "WIO"}))
