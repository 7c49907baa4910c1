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
        ("units.pe.elements_per_cycle", -1, "units.pe.elements_per_cycle: Input should be greater than 0"),
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
        ("", "expected a mapping, got NoneType"),
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
