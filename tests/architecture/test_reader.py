"""Reading a description's YAML: duplicate keys refused, size, nesting and alias expansion bounded before
anything is built, exponent floats read as numbers, every refusal one line naming the file and line."""

from __future__ import annotations

import time
import tracemalloc

import pydantic
import pytest

from dcaccel.architecture import Architecture, ArchitectureError, load
from dcaccel.architecture.reader import MAX_BYTES, MAX_DEPTH, MAX_NODES, read_file, read_yaml, shown, validated
from dcaccel.architecture.zigzag import read as read_zigzag
from dcaccel.errors import DcaccelError

VALID = "name: t\nunits: {pe: {count: 2}}\nmemories: {dram: {level: offchip}}\n"


def refused(text: str, source: str = "f.yaml") -> str:
    """The one-line message ``text`` is refused with."""
    with pytest.raises(ArchitectureError) as raised:
        Architecture.from_yaml(text, source)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"architecture {source}: ")
    return message


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        # a second pe block used to replace the first, support rules and all
        (
            "name: t\nunits:\n  pe: {count: 16, ops: [Conv]}\n  pe: {count: 4}\nmemories: {d: {level: offchip}}\n",
            4,
            "pe",
        ),
        ("name: t\nname: u\nunits: {pe: {}}\nmemories: {d: {level: offchip}}\n", 2, "name"),
        ("name: t\nunits: {pe: {count: 1, count: 2}}\nmemories: {d: {level: offchip}}\n", 2, "count"),
        ("name: t\nunits: {pe: {}}\nmemories: {d: {level: offchip}}\nunits: {pe: {}}\n", 4, "units"),
        ("name: t\nunits: {pe: {}, 'pe': {}}\nmemories: {d: {level: offchip}}\n", 2, "pe"),  # the same key quoted
        ("name: t\nunits: {pe: {}}\nmemories: {d: {level: offchip, level: local}}\n", 3, "level"),
    ],
)
def test_duplicate_keys_are_refused(text, line, key):
    assert refused(text) == f"architecture f.yaml: line {line}: not valid YAML (key {key} appears twice in one mapping)"


def test_a_merge_key_may_be_overridden():
    """``<<: *base`` then an explicit key is YAML's override, not a duplicate."""
    text = (
        "name: t\nbase: &base {count: 4, elements_per_cycle: 2}\n"
        "units: {pe: {<<: *base, count: 8}}\nmemories: {d: {level: offchip}}\n"
    )
    data = read_yaml(text, "f.yaml")
    assert data["units"]["pe"] == {"count": 8, "elements_per_cycle": 2}


def _alias_bomb(levels: int) -> str:
    """Ten aliases of the level below per level: 10**levels scalars from a few hundred bytes."""
    lines = ["name: bomb", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\nunits: {pe: {}}\nmemories: {d: {level: offchip}}\n"


def test_an_alias_bomb_is_refused_at_once():
    """20 levels (10**20 nodes expanded) used to take 46 s and 2.8 GB; the walk of the parser's events
    refuses it at the level that crosses MAX_NODES, building nothing."""
    text = _alias_bomb(20)
    tracemalloc.start()
    began = time.perf_counter()
    message = refused(text)
    elapsed = time.perf_counter() - began
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert message == f"architecture f.yaml: line 6: more than {MAX_NODES} nodes once aliases are expanded"
    assert elapsed < 1.0
    assert peak < 10_000_000


def test_aliases_within_the_bound_are_read():
    data = read_yaml(_alias_bomb(4), "f.yaml")  # 10**4 scalars expanded
    assert len(data["a3"]) == 10 and data["a3"][0][0][0] == ["x"] * 10


@pytest.mark.parametrize(
    "text",
    [
        "name: " + "[" * 20_000 + "]" * 20_000 + "\n",  # used to raise RecursionError
        "name: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n",
        "name: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n",  # one level more than the bound
        "a: &a " + "[" * 20 + "]" * 20 + "\nb: " + "[" * 12 + "*a" + "]" * 12 + "\n",  # deep through an alias
    ],
)
def test_deep_nesting_is_refused(text):
    assert refused(text).endswith(f"nested deeper than {MAX_DEPTH} levels")


def test_nesting_up_to_the_bound_is_read():
    assert read_yaml("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1), "f.yaml") is not None


@pytest.mark.parametrize("text", ["name: &a [*a]\n", "units: &u {pe: *u}\n", "name: *nowhere\n"])
def test_recursive_and_undefined_aliases_are_refused(text):
    assert "names no complete node before it" in refused(text)


def test_size_is_bounded_for_text_too(tmp_path):
    text = VALID + "#" * MAX_BYTES
    assert refused(text) == f"architecture f.yaml: larger than {MAX_BYTES} bytes"
    path = tmp_path / "big.yaml"
    path.write_text(text)
    with pytest.raises(ArchitectureError, match=f"is larger than {MAX_BYTES} bytes"):
        load(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: !!python/object/apply:os.system ['true']\n", "could not determine a constructor"),
        ("name: t\n---\nname: u\n", "but found another document"),
        ("name: \x07\n", "not valid YAML (ReaderError)"),
    ],
)
def test_yaml_stays_data(text, message):
    assert message in refused(text)


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ArchitectureError, match=r"cannot be read \(UnicodeDecodeError\)$"):
        load(path)


