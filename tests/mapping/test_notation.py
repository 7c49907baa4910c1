"""The mapping notation: printing, parsing back, round trips and one-line errors."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dcaccel.errors import DcaccelError
from dcaccel.mapping.notation import SCHEDULERS, Mapping, format_mappings, parse, parse_mappings

names = st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters="/._-"), min_size=1, max_size=20)
dimensions = st.sampled_from(["n", "k", "m", "c", "oh"])
mappings = st.builds(
    Mapping,
    node=names,
    implementation=st.sampled_from(["mv", "op", "lmv", "canonical", "direct"]),
    tiles=st.lists(st.tuples(dimensions, st.integers(1, 10**6)), max_size=4, unique_by=lambda t: t[0]).map(tuple),
    stay=st.sampled_from(["A", "B", "C", "-"]),
    fuse=st.booleans(),
    pes=st.integers(1, 4096),
    scheduler=st.sampled_from(SCHEDULERS),
)


@pytest.mark.slow
@given(mappings)
def test_round_trip(mapping):
    assert parse(str(mapping)) == mapping


@pytest.mark.slow
@given(st.lists(mappings, max_size=5))
def test_round_trip_of_several(items):
    assert parse_mappings(format_mappings(items)) == items


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "conv1 = mv | Tile(n=6, k=25, m=64) | Stay(C) | Fuse(no) | Spatial(16, list)",
            Mapping("conv1", "mv", (("n", 6), ("k", 25), ("m", 64)), "C", False, 16, "list"),
        ),
        ("relu = canonical", Mapping("relu", "canonical")),
        ("/l1/Conv = lmv | Spatial(4, streaming) | Fuse(yes)", Mapping("/l1/Conv", "lmv", fuse=True, pes=4)),
        ("g = op | Tile() | Stay(A)", Mapping("g", "op", stay="A")),
    ],
)
def test_parse(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("conv1 mv", "expected 'NODE = IMPLEMENTATION"),
        (" = mv", "node name"),
        ("c = mv | Tile(n=0)", "positive integer"),
        ("c = mv | Tile(n=2, n=3)", "given twice"),
        ("c = mv | Tile(n)", "dimension=size"),
        ("c = mv | Stay(D)", "Stay(D)"),
        ("c = mv | Fuse(maybe)", "Fuse expects yes or no"),
        ("c = mv | Spatial(16)", "Spatial expects"),
        ("c = mv | Spatial(16, heft)", "scheduler 'heft'"),
        ("c = mv | Spatial(x, list)", "positive integer"),
        ("c = mv | Cluster(4)", "unknown directive Cluster"),
        ("c = mv | Fuse(no) | Fuse(no)", "given twice"),
        ("c = mv | __import__('os')", "is not a directive"),
        ("c = 1mv", "implementation"),
        pytest.param(
            "c1 = mv | Tile(n=" + "9" * 5000 + ")",
            "Tile(n=...) expects an integer of at most 9223372036854775807, got 5000 digits",
            id="tile of 5000 digits",
        ),
        pytest.param(
            "c = mv | Spatial(" + "9" * 5000 + ", list)",
            "Spatial expects an integer of at most 9223372036854775807",
            id="PEs of 5000 digits",
        ),
        (
            "c = mv | Tile(n=9223372036854775808)",
            "tile n must be a positive integer of at most 9223372036854775807, got 9223",
        ),
    ],
)
def test_errors_are_one_line(text, message):
    with pytest.raises(DcaccelError, match=None) as caught:
        parse(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_largest_size_and_leading_zeros_parse():
    assert parse("c = mv | Tile(n=9223372036854775807)").tile("n") == 2**63 - 1
    assert parse("c = mv | Spatial(" + "0" * 5000 + "16, list)").pes == 16


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"tiles": (("n", 10**5000),)},
            "tile n must be a positive integer of at most 9223372036854775807, got an integer of",
        ),
        (
            {"pes": 2**63},
            "Spatial needs a positive number of PEs of at most 9223372036854775807, got 9223372036854775808",
        ),
        ({"pes": True}, "got True"),
    ],
)
def test_a_mapping_refuses_sizes_out_of_range(fields, message):
    with pytest.raises(DcaccelError) as caught:
        Mapping("c", "mv", **fields)
    assert message in str(caught.value)


def test_the_examples_of_the_docs_parse_and_round_trip():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "mapping.md").read_text()
    examples = [line.split("  #")[0].strip() for line in text.splitlines() if " = " in line and " | " in line]
    examples = [line for line in examples if not line.startswith(("|", "`", "result", "dcaccel"))]
    assert len(examples) >= 3
    for line in examples:
        assert parse(str(parse(line))) == parse(line)
