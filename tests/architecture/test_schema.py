"""The architecture schema: shipped designs load, descriptions round-trip, broken ones fail in one line
naming the component and field."""

from __future__ import annotations

import pytest

from dcaccel.architecture import Architecture, ArchitectureError, load, names

SHIPPED = ("abstract", "cgra", "eyeriss", "tpu")


def minimal() -> dict:
    """The smallest valid description: one unit kind, one off-chip memory."""
    return {"name": "mini", "units": {"pe": {"count": 4}}, "memories": {"dram": {"level": "offchip"}}}


def test_shipped_names():
    assert names() == list(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_round_trip(name):
    arch = load(name)
    assert arch.name == name
    again = Architecture.from_yaml(arch.to_yaml(), name)
    assert again.spec == arch.spec


@pytest.mark.parametrize(
    ("name", "units", "offchip", "onchip_elements", "area"),
    [
        ("abstract", {"pe": None}, "offchip", 0, 0.0),
        ("eyeriss", {"pe": 168}, "dram", 110592 // 2, 168 * 0.044 + 3.7),
        ("tpu", {"column": 256, "vector": 1}, "dram", 25165824, 256 * 0.31 + 10 + 96),
        ("cgra", {"pe": 64, "host": 1}, "dram", 262144 // 4, 64 * 0.1 + 1.0 + 1.5),
    ],
)
def test_shipped_figures(name, units, offchip, onchip_elements, area):
    arch = load(name)
    assert {unit: spec.count for unit, spec in arch.units.items()} == units
    assert arch.offchip == offchip
    assert arch.onchip_capacity_elements == onchip_elements
    assert arch.area_mm2(16) == pytest.approx(area)


def test_minimal_defaults():
    arch = Architecture.from_dict(minimal())
    unit = arch.units["pe"]
    assert (unit.ops, unit.elements_per_cycle, unit.macs_per_cycle) == (["*"], 1.0, None)
    assert arch.element_bytes == 4
    assert arch.memories["dram"].bandwidth_bytes_per_cycle is None


def _set(data: dict, path: str, value) -> dict:
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("units.pe.count", 0, "units.pe.count: Input should be greater than 0"),
        (
            "units.pe.elements_per_cycle",
            -1,
            "units.pe.elements_per_cycle: Input should be greater than or equal to 0.000001",
        ),
        ("units.pe.speed", 3, "units.pe.speed: Extra inputs are not permitted"),
        ("units.pe.ops", [], "units.pe.ops: List should have at least 1 item"),
        ("units.pe.topology", {"kind": "mesh", "rows": 3, "cols": 3}, "units.pe: mesh 3×3 does not hold count 4"),
        ("units.pe.topology", {"kind": "ring"}, "units.pe.topology.kind: Input should be"),
        ("memories.dram.level", "cache", "memories.dram.level: Input should be 'local', 'onchip' or 'offchip'"),
        ("memories.rf", {"level": "local", "capacity_bytes": 64}, "memories.rf: unit is required for a local memory"),
        (
            "memories.rf",
            {"level": "local", "unit": "alu", "capacity_bytes": 64},
            "memories.rf.unit: unknown unit 'alu'",
        ),
        ("memories.dram2", {"level": "offchip"}, "memories: exactly one offchip memory, got dram, dram2"),
        ("links", [{"between": ["pe", "glb"]}], "links.0.between: unknown component 'glb'"),
        ("links", [{"between": ["pe", "dram"], "latency_cycles": -1}], "links.0.latency_cycles: Input should be"),
        ("element_bytes", "four", "element_bytes: Input should be a valid integer"),
        ("name", "", "name: String should have at least 1 character"),
    ],
)
def test_invalid_field_one_line(path, value, message):
    with pytest.raises(ArchitectureError) as err:
        Architecture.from_dict(_set(minimal(), path, value), "test.yaml")
    text = str(err.value)
    assert text.startswith("architecture test.yaml: ")
    assert message in text
    assert "\n" not in text


def test_several_problems_counted():
    data = _set(_set(minimal(), "units.pe.count", 0), "element_bytes", 0)
    with pytest.raises(ArchitectureError, match=r"\(and 1 more\)$"):
        Architecture.from_dict(data, "x")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nunits: [1\n", "line 3: not valid YAML"),
        ("- just\n- a list\n", "expected a mapping, got list"),
        ("", "expected a mapping, got nothing"),
        ("!!python/object/apply:os.system ['true']\n", "not valid YAML"),
    ],
)
def test_yaml_is_data(text, message):
    with pytest.raises(ArchitectureError, match=message):
        Architecture.from_yaml(text, "f.yaml")


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("eyeris", "unknown architecture 'eyeris'"),
        ("missing.yaml", "architecture file missing.yaml does not exist"),
    ],
)
def test_load_errors(argument, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ArchitectureError, match=message):
        load(argument)


def test_load_file(tmp_path):
    path = tmp_path / "mine.yml"
    path.write_text("name: mine\nunits: {pe: {count: 2}}\nmemories: {dram: {level: offchip}}\n")
    assert load(path).units["pe"].count == 2


def _with_link_and_memories() -> dict:
    """``minimal()`` with an on-chip memory, a local memory and a link: every numeric field has a home."""
    data = minimal()
    data["memories"]["glb"] = {"level": "onchip", "capacity_bytes": 1024}
    data["memories"]["rf"] = {"level": "local", "unit": "pe", "capacity_bytes": 64}
    data["links"] = [{"between": ["pe", "glb"]}]
    return data


