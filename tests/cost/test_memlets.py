"""A mapping's per-level traffic counted from the memlets of the program that realises it, against the closed
form of ``cost/evaluate.py`` and against a walk of every iteration of the nest."""

import math
import random

import pytest

from dcaccel.cost.evaluate import LayerMapping, evaluate
from dcaccel.cost.hierarchy import Hierarchy, Memory
from dcaccel.cost.memlets import (
    closed_form_traffic,
    enumerated_traffic,
    memlet_traffic,
    realise,
    scope_tiles,
    tiled_sdfg,
    traffic_frame,
)
from dcaccel.cost.nest import conv_nest, product_nest
from dcaccel.cost.search import loop_factors
from dcaccel.errors import DcaccelError


def _memory(name, operands="WIO", top=False):
    served = frozenset({"u"}) if top else frozenset()
    return Memory(name, frozenset(operands), None if top else 1 << 20, math.inf, math.inf, 8, 8, 1.0, 1.0, served)


HIERARCHIES = {
    "rf-dram": Hierarchy("rf-dram", {"u": 1}, (_memory("rf"), _memory("dram", top=True)), 1.0),
    "rf-buffer-dram": Hierarchy(
        "rf-buffer-dram", {"u": 1}, (_memory("rf"), _memory("buffer"), _memory("dram", top=True)), 1.0
    ),
    # tpu_like's shape: weights skip the buffer, from DRAM into the register file
    "weights-bypass": Hierarchy(
        "weights-bypass", {"u": 1}, (_memory("rf"), _memory("buffer", "IO"), _memory("dram", top=True)), 1.0
    ),
}

LAYERS = {
    "gemm": product_nest("gemm", 4, 6, 2),
    "conv3x3-s1": conv_nest("conv3x3-s1", {}, (2, 2, 3, 3), (1, 2, 4, 4)),
    "conv3x3-s2": conv_nest("conv3x3-s2", {"strides": [2, 2]}, (2, 2, 3, 3), (1, 2, 3, 3)),
}


def _mapping(nest, hierarchy, seed):
    """A mapping drawn from the layer's prime factors: a shuffled loop order and random level boundaries."""
    rng = random.Random(seed)
    temporal = loop_factors(nest, ())
    rng.shuffle(temporal)
    count = len(temporal)
    boundaries = {
        operand: (*sorted(rng.randint(0, count) for _ in hierarchy.levels(operand)[:-1]), count) for operand in "WIO"
    }
    return LayerMapping((), tuple(temporal), boundaries)


CASES = [(layer, hierarchy) for layer in LAYERS for hierarchy in HIERARCHIES]


@pytest.mark.parametrize(("layer", "hierarchy"), CASES)
def test_memlets_count_what_the_closed_form_counts(layer, hierarchy):
    """Every memory and operand, reads and writes (partial sums included), equal on drawn mappings."""
    nest, design = LAYERS[layer], HIERARCHIES[hierarchy]
    mapping = _mapping(nest, design, 0)
    memlets = memlet_traffic(nest, design, mapping)
    assert memlets == closed_form_traffic(evaluate(nest, design, mapping).traffic)
    assert memlets[("dram", "O")][1] >= nest.size("O")  # every output reaches DRAM at least once


@pytest.mark.slow
@pytest.mark.parametrize(("layer", "hierarchy"), CASES)
def test_memlets_count_what_the_closed_form_counts_sweep(layer, hierarchy):
    nest, design = LAYERS[layer], HIERARCHIES[hierarchy]
    for seed in range(1, 20):
        mapping = _mapping(nest, design, seed)
        assert memlet_traffic(nest, design, mapping) == closed_form_traffic(evaluate(nest, design, mapping).traffic)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("layer", ["gemm", "conv3x3-s1"])
def test_the_walk_of_the_nest_agrees(layer, seed):
    """The arbiter: every iteration walked, a tile reloaded whenever the set of elements its scope touches
    changes. Without overlapping windows it reloads exactly when the memlet count says."""
    nest, design = LAYERS[layer], HIERARCHIES["rf-buffer-dram"]
    mapping = _mapping(nest, design, seed)
    assert enumerated_traffic(nest, design, mapping) == memlet_traffic(nest, design, mapping)


