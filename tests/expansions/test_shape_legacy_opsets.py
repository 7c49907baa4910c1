"""Canonical Pad and Split of opset 9 (pads and split as attributes, equal split): one compile.

(Upsample is not here: DaCe's importer leaves its output shape symbolic, so its check refuses it.)
"""

import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_output_matches,
    build_model,
    random_feed,
    run_canonical,
    run_reference,
)

OPSET = 9

CASES = [
    OpCase("pad", "Pad", ["x"], {"x": (2, 3)}, attributes={"pads": [1, 0, 0, 2], "value": 2.5}),
    OpCase("pad_edge", "Pad", ["x"], {"x": (1, 2, 3)}, attributes={"pads": [0, 1, 2, 0, 0, 1], "mode": "edge"}),
    OpCase("split", "Split", ["x"], {"x": (2, 5)}, attributes={"axis": 1, "split": [2, 3]}, outputs=("a", "b")),
    OpCase("split_equal", "Split", ["x"], {"x": (6, 2)}, outputs=("a", "b", "c")),
]


@pytest.fixture(scope="module")
def results():
    model = build_model(CASES, opset=OPSET)
    feed = random_feed(CASES)
    return run_reference(model, feed), run_canonical(model, feed, "test_shape_legacy_opsets")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    for name in map(case.tensor, case.outputs):
        assert_output_matches(results, name)


@pytest.mark.slow
def test_each_is_one_map_per_output():
    from tests.expansions.canonical_onnx import assert_flat_maps, canonical_model

    scopes = assert_flat_maps(canonical_model(build_model(CASES, opset=OPSET), "legacy_structure").sdfg)
    assert sorted(s.label for s in scopes) == sorted(
        [
            "pad_pad_map",
            "pad_edge_pad_map",
            "split_split_0_map",
            "split_split_1_map",
            "split_equal_split_0_map",
            "split_equal_split_1_map",
            "split_equal_split_2_map",
        ]
    )
