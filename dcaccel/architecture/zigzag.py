"""Importing a ZigZag hardware description (``dcaccel arch import zigzag FILE.yaml -o OUT.yaml``).

ZigZag (KU Leuven's ``zigzag-dse``) describes one accelerator core in YAML: an ``operational_array``
of MAC units (``dimensions`` D1, D2, ... with their ``sizes``, ``unit_energy`` in pJ per MAC) and
``memories`` listed from the innermost to the outermost. A memory has its ``size`` in bits,
``r_cost``/``w_cost`` in pJ per access of one word (the ``bandwidth_max`` bits of the port that
serves the access), the memory operands it holds (``I1``, ``I2``, ``O``; ZigZag's mappings link
activations to I1, weights to I2, outputs and partial sums to O; ``I``/``W`` are accepted for I1/I2),
its ports (read, write or read-write, ``bandwidth_min``..``bandwidth_max`` bits per cycle, and which
operand moves in which direction through each: ``fh`` written from the level above, ``tl`` read to
the level below, ``fl`` written back from below, ``th`` read out to the level above) and its
``served_dimensions``: the array dimensions one instance spans (none: one instance per MAC unit).

:func:`parse` reads a file as data (``yaml.safe_load``: a key given twice keeps its last value, as
ZigZag reads it; nothing is evaluated) into the typed form :class:`ZigZagDesign`, checked as ZigZag's
own validator checks it (one-line errors naming the field). :func:`to_architecture` maps it onto
dcaccel's schema as far as the schema goes and lists, in :attr:`Imported.unexpressed`, every property
it cannot carry (which operands a memory holds, its ports, partial-sum precision, ...):

- the MAC units become one unit kind ``pe`` (``count`` = the product of the sizes, 1 MAC per cycle,
  1 element per port per cycle, ``energy_per_mac_pj`` = ``unit_energy``), a ``rows × cols`` mesh
  for a 2-D array (1 × n for 1-D, all-to-all beyond);
- the last memory (it must hold I1, I2 and O) is the off-chip memory; a memory serving every array
  dimension is on chip; one serving none is local to each ``pe``; one serving some dimensions is
  local too, each unit getting its share of the capacity and area;
- capacity: ``⌈size / 8⌉`` bytes; bandwidth: the sum of its ports' ``bandwidth_max`` in bytes per
  cycle; energy per element: ``r_cost`` (``w_cost``) × element bits / the word bits of the port
  that reads to the level below (is written from the level above);
- areas are copied as ZigZag gives them (it has no unit for them); no links (ZigZag's interconnect
  costs nothing); the clock is dcaccel's default (ZigZag counts cycles only).
"""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from dcaccel.architecture.graph import Architecture, ArchitectureError
from dcaccel.architecture.ranges import MAX_ELEMENT_BYTES
from dcaccel.architecture.reader import read_file, validated
from dcaccel.architecture.schema import describe_error

#: ZigZag's memory operands and the layer operands its shipped mappings link them to.
OPERAND_ROLES = {"I1": "I", "I2": "W", "O": "O"}
#: The W/I/O naming of the memory operands, accepted in ``operands`` and ``allocation``.
ALIASES = {"I": "I1", "W": "I2"}

#: Layer operands (W, I, O) as dcaccel's schema names them.
OPERAND_NAMES = {"W": "weights", "I": "inputs", "O": "outputs"}
#: The mesh dimensions of a 1-D and a 2-D array, in the order the array lists its dimensions.
ARRAY_DIMENSIONS = {1: ("cols",), 2: ("rows", "cols")}

#: The width of the comment lines that head an imported description.
COMMENT_WIDTH = 100

#: The unit kind the MAC array becomes.
UNIT = "pe"

Dimension = Annotated[str, Field(pattern=r"^D\d$")]
Operand = Annotated[str, Field(pattern=r"^(I1|I2|O|I|W)$")]
_ALLOCATION = re.compile(r"^(I1|I2|O|I|W), (fh|tl|fl|th)$")


class Direction(StrEnum):
    """A direction data moves through a memory port (ZigZag's ``DataDirection``)."""

    FROM_HIGH = "fh"  # written with data from the level above (WR_IN_BY_HIGH)
    TO_LOW = "tl"  # read out to the level below (RD_OUT_TO_LOW)
    FROM_LOW = "fl"  # written back from the level below: outputs, partial sums (WR_IN_BY_LOW)
    TO_HIGH = "th"  # read out to the level above: outputs, partial sums (RD_OUT_TO_HIGH)


class PortType(StrEnum):
    READ = "read"
    WRITE = "write"
    READ_WRITE = "read_write"