@pytest.mark.parametrize(
    ("temporal", "boundaries", "model", "walked"),
    [
        # the unit's input register: FY innermost, then OY. Row fy + 2·oy: the last row of one window (fy 2,
        # oy 0) is the first of the next (fy 0, oy 1), 2 of every 9 MACs of each (C, K, FX, OX) sweep of 36
        (
            (("FY", 3), ("OY", 3), ("C", 2), ("K", 2), ("FX", 3), ("OX", 3)),
            {"W": (3, 6), "I": (6, 6), "O": (6, 6)},
            {("rf", "I"): (324, 98)},
            {("rf", "I"): (324 - 2 * 36, 98)},
        ),
        # a register file of one input row of 3 columns × 2 channels, reloaded per (FY, OY, OX): 27 × 6 read
        # from DRAM and written into it; the 2 · 3 loads repeating the previous row are not needed
        (
            (("FX", 3), ("C", 2), ("K", 2), ("FY", 3), ("OY", 3), ("OX", 3)),
            {"W": (0, 6), "I": (2, 6), "O": (3, 6)},
            {("dram", "I"): (162, 0), ("rf", "I"): (324, 162)},
            {("dram", "I"): (162 - 6 * 6, 0), ("rf", "I"): (324, 162 - 6 * 6)},
        ),
    ],
)
def test_stride_two_windows_reuse_a_row_the_models_reload(temporal, boundaries, model, walked):
    """A 3×3 window of stride 2: consecutive windows share a row. The memlets and the closed form (as
    ZigZag) reload a tile whenever a loop that indexes it steps; the walk sees the same row and keeps it."""
    nest, design = LAYERS["conv3x3-s2"], HIERARCHIES["rf-dram"]
    mapping = LayerMapping((), temporal, boundaries)
    memlets = memlet_traffic(nest, design, mapping)
    assert memlets == closed_form_traffic(evaluate(nest, design, mapping).traffic)
    assert {key: memlets[key] for key in model} == model
    enumerated = enumerated_traffic(nest, design, mapping)
    assert enumerated == {**memlets, **walked}


def test_a_strided_window_keeps_its_rows_across_maps_that_do_not_index_it():
    """Rows fy + 2·oy over oy are 3 of a span of 5; DaCe's map-by-map propagation widens them to 5 once a
    map over ox encloses them. Each scope's tile is the layer's footprint of the loops inside it."""
    nest = LAYERS["conv3x3-s2"]
    temporal = (("K", 2), ("OY", 3), ("OX", 3), ("FX", 3), ("FY", 3), ("C", 2))
    sdfg = tiled_sdfg(nest, LayerMapping((), temporal, {}))
    assert scope_tiles(sdfg, "I") == nest.footprints("I", {}, temporal) == [1, 1, 3, 9, 21, 49, 98]


def test_the_realised_program_holds_each_level_in_local_storage():
    """One transient per distinct tile, between the maps of its scope; levels holding the same loops (the
    register file and the buffer of inputs here, K being irrelevant to them) share it."""
    nest, design = LAYERS["conv3x3-s2"], HIERARCHIES["rf-buffer-dram"]
    temporal = (("FX", 3), ("C", 2), ("K", 2), ("FY", 3), ("OY", 3), ("OX", 3))
    mapping = LayerMapping((), temporal, {"W": (0, 2, 6), "I": (2, 3, 6), "O": (5, 6, 6)})
    realised = realise(nest, design, mapping)
    realised.sdfg.validate()
    storage = realised.storage
    assert storage[("rf", "I")] == storage[("buffer", "I")] != storage[(None, "I")]
    arrays = realised.sdfg.arrays
    assert arrays[storage[("rf", "I")]].shape == (1, 2, 1, 3)  # a row of 3 columns, both channels
    assert arrays[storage[("buffer", "O")]].shape == (1, 2, 3, 3)  # all outputs: the buffer holds them all
    assert arrays[storage[("rf", "O")]].shape == (1, 2, 3, 1)
    assert realised.outputs == nest.size("O") == 18


def test_the_tables_side_by_side():
    nest, design = LAYERS["gemm"], HIERARCHIES["rf-dram"]
    mapping = LayerMapping((), (("C", 6), ("K", 4), ("D", 2)), {"W": (0, 3), "I": (1, 3), "O": (1, 3)})
    frame = traffic_frame(
        memlets=memlet_traffic(nest, design, mapping),
        closed=closed_form_traffic(evaluate(nest, design, mapping).traffic),
    )
    dram = frame.set_index(["memory", "operand"]).loc[("dram", "I")]
    # the register file holds a row of 6 inputs; K does not index it, so the row stays while K iterates:
    # each of the 2 rows is read once
    assert dram["memlets_read"] == dram["closed_read"] == 6 * 2
    assert list(frame.columns) == [
        "memory",
        "operand",
        "memlets_read",
        "memlets_written",
        "closed_read",
        "closed_written",
    ]


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        (LayerMapping((("u", "K", 4),), (("C", 6), ("D", 2)), {}), "spatial unrolling is not realised"),
        (LayerMapping((), (("C", 3), ("K", 4), ("D", 2)), {}), "loop C has temporal factors covering 3 of its 6"),
        (LayerMapping((), (("X", 3),), {}), "temporal loop X is not a loop of the layer"),
        (LayerMapping((), (("C", 6), ("K", 4), ("D", 2)), {"W": (3,), "I": (0, 3), "O": (0, 3)}), "operand W has 2"),
    ],
)
def test_bad_mappings_are_refused(mapping, message):
    with pytest.raises(DcaccelError, match=message):
        memlet_traffic(LAYERS["gemm"], HIERARCHIES["rf-dram"], mapping)