NUMBERS = [
    "element_bytes",
    "clock_mhz",
    "units.pe.count",
    "units.pe.elements_per_cycle",
    "units.pe.macs_per_cycle",
    "units.pe.frequency_mhz",
    "units.pe.area_mm2",
    "units.pe.energy_per_mac_pj",
    "memories.glb.capacity_bytes",
    "memories.glb.bandwidth_bytes_per_cycle",
    "memories.glb.read_energy_pj",
    "memories.glb.write_energy_pj",
    "memories.glb.area_mm2",
    "links.0.bandwidth_bytes_per_cycle",
    "links.0.latency_cycles",
    "links.0.energy_per_element_pj",
]


def _set_any(data: dict, path: str, value) -> dict:
    """``_set`` that also walks list indices (``links.0.latency_cycles``)."""
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    node[last] = value
    return data


@pytest.mark.parametrize("path", NUMBERS)
@pytest.mark.parametrize(
    "value",
    [float("inf"), float("-inf"), float("nan"), 1e308, 1e-300, -1, True, False, "16", 10**400, [4], {"a": 1}],
    ids=["inf", "-inf", "nan", "1e308", "1e-300", "negative", "true", "false", "text", "huge-int", "list", "map"],
)
def test_every_number_is_finite_strict_and_in_range(path, value):
    """Each of these passed some field before (``.inf`` and ``1e-12`` bandwidths, ``clock_mhz: .inf``,
    ``read_energy_pj: 1e308``, ``count: true``); none passes any field now, in one line naming it."""
    if value == 1e-300 and ("energy" in path or "area" in path):
        value = -1e-300  # 0 is in their range: a tiny positive value is a right one
    with pytest.raises(ArchitectureError) as raised:
        Architecture.from_dict(_set_any(_with_link_and_memories(), path, value), "r.yaml")
    message = str(raised.value)
    assert message.startswith(f"architecture r.yaml: {path}: ")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("path", "low", "high"),
    [
        ("element_bytes", 1, 256),
        ("clock_mhz", 1e-3, 1e6),
        ("units.pe.count", 1, 2**40),
        ("units.pe.elements_per_cycle", 1e-6, 1e9),
        ("units.pe.macs_per_cycle", 1e-6, 1e9),
        ("units.pe.area_mm2", 0, 1e6),
        ("units.pe.energy_per_mac_pj", 0, 1e6),
        ("memories.glb.capacity_bytes", 1, 2**50),
        ("memories.glb.bandwidth_bytes_per_cycle", 1e-3, 1e9),
        ("memories.glb.read_energy_pj", 0, 1e6),
        ("links.0.latency_cycles", 0, 10**9),
    ],
)
def test_documented_ranges(path, low, high):
    """The bounds of docs/architecture_description.md ("Ranges") are accepted, just beyond them refused."""
    for inside in (low, high):
        Architecture.from_dict(_set_any(_with_link_and_memories(), path, inside))
    below = low - 1 if isinstance(low, int) and low >= 1 else (low / 2 if low else -1e-9)
    above = high + 1 if isinstance(high, int) else high * 2
    for outside in (below, above):
        with pytest.raises(ArchitectureError, match=f"{path}: Input should be"):
            Architecture.from_dict(_set_any(_with_link_and_memories(), path, outside))


def test_negative_zero_is_zero():
    data = _set_any(
        _set_any(_with_link_and_memories(), "units.pe.area_mm2", -0.0), "links.0.energy_per_element_pj", -0.0
    )
    arch = Architecture.from_dict(data)
    assert str(arch.units["pe"].area_mm2) == "0.0" and str(arch.spec.links[0].energy_per_element_pj) == "0.0"


def test_a_rate_at_the_reference_clock_stays_in_range():
    """1e-4 elements per cycle at 1 MHz is 1e-7 per cycle of the 1 GHz reference clock: it would round to
    a zero rate (ZeroDivisionError in every costing)."""
    data = _set(_set(minimal(), "units.pe.elements_per_cycle", 1e-4), "units.pe.frequency_mhz", 1)
    with pytest.raises(ArchitectureError) as raised:
        Architecture.from_dict(data, "r.yaml")
    assert str(raised.value) == (
        "architecture r.yaml: units.pe.elements_per_cycle: 0.0001 at 1 MHz is 1e-07 per cycle of the 1000 MHz "
        "clock, below 1e-06"
    )
    assert Architecture.from_dict(_set(data, "units.pe.frequency_mhz", 10)).throughput("pe") == pytest.approx(1e-6)


@pytest.mark.parametrize(
    ("path", "size", "message"),
    [
        ("units", 65, "units: Dictionary should have at most 64 items"),
        ("memories", 65, "memories: Dictionary should have at most 64 items"),
        ("links", 1025, "links: List should have at most 1024 items"),
        ("units.pe.ops", 1025, "units.pe.ops: List should have at most 1024 items"),
    ],
)
def test_component_counts_are_bounded(path, size, message):
    data = minimal()
    if path == "units":
        data["units"] = {f"u{i}": {} for i in range(size)}
    elif path == "memories":
        data["memories"] = {"dram": {"level": "offchip"}, **{f"m{i}": {"level": "onchip"} for i in range(size - 1)}}
    elif path == "links":
        data["links"] = [{"between": ["pe", "dram"]}] * size
    else:
        data["units"]["pe"]["ops"] = [f"Op{i}" for i in range(size)]
    with pytest.raises(ArchitectureError, match=message):
        Architecture.from_dict(data)
