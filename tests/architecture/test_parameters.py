"""Architecture parameters: paths checked against the schema, values validated by it, variants labelled."""

from __future__ import annotations

import pytest

from dcaccel.architecture import Architecture, ArchitectureError, load, parse_parameter, variants, with_parameters


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("offchip.bandwidth_bytes_per_cycle=8,16,32", ("offchip.bandwidth_bytes_per_cycle", (8, 16, 32))),
        ("units.pe.count=16", ("units.pe.count", (16,))),
        (" clock_mhz = 2.5e+2 , 100 ", ("clock_mhz", (250.0, 100))),
        ("memories.glb.bandwidth_bytes_per_cycle=null", ("memories.glb.bandwidth_bytes_per_cycle", (None,))),
        ("description=a b", ("description", ("a b",))),
    ],
)
def test_parse(text, expected):
    assert parse_parameter(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("units.pe.count", "expected PATH=VALUE"),
        ("=8", "expected PATH=VALUE"),
        ("units.pe.count=", "expected PATH=VALUE"),
        ("units.pe.count=8,,16", "expected PATH=VALUE"),
        ("units.pe.count=[8]", "'[8]' is not a number, text or null"),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(ArchitectureError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_parameter(text)


@pytest.mark.parametrize(
    ("name", "path", "value", "read"),
    [
        ("eyeriss", "offchip.bandwidth_bytes_per_cycle", 8, lambda a: a.memories["dram"].bandwidth_bytes_per_cycle),
        ("eyeriss", "onchip.capacity_bytes", 4096, lambda a: a.memories["glb"].capacity_bytes),
        ("eyeriss", "memories.spad.read_energy_pj", 0.25, lambda a: a.memories["spad"].read_energy_pj),
        ("eyeriss", "links.glb.pe.latency_cycles", 3, lambda a: a.link("pe", "glb").latency_cycles),
        ("eyeriss", "units.pe.macs_per_cycle", 4, lambda a: a.units["pe"].macs_per_cycle),
        ("abstract", "units.pe.count", 16, lambda a: a.units["pe"].count),
        ("tpu", "units.column.frequency_mhz", None, lambda a: a.units["column"].frequency_mhz),
        ("cgra", "clock_mhz", 250, lambda a: a.clock_mhz),
        ("cgra", "element_bytes", 2, lambda a: a.element_bytes),
    ],
)
def test_a_parameter_sets_its_field_and_nothing_else(name, path, value, read):
    arch = load(name)
    variant = with_parameters(arch, {path: value})
    assert read(variant) == value
    assert variant.name == name
    shown = "null" if value is None else value
    assert variant.label == f"{name}[{path}={shown}]"
    assert with_parameters(variant, {path: read(arch)}).spec == arch.spec


def test_a_nested_field():
    arch = load("eyeriss")
    mesh = {"units.pe.count": 24, "units.pe.topology.rows": 2, "units.pe.topology.cols": 12}
    variant = with_parameters(arch, mesh)
    assert variant.instance_graph("pe").number_of_nodes() == 24
    assert variant.label == "eyeriss[units.pe.count=24,units.pe.topology.rows=2,units.pe.topology.cols=12]"


@pytest.mark.parametrize(
    ("name", "path", "value", "message"),
    [
        ("eyeriss", "units.px.count", 4, "architecture eyeriss: parameter units.px.count: no unit 'px' (units: pe)"),
        ("eyeriss", "units.pe.cnt", 4, "parameter units.pe.cnt: no field 'cnt' (fields: count, ops,"),
        ("eyeriss", "units.pe", 4, "parameter units.pe: expected units.NAME.FIELD"),
        ("eyeriss", "units.pe.topology", 4, "parameter units.pe.topology: 'topology' has fields of its own: kind"),
        ("eyeriss", "units.pe.count.x", 4, "parameter units.pe.count.x: 'count' has no fields"),
        ("eyeriss", "memories.sram.capacity_bytes", 4, "no memory 'sram' (memories: spad, glb, dram)"),
        ("eyeriss", "links.pe.dram.latency_cycles", 4, "parameter links.pe.dram.latency_cycles: no link between pe"),
        ("eyeriss", "links.pe.glb.between", 4, "the ends of a link are not a parameter"),
        ("eyeriss", "name", "x", "parameter name: not a parameter (top-level parameters: description,"),
        ("eyeriss", "dram.capacity_bytes", 4, "parameter dram.capacity_bytes: expected units.NAME.FIELD, memories."),
        ("tpu", "onchip.capacity_bytes", 4, None),  # tpu has one on-chip memory
        ("eyeriss", "units.pe.count", 0, "architecture eyeriss[units.pe.count=0]: units.pe.count: Input should be"),
        ("eyeriss", "units.pe.count", 13, "eyeriss[units.pe.count=13]: units.pe: mesh 12×14 does not hold count 13"),
        ("eyeriss", "offchip.bandwidth_bytes_per_cycle", "fast", "bandwidth_bytes_per_cycle: Input should be a valid"),
        ("eyeriss", "element_bytes", -1, "eyeriss[element_bytes=-1]: element_bytes: Input should be greater than 0"),
    ],
)
def test_errors_name_the_path(name, path, value, message):
    if message is None:
        assert with_parameters(load(name), {path: value}).label == f"{name}[{path}={value}]"
        return
    with pytest.raises(ArchitectureError) as raised:
        with_parameters(load(name), {path: value})
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_level_with_several_memories_needs_a_name():
    arch = load("eyeriss")
    two = Architecture.from_dict(
        {**arch.to_dict(), "memories": {**arch.to_dict()["memories"], "l2": {"level": "onchip"}}}
    )
    with pytest.raises(ArchitectureError, match="the design has 2 onchip memories \\(glb, l2\\): name one"):
        with_parameters(two, {"onchip.capacity_bytes": 8})


def test_variants_are_the_product_in_order():
    found = variants(load("abstract"), {"units.pe.count": [16, 64], "offchip.bandwidth_bytes_per_cycle": [8, None]})
    assert [v.label for v in found] == [
        "abstract[units.pe.count=16,offchip.bandwidth_bytes_per_cycle=8]",
        "abstract[units.pe.count=16,offchip.bandwidth_bytes_per_cycle=null]",
        "abstract[units.pe.count=64,offchip.bandwidth_bytes_per_cycle=8]",
        "abstract[units.pe.count=64,offchip.bandwidth_bytes_per_cycle=null]",
    ]
    assert [(v.units["pe"].count, v.memories[v.offchip].bandwidth_bytes_per_cycle) for v in found] == [
        (16, 8),
        (16, None),
        (64, 8),
        (64, None),
    ]


@pytest.mark.parametrize("parameters", [{}, None])
def test_no_parameters_is_the_architecture_itself(parameters):
    arch = load("tpu")
    assert variants(arch, parameters or {}) == [arch]


def test_variants_check_every_path_first():
    with pytest.raises(ArchitectureError, match="parameter units.pe.cnt"):
        variants(load("abstract"), {"units.pe.count": [4], "units.pe.cnt": [1]})
    with pytest.raises(ArchitectureError, match="parameter units.pe.count: no value"):
        variants(load("abstract"), {"units.pe.count": []})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("offchip.bandwidth_bytes_per_cycle=.inf", "offchip.bandwidth_bytes_per_cycle=inf]: memories.dram."),
        ("offchip.bandwidth_bytes_per_cycle=1e-12", "bandwidth_bytes_per_cycle: Input should be greater than or equal"),
        (
            "offchip.bandwidth_bytes_per_cycle=1e-300",
            "bandwidth_bytes_per_cycle: Input should be greater than or equal",
        ),
        ("clock_mhz=.inf", "clock_mhz: Input should be a finite number"),
        ("clock_mhz=.nan", "clock_mhz: Input should be a finite number"),
        ("offchip.read_energy_pj=1e308", "memories.dram.read_energy_pj: Input should be less than or equal to"),
        ("units.pe.count=true", "units.pe.count: Input should be a valid integer"),
        ("units.pe.count='168'", "units.pe.count: Input should be a valid integer"),
        ("units.pe.count=1e3", "units.pe.count: Input should be a valid integer"),
        ("units.pe.count=" + "9" * 400, "units.pe.count: Input should be less than or equal to 1099511627776"),
        ("units.pe.elements_per_cycle=" + "9" * 400, "units.pe.elements_per_cycle: Input should be a valid number"),
        ("units.pe.elements_per_cycle=1e-7", "units.pe.elements_per_cycle: Input should be greater than or equal"),
        ("units.pe.macs_per_cycle=&a [*a]", "units.pe.macs_per_cycle: Input should be a valid number"),
    ],
)
def test_parameter_values_are_validated_as_a_file_is(text, message):
    """``--arch-param`` values are read as a description's YAML and validated by the same schema."""
    arch = load("eyeriss")
    path, values = parse_parameter(text)
    with pytest.raises(ArchitectureError) as raised:
        variants(arch, {path: values})
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_parameter_values_in_range():
    (variant,) = variants(load("eyeriss"), dict([parse_parameter("offchip.bandwidth_bytes_per_cycle=1e-3")]))
    assert variant.offchip_bandwidth == 1e-3
    (variant,) = variants(load("abstract"), dict([parse_parameter("offchip.read_energy_pj=-0.0")]))
    assert str(variant.memories["offchip"].read_energy_pj) == "0.0"


