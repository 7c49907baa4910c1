"""A first-order power and area proxy for a (PEs, on-chip memory, I/O, makespan) design point.

The proxy is deliberately simple and every coefficient is a parameter: area grows with the number
of PEs and the on-chip memory; energy is the sum of per-element costs of the I/O classes (off-chip,
on-chip, streamed between PEs) plus a per-PE static energy per cycle; average power is energy over
makespan. The defaults are relative units (one streamed element = 1), not a calibrated technology:
only ratios between design points are meaningful.
"""

import math
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class CostModel:
    """Coefficients of the power/area proxy (relative units)."""

    pe_area: float = 1.0  # area of one PE
    memory_area_per_element: float = 1e-3  # area of one element of on-chip memory
    offchip_energy: float = 100.0  # energy to move one element off-chip (read or write)
    onchip_energy: float = 5.0  # energy to move one element through on-chip memory
    stream_energy: float = 1.0  # energy to stream one element PE to PE
    pe_static_energy: float = 0.1  # energy of one PE per cycle, busy or not

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ValueError(f"cost_model.{item.name} must be a finite number of at least 0, got {value!r}")

    def area(self, pes: int, onchip_memory: int) -> float:
        return self.pe_area * pes + self.memory_area_per_element * onchip_memory

    def energy(self, pes: int, makespan: int, offchip_io: int, onchip_io: int, streamed_io: int) -> float:
        return (
            self.offchip_energy * offchip_io
            + self.onchip_energy * onchip_io
            + self.stream_energy * streamed_io
            + self.pe_static_energy * pes * makespan
        )

    def power(self, pes: int, makespan: int, offchip_io: int, onchip_io: int, streamed_io: int) -> float:
        if makespan <= 0:
            return 0.0
        return self.energy(pes, makespan, offchip_io, onchip_io, streamed_io) / makespan
