"""The operand-aware :class:`~dcaccel.cost.hierarchy.Hierarchy` of an architecture description.

- The *array* is the accelerator unit kind the layer runs on (its support rules decide which:
  :func:`dcaccel.architecture.support.annotate`): a mesh of ``rows`` × ``cols`` units has the dimensions
  ``rows`` and ``cols`` (both systolic with ``topology.systolic``); any other topology one dimension
  ``units``; a unit of ``macs_per_cycle`` m > 1 adds a dimension ``lanes`` of m MACs that share the
  unit's local memories.
- Its *memories*, innermost first: the unit kind's local memories, the on-chip memories, then the
  off-chip memory, each in the order of the file. A memory holds the operands its ``operands`` field
  names (``weights``, ``inputs``, ``outputs``; all three when absent). A local memory is one per unit
  unless ``shared_along`` names the array dimensions one instance spans; an on-chip or off-chip memory
  serves the whole array.
- Bandwidth: ``bandwidth_bytes_per_cycle`` is one port reads and writes share, or, with
  ``separate_ports``, a read port and a write port of that width each; none is unlimited.
- Cycles are of the architecture's ``clock_mhz``: a unit kind at another ``frequency_mhz`` is refused.
- Energies are the description's, per element read or written; partial sums are
  ``partial_sum_bytes`` wide (twice the element by default) and cost in proportion. A memory with
  ``access_bytes`` moves whole accesses of that width: each transfer (one tile to or from one instance) is
  rounded up to them and costs their bytes (a 16-bit partial sum in a 24-bit register costs 3 bytes, as
  ZigZag counts a port's ``bandwidth_min``).

Every memory must hold an operand some level uses, and every operand must reach the off-chip memory;
:func:`hierarchy` refuses anything else with the reason.
"""

from __future__ import annotations

import math

from dcaccel.architecture import Architecture, MemoryLevel
from dcaccel.architecture.schema import ArchitectureSpec
from dcaccel.architecture.support import UnitRole
from dcaccel.cost.hierarchy import Hierarchy, Memory
from dcaccel.errors import DcaccelError

#: The array dimension of a unit's MAC lanes (``macs_per_cycle`` > 1): its local memories serve them all.
LANES = "lanes"
#: Operand names in descriptions -> the loop-nest model's operands.
OPERAND_NAMES = {"weights": "W", "inputs": "I", "outputs": "O"}


def _array(spec: ArchitectureSpec, kind: str, unit) -> dict[str, int]:
    topology = unit.topology
    if topology.rows is not None and topology.cols is not None:
        array = {"rows": topology.rows, "cols": topology.cols}
    elif unit.count is None:
        raise DcaccelError(f"units.{kind}.count: the loop-nest model needs the number of units of {spec.name}")
    else:
        array = {"units": unit.count}
    if unit.clock_ratio(spec.clock_mhz) != 1:
        raise DcaccelError(
            f"units.{kind}.frequency_mhz: the loop-nest model counts one clock; {unit.frequency_mhz:g} MHz is not "
            f"the architecture's clock_mhz {spec.clock_mhz:g}"
        )
    lanes = unit.macs_per_cycle or 1
    if lanes != int(lanes):
        raise DcaccelError(f"units.{kind}.macs_per_cycle: the loop-nest model needs a whole number, got {lanes:g}")
    if lanes > 1:
        array[LANES] = int(lanes)
    return array


def _bits_per_cycle(value: float | None) -> float:
    return math.inf if value is None else value * 8


def hierarchy(arch: Architecture, kind: str) -> Hierarchy:
    """The operand-aware hierarchy of the accelerator unit kind ``kind`` of ``arch`` (the module's rules)."""
    spec = arch.spec
    unit = spec.units.get(kind)
    if unit is None or unit.role == UnitRole.HOST:
        raise DcaccelError(f"architecture {spec.name}: '{kind}' is not an accelerator unit kind")
    array = _array(spec, kind, unit)
    element_bits = 8 * spec.element_bytes
    ordered = [
        *[(n, m) for n, m in spec.memories.items() if m.level == MemoryLevel.LOCAL and m.unit == kind],
        *[(n, m) for n, m in spec.memories.items() if m.level == MemoryLevel.ONCHIP],
        *[(n, m) for n, m in spec.memories.items() if m.level == MemoryLevel.OFFCHIP],
    ]
    memories = []
    for name, memory in ordered:
        held = memory.operands or list(OPERAND_NAMES)
        shared = memory.shared_along
        unknown = [dim for dim in shared if dim not in array]
        if unknown:
            raise DcaccelError(
                f"memories.{name}.shared_along: '{unknown[0]}' is not a dimension of the array ({', '.join(array)})"
            )
        served = frozenset(array) if memory.level != MemoryLevel.LOCAL else frozenset({*shared, LANES} & set(array))
        if memory.level == MemoryLevel.ONCHIP and memory.capacity_bytes is None:
            raise DcaccelError(f"memories.{name}: the loop-nest model needs its capacity_bytes")
        bits_per_cycle = _bits_per_cycle(memory.bandwidth_bytes_per_cycle)
        step = None if memory.access_bytes is None else 8 * memory.access_bytes
        memories.append(
            Memory(
                name,
                frozenset(OPERAND_NAMES[operand] for operand in held),
                None if memory.level == MemoryLevel.OFFCHIP else memory.capacity_bytes * 8,
                bits_per_cycle,
                bits_per_cycle,
                element_bits,
                element_bits,
                memory.read_energy_pj,
                memory.write_energy_pj,
                served,
                shared_port=not memory.separate_ports and memory.bandwidth_bytes_per_cycle is not None,
                read_step_bits=step,
                write_step_bits=step,
            )
        )
    partial = spec.partial_sum_bytes or 2 * spec.element_bytes
    precision = {"W": element_bits, "I": element_bits, "O": element_bits, "psum": 8 * partial}
    systolic = frozenset(array) - {LANES} if unit.topology.systolic else frozenset()
    return Hierarchy(spec.name, array, tuple(memories), unit.energy_per_mac_pj, precision, systolic)
