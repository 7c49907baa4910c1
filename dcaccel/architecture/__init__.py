"""Accelerator descriptions: compute units, memories and links as a graph (``Architecture``),
validated from YAML (``dcaccel/architectures/*.yaml`` ships the designs) or built in Python;
variants with swept parameters (``units.pe.count=16``) come from :mod:`dcaccel.architecture.parameters`.

Importing this package does not import DaCe; the costing reads an architecture to cost a
schedule (:mod:`dcaccel.cost.schedule`).
"""

from dcaccel.architecture.graph import Architecture, ArchitectureError, all_to_all, bus, mesh_2d
from dcaccel.architecture.load import DEFAULT, DEFAULT_PES, design_pes, load, names
from dcaccel.architecture.parameters import parse_parameter, variants, with_parameters
from dcaccel.architecture.schema import (
    ANY_OP,
    ArchitectureSpec,
    Link,
    Memory,
    MemoryLevel,
    Topology,
    TopologyKind,
    Unit,
)

__all__ = [
    "ANY_OP",
    "DEFAULT",
    "DEFAULT_PES",
    "Architecture",
    "ArchitectureError",
    "ArchitectureSpec",
    "Link",
    "Memory",
    "MemoryLevel",
    "Topology",
    "TopologyKind",
    "Unit",
    "all_to_all",
    "bus",
    "design_pes",
    "load",
    "mesh_2d",
    "names",
    "parse_parameter",
    "variants",
    "with_parameters",
]
