"""The operand-aware :class:`~dcaccel.cost.hierarchy.Hierarchy` of an architecture description.

- The *array* is the description's accelerator unit kind: a mesh of ``rows`` × ``cols`` units has the
  dimensions ``rows`` and ``cols``; any other topology one dimension ``units``. A description with more
  than one accelerator unit kind is refused (the loop-nest model maps a layer onto one array).
- Its *memories*, innermost first: the unit kind's local memories, the on-chip memories, then the
  off-chip memory, each in the order of the file. A memory holds the operands its ``operands`` field
  names (``weights``, ``inputs``, ``outputs``; all three when absent). A local memory is one per unit
  unless ``shared_along`` names the array dimensions one instance spans; an on-chip or off-chip memory
  serves the whole array.
- Bandwidths: ``read_bandwidth_bytes_per_cycle`` / ``write_bandwidth_bytes_per_cycle`` are two ports;
  ``bandwidth_bytes_per_cycle`` alone is one port reads and writes share; none is unlimited.
- Energies are the description's, per element read or written; partial sums are
  ``partial_sum_bytes`` wide (twice the element by default) and cost in proportion.

Every memory must hold an operand some level uses, and every operand must reach the off-chip memory;
:func:`hierarchy` refuses anything else with the reason.
"""

from __future__ import annotations

import math

from dcaccel.architecture import Architecture, MemoryLevel
from dcaccel.architecture.support import UnitRole
from dcaccel.cost.hierarchy import Hierarchy, Memory
from dcaccel.errors import DcaccelError

#: Operand names in descriptions -> the loop-nest model's operands.
OPERAND_NAMES = {"weights": "W", "inputs": "I", "outputs": "O"}


def _array(name: str, unit) -> dict[str, int]:
    topology = unit.topology
    if topology.rows is not None and topology.cols is not None:
        return {"rows": topology.rows, "cols": topology.cols}
    if unit.count is None:
        raise DcaccelError(f"architecture {name}: the accelerator's units need a count for the loop-nest model")
    return {"units": unit.count}


def _bits_per_cycle(value: float | None) -> float:
    return math.inf if value is None else value * 8


def hierarchy(arch: Architecture) -> Hierarchy:
    """The operand-aware hierarchy of ``arch`` (see the module's rules)."""
    spec = arch.spec
    accelerators = [name for name, unit in spec.units.items() if unit.role != UnitRole.HOST]
    if len(accelerators) != 1:
        raise DcaccelError(
            f"architecture {spec.name}: the loop-nest model needs one accelerator unit kind, "
            f"got {', '.join(accelerators) or 'none'}"
        )
    kind = accelerators[0]
    unit = spec.units[kind]
    array = _array(spec.name, unit)
    element_bits = 8 * spec.element_bytes
    ordered = [
        *[(n, m) for n, m in spec.memories.items() if m.level == MemoryLevel.LOCAL and m.unit == kind],
        *[(n, m) for n, m in spec.memories.items() if m.level == MemoryLevel.ONCHIP],
        *[(n, m) for n, m in spec.memories.items() if m.level == MemoryLevel.OFFCHIP],
    ]
    memories = []
    for name, memory in ordered:
        held = getattr(memory, "operands", None) or list(OPERAND_NAMES)
        shared = getattr(memory, "shared_along", None) or []
        unknown = [dim for dim in shared if dim not in array]
        if unknown:
            raise DcaccelError(
                f"memories.{name}.shared_along: '{unknown[0]}' is not a dimension of the array ({', '.join(array)})"
            )
        served = frozenset(array) if memory.level != MemoryLevel.LOCAL else frozenset(shared)
        if memory.level == MemoryLevel.ONCHIP and memory.capacity_bytes is None:
            raise DcaccelError(f"memories.{name}: the loop-nest model needs its capacity_bytes")
        read = getattr(memory, "read_bandwidth_bytes_per_cycle", None)
        write = getattr(memory, "write_bandwidth_bytes_per_cycle", None)
        two_ports = read is not None or write is not None
        if two_ports:
            read_bits, write_bits = _bits_per_cycle(read), _bits_per_cycle(write)
        else:
            read_bits = write_bits = _bits_per_cycle(memory.bandwidth_bytes_per_cycle)
        memories.append(
            Memory(
                name,
                frozenset(OPERAND_NAMES[operand] for operand in held),
                None if memory.level == MemoryLevel.OFFCHIP else memory.capacity_bytes * 8,
                read_bits,
                write_bits,
                element_bits,
                element_bits,
                memory.read_energy_pj,
                memory.write_energy_pj,
                served,
                shared_port=not two_ports and memory.bandwidth_bytes_per_cycle is not None,
            )
        )
    partial = getattr(spec, "partial_sum_bytes", None) or 2 * spec.element_bytes
    precision = {"W": element_bits, "I": element_bits, "O": element_bits, "psum": 8 * partial}
    return Hierarchy(spec.name, array, tuple(memories), unit.energy_per_mac_pj, precision)