_READS = (Direction.TO_LOW, Direction.TO_HIGH)


class _ZigZag(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Port(_ZigZag):
    """A memory port: its type, bandwidth range (bits per cycle) and the (operand, direction) pairs it serves."""

    name: Annotated[str, Field(pattern=r"^r?w?_port_\d+$")]
    type: PortType
    bandwidth_min: PositiveInt
    bandwidth_max: PositiveInt
    allocation: tuple[tuple[str, Direction], ...]

    @pydantic.field_validator("allocation", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if not isinstance(value, list | tuple):
            return value
        pairs = []
        for entry in value:
            match = _ALLOCATION.match(entry) if isinstance(entry, str) else None
            if match is None:
                raise ValueError(f"'{entry}' is not 'OPERAND, DIRECTION' (I1, I2, O; fh, tl, fl, th)")
            pairs.append((ALIASES.get(match[1], match[1]), match[2]))
        return pairs

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> Port:
        if self.bandwidth_min > self.bandwidth_max:
            raise ValueError(f"bandwidth_min {self.bandwidth_min} exceeds bandwidth_max {self.bandwidth_max}")
        for operand, direction in self.allocation:
            reads = direction in _READS
            if (reads and self.type == PortType.WRITE) or (not reads and self.type == PortType.READ):
                raise ValueError(f"a {self.type.value} port cannot serve {operand}, {direction.value}")
        return self


class ZigZagMemory(_ZigZag):
    """One memory of the hierarchy, as ZigZag describes it (size in bits, costs in pJ per word access)."""

    size: PositiveInt
    r_cost: NonNegativeFloat
    w_cost: NonNegativeFloat
    area: NonNegativeFloat
    latency: NonNegativeInt
    mem_type: str = "sram"
    auto_cost_extraction: bool = False
    force_double_buffering: bool = False
    operands: tuple[Operand, ...] = Field(min_length=1)
    ports: tuple[Port, ...] = Field(min_length=1)
    served_dimensions: tuple[Dimension, ...]

    @pydantic.field_validator("operands", mode="after")
    @classmethod
    def _canonical(cls, operands: tuple[str, ...]) -> tuple[str, ...]:
        canonical = tuple(ALIASES.get(operand, operand) for operand in operands)
        if len(set(canonical)) != len(canonical):
            raise ValueError(f"an operand is listed twice: {', '.join(operands)}")
        return canonical

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> ZigZagMemory:
        if self.auto_cost_extraction:
            raise ValueError("auto_cost_extraction (CACTI) is not supported: give r_cost, w_cost and area")
        for index, port in enumerate(self.ports):
            for operand, _ in port.allocation:
                if operand not in self.operands:
                    raise ValueError(f"ports.{index}.allocation: operand {operand} is not in operands")
        for missing in (PortType.WRITE, PortType.READ):
            if all(port.type == missing for port in self.ports):
                raise ValueError(f"ports: no port {'reads' if missing == PortType.WRITE else 'writes'} it")
        return self

    @property
    def roles(self) -> tuple[str, ...]:
        """The layer operands it holds (W, I, O) under ZigZag's default operand links."""
        return tuple(OPERAND_ROLES[operand] for operand in self.operands)

    def word_bits(self, direction: Direction) -> int | None:
        """The widest ``bandwidth_max`` of the ports serving ``direction`` for any operand (None: no port does)."""
        widths = [port.bandwidth_max for port in self.ports if any(d == direction for _, d in port.allocation)]
        return max(widths, default=None)


class OperationalArray(_ZigZag):
    """The MAC array: its dimensions and sizes, energy and area per MAC unit."""

    dimensions: tuple[Dimension, ...] = Field(min_length=1)
    sizes: tuple[PositiveInt, ...] = Field(min_length=1)
    unit_energy: NonNegativeFloat
    unit_area: NonNegativeFloat
    systolic_dimensions: tuple[Dimension, ...] = ()
    is_imc: bool = False
    input_precision: tuple[PositiveInt, PositiveInt] | None = None

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> OperationalArray:
        if self.is_imc:
            raise ValueError("in-memory computing arrays (is_imc) are not supported")
        if len(self.dimensions) != len(self.sizes):
            raise ValueError(f"{len(self.dimensions)} dimensions but {len(self.sizes)} sizes")
        if len(set(self.dimensions)) != len(self.dimensions):
            raise ValueError(f"a dimension is listed twice: {', '.join(self.dimensions)}")
        unknown = sorted(set(self.systolic_dimensions) - set(self.dimensions))
        if unknown:
            raise ValueError(f"systolic dimension {unknown[0]} is not one of {', '.join(self.dimensions)}")
        return self

    @property
    def unit_count(self) -> int:
        return math.prod(self.sizes)

    @property
    def size_of(self) -> dict[str, int]:
        return dict(zip(self.dimensions, self.sizes, strict=True))


class ZigZagDesign(_ZigZag):
    """A whole ZigZag hardware description: the typed form a file is parsed into."""

    name: Annotated[str, Field(min_length=1)]
    memories: dict[str, ZigZagMemory] = Field(min_length=1)  # innermost first, as ZigZag reads them
    operational_array: OperationalArray
    dataflows: dict[Dimension, tuple[str, ...]] | None = None

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> ZigZagDesign:
        dimensions = set(self.operational_array.dimensions)
        for name, memory in self.memories.items():
            unknown = sorted(set(memory.served_dimensions) - dimensions)
            if unknown:
                raise ValueError(f"memories.{name}.served_dimensions: {unknown[0]} is not an array dimension")
        for operand in OPERAND_ROLES:
            if not any(operand in memory.operands for memory in self.memories.values()):
                raise ValueError(f"memories: no memory holds operand {operand}")
        top, memory = list(self.memories.items())[-1]
        missing = [operand for operand in OPERAND_ROLES if operand not in memory.operands]
        if missing:
            raise ValueError(
                f"memories.{top}.operands: the last (off-chip) memory must hold I1, I2 and O ({missing[0]} is missing)"
            )
        return self

    def instances(self, memory: ZigZagMemory) -> int:
        """How many instances of ``memory`` there are: one per combination of the array dimensions it does not serve."""
        sizes = self.operational_array.size_of
        return math.prod(size for dimension, size in sizes.items() if dimension not in memory.served_dimensions)


@dataclass(frozen=True)
class Imported:
    """A ZigZag design in dcaccel's schema, with what the schema could not express (one line each)."""

    design: ZigZagDesign
    architecture: Architecture
    unexpressed: tuple[str, ...]

    def to_yaml(self, source: str) -> str:
        """The description as YAML, headed by comments naming ``source`` and listing what was left out."""
        lines = [
            f"# Imported from the ZigZag hardware description {source} (dcaccel arch import zigzag).",
            "# Not expressed in dcaccel's schema (docs/validation.md):",
        ]
        for item in self.unexpressed:
            lines += textwrap.wrap(item, COMMENT_WIDTH, initial_indent="#  - ", subsequent_indent="#    ")
        return "\n".join(lines) + "\n" + self.architecture.to_yaml()


def parse(text: str, source: str) -> ZigZagDesign:
    """The typed form of a ZigZag hardware YAML ``text``; ``source`` names it in errors."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ArchitectureError(f"ZigZag hardware {source}: not YAML{where}") from None
    return validated(
        ZigZagDesign, data, f"ZigZag hardware {source}", lambda err: describe_error(err, f"{source} (ZigZag)")
    )


def read(path: str | Path) -> ZigZagDesign:
    """:func:`parse` of a file."""
    path = Path(path)
    return parse(read_file(path, "ZigZag hardware file"), str(path))


def to_architecture(design: ZigZagDesign, element_bytes: int = 1) -> Imported:
    """``design`` in dcaccel's schema (see the module docstring for the rules), elements of
    ``element_bytes`` (ZigZag's ONNX import defaults to 8-bit weights, activations and outputs)."""
    array = design.operational_array
    element_bits = 8 * element_bytes
    unexpressed = [
        f"operand precision: ZigZag takes it from the workload (8-bit by default, partial sums 16-bit); "
        f"here every element is {element_bytes} B and partial sums {2 * element_bytes} B",
        "the clock: ZigZag counts cycles only; the clock here is dcaccel's default",
        "areas: ZigZag gives them without a unit; copied as mm2",
        "ops: ZigZag costs Conv, Gemm and MatMul layers only (every other node is free); here the array runs every op",
    ]
    systolic = bool(array.systolic_dimensions) and len(array.sizes) <= 2
    if array.systolic_dimensions and set(array.systolic_dimensions) != set(array.dimensions):
        unexpressed.append(
            f"systolic dimensions {', '.join(array.systolic_dimensions)} of {', '.join(array.dimensions)}: "
            "dcaccel's systolic mesh drains along both"
        )
    if len(array.dimensions) > 2:
        unexpressed.append(
            f"array dimensions {'x'.join(map(str, array.sizes))}: dcaccel meshes are 2-D; all-to-all here"
        )
    if array.input_precision is not None:
        unexpressed.append(f"operational_array.input_precision {list(array.input_precision)}")
    if design.dataflows:
        unexpressed.append(f"dataflows (a fixed spatial unrolling): {dict(design.dataflows)}")
    memories = {}
    names = list(design.memories)
    for name, memory in design.memories.items():
        entry, notes = _memory(design, name, memory, offchip=name == names[-1], element_bits=element_bits)
        memories[name] = entry
        unexpressed += notes
    rows, cols = (1, array.sizes[0]) if len(array.sizes) == 1 else array.sizes[:2]
    topology = {"kind": "mesh", "rows": rows, "cols": cols} if len(array.sizes) <= 2 else {"kind": "all-to-all"}
    if systolic:
        topology["systolic"] = True
    data = {
        "name": design.name,
        "description": f"imported from ZigZag {design.name}: {'x'.join(map(str, array.sizes))} MAC array, "
        f"{len(design.memories)} memories",
        "element_bytes": element_bytes,
        "partial_sum_bytes": 2 * element_bytes,
        "units": {
            UNIT: {
                "count": array.unit_count,
                "ops": ["*"],
                "elements_per_cycle": 1,
                "macs_per_cycle": 1,
                "area_mm2": array.unit_area,
                "energy_per_mac_pj": array.unit_energy,
                "topology": topology,
            }
        },
        "memories": memories,
    }
    architecture = Architecture.from_dict(data, f"{design.name} (imported from ZigZag)")
    return Imported(design=design, architecture=architecture, unexpressed=tuple(unexpressed))


def _memory(
    design: ZigZagDesign, name: str, memory: ZigZagMemory, *, offchip: bool, element_bits: int
) -> tuple[dict, list[str]]:
    """One memory in dcaccel's schema, and the notes on what it loses."""
    dimensions = design.operational_array.dimensions
    capacity = math.ceil(memory.size / 8)
    served = set(memory.served_dimensions)
    notes = []
    if offchip:
        level = "offchip"
    elif served == set(dimensions):
        level = "onchip"
    else:
        level = "local"
    shared_along = []
    if level == "local" and served and len(dimensions) > 2:
        sharing = design.operational_array.unit_count // design.instances(memory)
        notes.append(
            f"{name}: {design.instances(memory)} instances, each shared by {sharing} units of a "
            f"{len(dimensions)}-D array; here one per unit"
        )
    elif level == "local" and served:
        mesh = ARRAY_DIMENSIONS[len(dimensions)]
        shared_along = [mesh[position] for position, d in enumerate(dimensions) if d in served]
    reads = [port for port in memory.ports if port.type != PortType.WRITE]
    writes = [port for port in memory.ports if port.type != PortType.READ]
    separate = not any(port.type == PortType.READ_WRITE for port in memory.ports)
    if separate:
        bandwidth = min(max(port.bandwidth_max for port in reads), max(port.bandwidth_max for port in writes))
        if len({port.bandwidth_max for port in memory.ports}) > 1:
            notes.append(f"{name}: read and write ports of different widths; both at the narrower, {bandwidth} b/cycle")
    else:
        bandwidth = sum(port.bandwidth_max for port in memory.ports if port.type == PortType.READ_WRITE)
        if len(memory.ports) > 1:
            notes.append(f"{name}: a read/write port beside others; one shared port of {bandwidth} b/cycle")
    read_bits = memory.word_bits(Direction.TO_LOW) or memory.word_bits(Direction.TO_HIGH)
    write_bits = memory.word_bits(Direction.FROM_HIGH) or memory.word_bits(Direction.FROM_LOW)
    entry = {
        "level": level,
        **({"unit": UNIT} if level == "local" else {}),
        **({} if offchip else {"capacity_bytes": capacity}),
        "bandwidth_bytes_per_cycle": bandwidth / 8,
        "read_energy_pj": memory.r_cost * element_bits / read_bits if read_bits else 0.0,
        "write_energy_pj": memory.w_cost * element_bits / write_bits if write_bits else 0.0,
        "area_mm2": memory.area,
        **(
            {"operands": [OPERAND_NAMES[role] for role in memory.roles]} if set(memory.roles) != {"W", "I", "O"} else {}
        ),
        **({"shared_along": shared_along} if shared_along else {}),
        **({"separate_ports": True} if separate else {}),
    }
    steps = sorted({port.bandwidth_min for port in memory.ports})
    expressed = steps[0] % 8 == 0 and steps[0] // 8 <= MAX_ELEMENT_BYTES
    if expressed:
        entry["access_bytes"] = steps[0] // 8
    if len(steps) > 1 or not expressed:
        notes.append(
            f"{name}: ports of bandwidth_min {', '.join(map(str, steps))} b; here every transfer in steps of "
            + (f"{steps[0]} b" if expressed else "one element")
        )
    return entry, notes
