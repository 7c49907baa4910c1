"""The host↔accelerator links of a partitioned design as unit kinds a scheduler can place transfers on.

A partition (``dcaccel.partition``) moves data between the architecture's host (the unit kind of
``role: host``) and its accelerator kinds over the links the description declares between them.
:func:`link_units` adds one unit kind per such link — count 1, throughput its bandwidth over the element
size in elements per cycle, energy per element as energy per MAC, running only :data:`TRANSFER` tasks —
so that transfer tasks take the link's time, serialise on it and cost its energy.
"""

from __future__ import annotations

from dcaccel.architecture.graph import Architecture
from dcaccel.architecture.schema import Unit
from dcaccel.architecture.support import UnitRole
from dcaccel.errors import DcaccelError

#: The op of a transfer task, the one op a link unit runs.
TRANSFER = "Transfer"


def host_of(arch: Architecture) -> str | None:
    """The architecture's host unit kind (``role: host``), or None."""
    return next((name for name, unit in arch.units.items() if unit.role == UnitRole.HOST), None)


def link_units(arch: Architecture, kinds: set[str]) -> tuple[Architecture, dict[str, tuple[str, str]]]:
    """``arch`` plus one unit kind per link between its host and an accelerator kind of ``kinds`` (see the
    module docstring), under ``arch``'s label, and the link units by name -> (host, kind). Raises when a
    link is missing or unlimited."""
    host = host_of(arch)
    units = dict(arch.units)
    links = {}
    for kind in sorted(kinds):
        link = arch.link(host, kind)
        if link is None or link.bandwidth_bytes_per_cycle is None:
            missing = "no link" if link is None else "an unlimited link"
            raise DcaccelError(
                f"architecture {arch.name}: {missing} between host {host} and {kind}; "
                f"the partition's transfers need its bandwidth_bytes_per_cycle"
            )
        name = f"{host}_{kind}_link"
        while name in units or name in arch.memories:
            name += "_"
        units[name] = Unit(
            count=1,
            ops=[TRANSFER],
            elements_per_cycle=link.bandwidth_bytes_per_cycle / arch.element_bytes,
            energy_per_mac_pj=link.energy_per_element_pj,
        )
        links[name] = (host, kind)
    costed = arch if not links else Architecture(arch.spec.model_copy(update={"units": units}), arch.label)
    return costed, links