def test_line_breaks_never_reach_a_label_or_a_message():
    """A path or a value is shown escaped and cut: a label and every error stay on one line."""
    assert with_parameters(load("eyeriss"), {"description": "a\nb"}).label == "eyeriss[description='a\\nb']"
    with pytest.raises(ArchitectureError) as raised:
        with_parameters(load("eyeriss"), {"units.p\ne.count": 3})
    assert str(raised.value) == "architecture eyeriss: parameter 'units.p\\ne.count': no unit 'p\\ne' (units: pe)"
    with pytest.raises(ArchitectureError) as raised:
        with_parameters(load("eyeriss"), {"units.pe.count": "x\n" * 50})
    assert str(raised.value).startswith("architecture eyeriss[units.pe.count='x\\nx\\nx\\n")
    assert "\n" not in str(raised.value)


def test_the_product_of_values_is_bounded():
    """Two parameters of 10,000 values each would be 10**8 variants: refused before any is built."""
    values = list(range(1, 10_001))
    with pytest.raises(
        ArchitectureError, match=r"^architecture abstract: the parameters give 100000000 variants, more"
    ):
        variants(load("abstract"), {"units.pe.count": values, "element_bytes": values})
    assert len(variants(load("abstract"), {"units.pe.count": values[:16], "element_bytes": values[:16]})) == 256
