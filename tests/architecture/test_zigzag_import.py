"""Importing ZigZag hardware descriptions: the typed form, the mapping onto dcaccel's schema, what it
lists as unexpressed, the ``arch import`` command, and broken files refused in one line naming the field.

The designs are small ZigZag-style YAML written here (the shape of ZigZag 3.9.1's shipped
``tpu_like.yaml``), so no ZigZag install is needed.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from dcaccel.architecture import Architecture, ArchitectureError, load
from dcaccel.architecture.zigzag import COMMENT_WIDTH, Direction, parse, read, to_architecture
from dcaccel.cli import main


def port(name: str, kind: str, low: int, high: int, *allocation: str) -> dict:
    return {"name": name, "type": kind, "bandwidth_min": low, "bandwidth_max": high, "allocation": list(allocation)}


def design() -> dict:
    """A 4×2 array: a weight register per MAC, an output register per MAC, a 64 KiB buffer for
    activations and outputs serving the whole array, DRAM for everything."""
    return {
        "name": "tiny",
        "memories": {
            "rf_w": {
                "size": 64,
                "r_cost": 0.1,
                "w_cost": 0.2,
                "area": 0,
                "latency": 1,
                "operands": ["I2"],
                "ports": [port("r_port_1", "read", 8, 8, "I2, tl"), port("w_port_1", "write", 8, 8, "I2, fh")],
                "served_dimensions": [],
            },
            "rf_o": {
                "size": 20,
                "r_cost": 0.04,
                "w_cost": 0.04,
                "area": 0,
                "latency": 1,
                "operands": ["O"],
                "ports": [
                    port("r_port_1", "read", 16, 16, "O, tl", "O, th"),
                    port("w_port_1", "write", 16, 16, "O, fh", "O, fl"),
                ],
                "served_dimensions": [],
            },
            "buffer": {
                "size": 524288,
                "r_cost": 64.0,
                "w_cost": 96.0,
                "area": 2.5,
                "latency": 1,
                "operands": ["I1", "O"],
                "ports": [
                    port("r_port_1", "read", 64, 256, "I1, tl", "O, tl", "O, th"),
                    port("w_port_1", "write", 64, 256, "I1, fh", "O, fh", "O, fl"),
                ],
                "served_dimensions": ["D1", "D2"],
            },
            "dram": {
                "size": 10000000000,
                "r_cost": 640,
                "w_cost": 720,
                "area": 0,
                "latency": 1,
                "operands": ["I1", "I2", "O"],
                "ports": [
                    port(
                        "rw_port_1",
                        "read_write",
                        64,
                        64,
                        *(f"{op}, {d}" for op in ("I1", "I2") for d in ("fh", "tl")),
                        *(f"O, {d}" for d in ("fh", "tl", "fl", "th")),
                    )
                ],
                "served_dimensions": ["D1", "D2"],
            },
        },
        "operational_array": {
            "unit_energy": 0.04,
            "unit_area": 1,
            "dimensions": ["D1", "D2"],
            "sizes": [4, 2],
            "systolic_dimensions": ["D1"],
        },
    }


def text(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def test_typed_form():
    parsed = parse(text(design()), "tiny.yaml")
    assert list(parsed.memories) == ["rf_w", "rf_o", "buffer", "dram"]  # innermost first, as written
    buffer = parsed.memories["buffer"]
    assert buffer.operands == ("I1", "O") and buffer.roles == ("I", "O")
    assert buffer.ports[0].allocation == (("I1", Direction.TO_LOW), ("O", Direction.TO_LOW), ("O", Direction.TO_HIGH))
    assert buffer.word_bits(Direction.TO_LOW) == 256 and buffer.word_bits(Direction.FROM_LOW) == 256
    assert parsed.memories["rf_w"].word_bits(Direction.FROM_LOW) is None
    assert [parsed.instances(memory) for memory in parsed.memories.values()] == [8, 8, 1, 1]
    assert parsed.operational_array.unit_count == 8
    assert parsed.operational_array.systolic_dimensions == ("D1",)


def test_w_i_o_naming_is_canonical():
    data = design()
    data["memories"]["rf_w"]["operands"] = ["W"]
    data["memories"]["rf_w"]["ports"] = [
        port("r_port_1", "read", 8, 8, "W, tl"),
        port("w_port_1", "write", 8, 8, "W, fh"),
    ]
    data["memories"]["buffer"]["operands"] = ["I", "O"]
    data["memories"]["buffer"]["ports"][0]["allocation"][0] = "I, tl"
    parsed = parse(text(data), "tiny.yaml")
    assert parsed.memories["rf_w"].operands == ("I2",)
    assert parsed.memories["rf_w"].ports[0].allocation == (("I2", Direction.TO_LOW),)
    assert parsed.memories["buffer"].operands == ("I1", "O")


def test_a_key_given_twice_keeps_the_last_as_zigzag_reads_it():
    source = text(design()).replace(
        "    ports:\n    - name: r_port_1\n      type: read\n      bandwidth_min: 64",
        "    ports: []\n    ports:\n    - name: r_port_1\n      type: read\n      bandwidth_min: 64",
    )
    assert source.count("ports: []") == 1
    assert len(parse(source, "tiny.yaml").memories["buffer"].ports) == 2


def test_mapping_onto_the_schema():
    imported = to_architecture(parse(text(design()), "tiny.yaml"))
    spec = imported.architecture.spec
    assert spec.name == "tiny" and spec.element_bytes == 1
    pe = spec.units["pe"]
    assert (pe.count, pe.macs_per_cycle, pe.elements_per_cycle, pe.energy_per_mac_pj, pe.area_mm2) == (8, 1, 1, 0.04, 1)
    assert (pe.topology.kind.value, pe.topology.rows, pe.topology.cols) == ("mesh", 4, 2)
    memories = spec.memories
    assert {name: memory.level.value for name, memory in memories.items()} == {
        "rf_w": "local",
        "rf_o": "local",
        "buffer": "onchip",
        "dram": "offchip",
    }
    assert memories["rf_w"].unit == "pe" and memories["rf_w"].capacity_bytes == 8
    assert memories["rf_o"].capacity_bytes == 3  # ⌈20 bits / 8⌉
    assert memories["buffer"].capacity_bytes == 65536
    # a read port and a write port of 256 b each; DRAM's one read/write port of 64 b, shared
    assert (memories["buffer"].bandwidth_bytes_per_cycle, memories["buffer"].separate_ports) == (256 / 8, True)
    assert (memories["dram"].bandwidth_bytes_per_cycle, memories["dram"].separate_ports) == (8, False)
    # what each memory holds, and partial sums twice the element
    assert memories["rf_w"].operands == ["weights"] and memories["rf_o"].operands == ["outputs"]
    assert memories["buffer"].operands == ["inputs", "outputs"] and memories["dram"].operands is None
    assert spec.partial_sum_bytes == 2 and pe.topology.systolic
    # energy per 8-bit element: the word access cost × 8 / the word bits of the port
    assert memories["rf_w"].read_energy_pj == pytest.approx(0.1)
    assert memories["rf_o"].write_energy_pj == pytest.approx(0.04 * 8 / 16)
    assert memories["buffer"].read_energy_pj == pytest.approx(64 * 8 / 256)
    assert memories["buffer"].write_energy_pj == pytest.approx(96 * 8 / 256)
    assert memories["dram"].read_energy_pj == pytest.approx(640 / 8)
    assert memories["dram"].write_energy_pj == pytest.approx(720 / 8)
    assert memories["buffer"].area_mm2 == 2.5
    assert spec.links == []


def test_element_bytes_scale_the_energy_per_element():
    spec = to_architecture(parse(text(design()), "tiny.yaml"), element_bytes=2).architecture.spec
    assert spec.element_bytes == 2
    assert spec.memories["dram"].read_energy_pj == pytest.approx(640 * 16 / 64)


def test_partly_served_memory_is_shared_local():
    data = design()
    data["memories"]["rf_w"]["served_dimensions"] = ["D2"]  # one per D1 row, shared by its 2 units
    data["memories"]["rf_w"]["area"] = 0.5
    imported = to_architecture(parse(text(data), "tiny.yaml"))
    memory = imported.architecture.spec.memories["rf_w"]
    assert (memory.level.value, memory.capacity_bytes, memory.area_mm2) == ("local", 8, 0.5)
    assert memory.shared_along == ["cols"]  # D2 is the mesh's cols: one instance per row, shared by its 2 units


def test_sharing_follows_the_order_the_array_lists_its_dimensions():
    data = design()
    data["operational_array"]["dimensions"] = ["D2", "D1"]  # D2 (4) the mesh's rows, D1 (2) its cols
    data["memories"]["rf_w"]["served_dimensions"] = ["D1"]
    spec = to_architecture(parse(text(data), "tiny.yaml")).architecture.spec
    assert (spec.units["pe"].topology.rows, spec.units["pe"].topology.cols) == (4, 2)
    assert spec.memories["rf_w"].shared_along == ["cols"]


def test_a_partly_served_memory_of_a_3d_array_is_one_per_unit():
    data = design()
    data["operational_array"].update(dimensions=["D1", "D2", "D3"], sizes=[2, 2, 2], systolic_dimensions=[])
    for memory in ("buffer", "dram"):
        data["memories"][memory]["served_dimensions"] = ["D1", "D2", "D3"]
    data["memories"]["rf_w"]["served_dimensions"] = ["D3"]
    imported = to_architecture(parse(text(data), "tiny.yaml"))
    memory = imported.architecture.spec.memories["rf_w"]
    assert (memory.level.value, memory.shared_along) == ("local", [])
    assert "rf_w: 4 instances, each shared by 2 units of a 3-D array; here one per unit" in imported.unexpressed


def test_unexpressed_properties_are_listed():
    imported = to_architecture(parse(text(design()), "tiny.yaml"))
    items = imported.unexpressed
    assert not any("holds" in item for item in items)  # the operands each memory holds are expressed
    # transfers in steps of bandwidth_min (64 b) are expressed: access_bytes
    assert imported.architecture.spec.memories["buffer"].access_bytes == 8
    assert not any(item.startswith("buffer:") for item in items)
    assert any(item.startswith("systolic dimensions D1 of D1, D2:") for item in items)
    assert any(item.startswith("operand precision:") for item in items)


def test_yaml_has_the_comments_and_loads_back():
    imported = to_architecture(parse(text(design()), "tiny.yaml"))
    written = imported.to_yaml("tiny.yaml")
    comments = [line for line in written.splitlines() if line.startswith("#")]
    assert comments[0].startswith("# Imported from the ZigZag hardware description tiny.yaml")
    assert all(len(line) <= COMMENT_WIDTH for line in comments[1:])
    assert sum(line.startswith("#  - ") for line in comments) == len(imported.unexpressed)
    assert Architecture.from_yaml(written, "tiny").spec == imported.architecture.spec


@pytest.mark.slow
def test_cli_import(tmp_path, capsys):
    source = tmp_path / "tiny.yaml"
    source.write_text(text(design()), encoding="utf-8")
    out = tmp_path / "out.yaml"
    assert main(["arch", "import", "zigzag", str(source), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{out}: written\ntiny: imported from ZigZag tiny: 4x2 MAC array, 4 memories")
    count = len(to_architecture(read(source)).unexpressed)
    assert captured.err == (
        f"warning: {count} properties of {source} have no place in dcaccel's schema (listed in the comments of {out})\n"
    )
    assert load(out).spec.units["pe"].count == 8


def test_cli_import_refuses_in_one_line(tmp_path, capsys):
    source = tmp_path / "tiny.yaml"
    source.write_text(text({**design(), "name": 3}), encoding="utf-8")
    assert main(["arch", "import", "zigzag", str(source), "-o", str(tmp_path / "out.yaml")]) == 2
    err = capsys.readouterr().err
    assert err == f"dcaccel arch: error: architecture {source} (ZigZag): name: Input should be a valid string\n"
    assert not (tmp_path / "out.yaml").exists()


def _set(data: dict, path: str, value) -> dict:
    data = copy.deepcopy(data)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is _DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("memories.rf_w.size", _DELETE, "memories.rf_w.size: Field required"),
        ("memories.rf_w.size", "64 bits", "memories.rf_w.size: Input should be a valid integer"),
        ("memories.rf_w.r_cost", -1, "memories.rf_w.r_cost: Input should be greater than or equal to 0"),
        ("memories.rf_w.colour", "red", "memories.rf_w.colour: Extra inputs are not permitted"),
        ("memories.rf_w.operands", ["I3"], "memories.rf_w.operands.0: String should match pattern"),
        ("memories.rf_w.operands", ["I2", "W"], "memories.rf_w.operands: an operand is listed twice: I2, W"),
        ("memories.rf_w.auto_cost_extraction", True, "memories.rf_w: auto_cost_extraction (CACTI) is not supported"),
        (
            "memories.rf_w.ports.0.allocation",
            ["I2, up"],
            "memories.rf_w.ports.0.allocation: 'I2, up' is not 'OPERAND, DIRECTION'",
        ),
        (
            "memories.rf_w.ports.0.allocation",
            ["I2, fh"],
            "memories.rf_w.ports.0: a read port cannot serve I2, fh",
        ),
        ("memories.rf_w.ports.0.bandwidth_min", 16, "memories.rf_w.ports.0: bandwidth_min 16 exceeds bandwidth_max 8"),
        ("memories.rf_w.ports.0.name", "port one", "memories.rf_w.ports.0.name: String should match pattern"),
        (
            "memories.rf_w.ports.0.allocation",
            ["O, tl"],
            "memories.rf_w: ports.0.allocation: operand O is not in operands",
        ),
        ("memories.rf_w.served_dimensions", ["D3"], "memories.rf_w.served_dimensions: D3 is not an array dimension"),
        ("memories.rf_w.ports", [port("r_port_1", "read", 8, 8, "I2, tl")], "memories.rf_w: ports: no port writes it"),
        ("memories.rf_w.ports", [port("w_port_1", "write", 8, 8, "I2, fh")], "memories.rf_w: ports: no port reads it"),
        ("operational_array.sizes", [4], "operational_array: 2 dimensions but 1 sizes"),
        ("operational_array.sizes", [4, 0], "operational_array.sizes.1: Input should be greater than 0"),
        ("operational_array.is_imc", True, "operational_array: in-memory computing arrays (is_imc) are not supported"),
        (
            "operational_array.systolic_dimensions",
            ["D5"],
            "operational_array: systolic dimension D5 is not one of D1, D2",
        ),
        ("operational_array.unit_energy", _DELETE, "operational_array.unit_energy: Field required"),
    ],
)
def test_bad_input_names_the_field(path, value, message):
    with pytest.raises(ArchitectureError) as caught:
        parse(text(_set(design(), path, value)), "tiny.yaml")
    error = str(caught.value)
    assert error.startswith(f"architecture tiny.yaml (ZigZag): {message}")
    assert "\n" not in error


def test_operand_held_nowhere():
    data = design()
    del data["memories"]["rf_w"]
    data["memories"]["dram"]["operands"] = ["I1", "O"]
    data["memories"]["dram"]["ports"][0]["allocation"] = ["I1, tl", "O, fl"]
    with pytest.raises(
        ArchitectureError, match=r"^architecture tiny.yaml \(ZigZag\): memories: no memory holds operand I2$"
    ):
        parse(text(data), "tiny.yaml")


def test_last_memory_holds_every_operand():
    data = design()
    data["memories"]["dram"]["operands"] = ["I1", "I2"]
    data["memories"]["dram"]["ports"][0]["allocation"] = ["I1, tl", "I2, tl"]
    with pytest.raises(ArchitectureError) as caught:
        parse(text(data), "tiny.yaml")
    assert str(caught.value) == (
        "architecture tiny.yaml (ZigZag): memories.dram.operands: "
        "the last (off-chip) memory must hold I1, I2 and O (O is missing)"
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("", "ZigZag hardware tiny.yaml: expected a mapping, got nothing"),
        ("- a\n- b\n", "ZigZag hardware tiny.yaml: expected a mapping, got list"),
        ("name: [unclosed\n", "ZigZag hardware tiny.yaml: not YAML (line 2)"),
        ("name: !!python/object:os.system x\n", "ZigZag hardware tiny.yaml: not YAML (line 1)"),
    ],
)
def test_not_a_description(source, message):
    with pytest.raises(ArchitectureError) as caught:
        parse(source, "tiny.yaml")
    assert str(caught.value) == message


def test_missing_file(tmp_path):
    with pytest.raises(ArchitectureError, match="^ZigZag hardware file .*nothing.yaml does not exist$"):
        read(tmp_path / "nothing.yaml")
