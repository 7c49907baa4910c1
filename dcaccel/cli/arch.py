"""``dcaccel arch list|show|check|import``: the shipped architecture descriptions and a user's YAML file.

``list`` prints one line per shipped design, ``show NAME`` its components (``--yaml``: the full
validated description, defaults filled in), ``check FILE`` validates a file and prints its summary;
a broken file is one error line (exit status 2). ``import zigzag FILE -o OUT.yaml`` converts a
ZigZag hardware description (:mod:`dcaccel.architecture.zigzag`); OUT.yaml lists in its comments what
dcaccel's schema cannot express, and one warning says how much that is.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dcaccel.architecture import Architecture, ArchitectureError, load, names
from dcaccel.cli.arguments import bounded_int, check_output, suggest

#: The tools whose hardware descriptions ``arch import`` reads.
IMPORT_FORMATS = ("zigzag",)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "arch",
        help="list, show and check accelerator descriptions",
        description="The accelerator descriptions (units, memories, links) the schedulers cost schedules on.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the shipped architectures")
    listing.set_defaults(run=run_list)
    show = actions.add_parser("show", help="one architecture's components")
    show.add_argument("name", metavar="NAME|FILE", help="a shipped name (dcaccel arch list) or a .yaml file")
    show.add_argument("--yaml", action="store_true", help="print the full description as YAML")
    show.set_defaults(run=run_show)
    check = actions.add_parser("check", help="validate a description file")
    check.add_argument("file", metavar="FILE", help="architecture YAML file")
    check.set_defaults(run=run_check)
    importing = actions.add_parser("import", help="convert another tool's hardware description")
    importing.add_argument("format", choices=IMPORT_FORMATS, help="the tool that wrote FILE")
    importing.add_argument("file", metavar="FILE", help="its hardware YAML file")
    importing.add_argument("-o", "--output", required=True, metavar="OUT.yaml", help="the description to write")
    importing.add_argument(
        "--element-bytes", type=bounded_int(1), default=1, help="bytes per element (default 1: ZigZag's 8-bit)"
    )
    importing.set_defaults(run=run_import)


def run_list(args: argparse.Namespace) -> int:
    for name in names():
        arch = load(name)
        sys.stdout.write(f"{name:<10} {arch.spec.description}\n")
    return 0


def run_show(args: argparse.Namespace) -> int:
    if args.name not in names() and not args.name.endswith((".yaml", ".yml")):
        shipped = names()
        raise ArchitectureError(
            f"unknown architecture '{args.name}'{suggest(args.name, shipped)} (shipped: {', '.join(shipped)})"
        )
    arch = load(args.name)
    sys.stdout.write(arch.to_yaml() if args.yaml else describe(arch))
    return 0


def run_check(args: argparse.Namespace) -> int:
    arch = load(args.file)
    sys.stdout.write(f"{args.file}: valid\n{describe(arch)}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from dcaccel.architecture.zigzag import read, to_architecture

    check_output("-o", args.output, (".yaml", ".yml"))
    imported = to_architecture(read(args.file), args.element_bytes)
    Path(args.output).write_text(imported.to_yaml(args.file), encoding="utf-8")
    sys.stdout.write(f"{args.output}: written\n{describe(imported.architecture)}")
    sys.stderr.write(
        f"warning: {len(imported.unexpressed)} properties of {args.file} have no place in dcaccel's schema "
        f"(listed in the comments of {args.output})\n"
    )
    return 0


def describe(arch: Architecture) -> str:
    """A readable summary: units, memories and links, one per line."""
    spec = arch.spec
    lines = [
        f"{arch.name}: {spec.description}",
        f"  element {spec.element_bytes} B, clock {spec.clock_mhz:g} MHz",
        "  units:",
    ]
    for name, unit in arch.units.items():
        count = "P (the schedule's)" if unit.count is None else str(unit.count)
        macs = "unlimited" if unit.macs_per_cycle is None else f"{unit.macs_per_cycle:g}"
        lines.append(
            f"    {name}: count {count}, ops {', '.join(unit.ops)}, {unit.elements_per_cycle:g} elements/cycle/port, "
            f"{macs} MACs/cycle, {unit.energy_per_mac_pj:g} pJ/MAC, {unit.area_mm2:g} mm2, {unit.topology.kind.value}"
        )
    lines.append("  memories:")
    for name, memory in arch.memories.items():
        capacity = "open" if memory.capacity_bytes is None else f"{memory.capacity_bytes} B"
        bandwidth = "unlimited" if memory.bandwidth_bytes_per_cycle is None else f"{memory.bandwidth_bytes_per_cycle:g}"
        owner = f" of {memory.unit}" if memory.unit else ""
        lines.append(
            f"    {name}: {memory.level.value}{owner}, {capacity}, {bandwidth} B/cycle, "
            f"read {memory.read_energy_pj:g} / write {memory.write_energy_pj:g} pJ per element"
        )
    lines.append("  links:")
    for link in spec.links:
        bandwidth = "unlimited" if link.bandwidth_bytes_per_cycle is None else f"{link.bandwidth_bytes_per_cycle:g}"
        lines.append(
            f"    {' - '.join(link.between)}: {bandwidth} B/cycle, {link.latency_cycles} cycles, "
            f"{link.energy_per_element_pj:g} pJ per element"
        )
    return "\n".join(lines) + "\n"


def costs_lines(costs: dict) -> list[str]:
    """The lines of a schedule's architecture costs (``ArchitectureCosts.summary()``) in a readable summary."""
    levels = ", ".join(f"{level} {energy:,.0f}" for level, energy in costs["energy_by_level_pj"].items())
    utilisation = ", ".join(f"{unit} {share:.1%}" for unit, share in costs["utilisation"].items())
    return [
        f"  on {costs['architecture']}:",
        f"    makespan     {costs['makespan_cycles']:,} cycles = {costs['makespan_seconds']:.4g} s",
        f"    energy       {costs['energy_pj']:,.0f} pJ ({levels})",
        f"    area / power {costs['area_mm2']:.4g} mm2 / {costs['average_power_w']:.4g} W",
        f"    utilisation  {utilisation}",
    ]