def test_files_are_read_within_bounds_naming_what_they_are(tmp_path):
    (tmp_path / "ok.yaml").write_text("name: t\n")
    assert read_file(tmp_path / "ok.yaml", "architecture file") == "name: t\n"
    (tmp_path / "big.yaml").write_text("#" * (MAX_BYTES + 1))
    (tmp_path / "latin.yaml").write_bytes(b"name: caf\xe9\n")
    refusals = {
        "nothing.yaml": "does not exist",
        "big.yaml": f"is larger than {MAX_BYTES} bytes",
        "latin.yaml": "cannot be read (UnicodeDecodeError)",
    }
    for name, refusal in refusals.items():
        path = tmp_path / name
        for reader, what in ((load, "architecture file"), (read_zigzag, "ZigZag hardware file")):
            with pytest.raises(ArchitectureError) as raised:
                reader(path)
            assert str(raised.value) == f"{what} {path} {refusal}"


@pytest.mark.parametrize(
    ("text", "value"),
    [("1e-3", 1e-3), ("2E6", 2e6), ("-1.5e+2", -150.0), ("1_000e0", 1000.0), ("1", 1), ("e5", "e5"), ("1e", "1e")],
)
def test_exponent_floats_are_numbers(text, value):
    """YAML 1.1 reads ``1e-3`` as text; as in YAML 1.2 it is a float here (strict numbers refuse text)."""
    read = read_yaml(text, "f.yaml")
    assert read == value and type(read) is type(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("pe", "pe"), ("a\nb", "'a\\nb'"), ("x" * 100, "'" + "x" * 35 + "...'"), (3, "3"), (None, "None")],
)
def test_shown_keys_stay_on_one_line(value, expected):
    assert shown(value) == expected


def test_a_bad_key_is_named_on_one_line():
    text = 'name: t\nunits: {"p\\ne": {}}\nmemories: {d: {level: offchip}}\n'
    assert refused(text).startswith("architecture f.yaml: units.'p\\ne'.[key]: String should match pattern")


@pytest.mark.parametrize("text", ["count: 010", "count: 1:30", "clock_mhz: 1:30.5", "count: -007"])
def test_numbers_yaml_versions_read_differently_are_refused(text):
    """YAML 1.1 reads ``010`` as 8 and ``1:30`` as 90 (YAML 1.2: ten and text): never silently."""
    with pytest.raises(ArchitectureError, match=r"line 1: not valid YAML \(.* is read differently by YAML 1.1 and 1.2"):
        read_yaml(text, "f.yaml")


class _Pair(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    a: int
    b: int = 0


def _first_problem(err: pydantic.ValidationError) -> str:
    return f"pair: {err.errors()[0]['loc'][0]}: {err.error_count()} problem(s)"


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (None, ArchitectureError, "pair: expected a mapping, got nothing"),
        ([1, 2], ArchitectureError, "pair: expected a mapping, got list"),
        ({"a": "x"}, ArchitectureError, "pair: a: 1 problem(s)"),
        ({"a": 1, "c": 2}, DcaccelError, "pair: c: 1 problem(s)"),
    ],
)
def test_validated_refuses_in_one_line_as_the_caller_names_it(data, error, message):
    with pytest.raises(error) as caught:
        validated(_Pair, data, "pair", _first_problem, error)
    assert str(caught.value) == message


def test_validated_returns_the_model():
    assert validated(_Pair, {"a": 2}, "pair", _first_problem) == _Pair(a=2, b=0)
