"""An operand-aware memory hierarchy over a 2-D (or n-D) array of MAC units.

Each :class:`Memory` holds some operands (``W`` weights, ``I`` input activations, ``O`` outputs and partial
sums) and is instantiated once per group of units: ``served`` names the array dimensions one instance is
shared along (``()``: one instance per unit, a register file; every dimension: one instance for the whole
array, a global buffer or DRAM). Memories are listed innermost first; an operand's *levels* are the
memories that hold it, in that order, so an operand skips a memory that does not hold it (weights sent
from DRAM straight into the units' register files). Sizes and bandwidths are in bits; energy is per
access of one word of ``read_word_bits`` / ``write_word_bits`` (the port's narrowest width), as ZigZag and
Accelergy tables give it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from dcaccel.cost.nest import OPERANDS
from dcaccel.errors import DcaccelError


@dataclass(frozen=True)
class Memory:
    """One memory: which operands it holds, its size per instance, bandwidth per instance, word energy."""

    name: str
    operands: frozenset[str]
    size_bits: int | None  # per instance; None: unlimited (DRAM)
    read_bits_per_cycle: float
    write_bits_per_cycle: float
    read_word_bits: int  # the widest access, the word the energy is given for
    write_word_bits: int
    read_energy_pj: float  # per word read
    write_energy_pj: float  # per word written
    served: frozenset[str] = frozenset()  # array dimensions one instance is shared along
    shared_port: bool = False  # reads and writes take turns on one port
    read_step_bits: int | None = None  # the narrowest access (None: the word); transfers round up to it
    write_step_bits: int | None = None

    def __post_init__(self):
        unknown = self.operands - set(OPERANDS)
        if unknown or not self.operands:
            got = sorted(unknown)[0] if unknown else "none"
            raise DcaccelError(f"memory {self.name}: operands must be some of W, I, O, got {got}")
        for label in ("read_bits_per_cycle", "write_bits_per_cycle"):
            if not getattr(self, label) > 0:  # infinite: unlimited
                raise DcaccelError(f"memory {self.name}: {label} must be positive, got {getattr(self, label)}")
        for label in ("read_word_bits", "write_word_bits"):
            value = getattr(self, label)
            if not (math.isfinite(value) and value > 0):
                raise DcaccelError(f"memory {self.name}: {label} must be finite and positive, got {value}")


@dataclass(frozen=True)
class Hierarchy:
    """An array of MAC units (``array``: dimension -> size) and its memories, innermost first."""

    name: str
    array: Mapping[str, int]
    memories: tuple[Memory, ...]
    mac_energy_pj: float
    precision: Mapping[str, int] = field(default_factory=lambda: {"W": 8, "I": 8, "O": 8, "psum": 16})
    systolic: frozenset[str] = frozenset()  # array dimensions data shifts along (a drain per unrolling)

    def __post_init__(self):
        for operand in OPERANDS:
            levels = self.levels(operand)
            if not levels or levels[-1].size_bits is not None:
                raise DcaccelError(f"hierarchy {self.name}: operand {operand} needs an unlimited outermost memory")
        for memory in self.memories:
            unknown = memory.served - set(self.array)
            if unknown:
                raise DcaccelError(f"memory {memory.name}: serves unknown array dimension {sorted(unknown)[0]}")

    @property
    def units(self) -> int:
        return math.prod(self.array.values())

    def levels(self, operand: str) -> tuple[Memory, ...]:
        """The memories that hold ``operand``, innermost first."""
        return tuple(memory for memory in self.memories if operand in memory.operands)

    def instances(self, memory: Memory) -> int:
        """How many instances of ``memory`` the array has."""
        return math.prod(size for dim, size in self.array.items() if dim not in memory.served)
