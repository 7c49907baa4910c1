"""Loading architectures: the shipped designs by name (``dcaccel/architectures/*.yaml``) and
user files. YAML is read as data, never code, within bounds (:mod:`dcaccel.architecture.reader`)."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from dcaccel.architecture.graph import Architecture, ArchitectureError
from dcaccel.architecture.reader import read_file

#: The architecture every schedule assumes when none is given (the seed's model).
DEFAULT = "abstract"
#: The PE counts P of a study on a design that leaves a unit count open (``abstract``: P is the schedule's).
DEFAULT_PES = (1, 2, 4, 8, 16, 32, 64, 128)


def design_pes(designs: Iterable[Architecture]) -> tuple[int, ...]:
    """The PE counts P when none is given: the accelerator units of each of ``designs``
    (:meth:`Architecture.accelerator_units`) when every one fixes the count of each of its unit kinds, else
    :data:`DEFAULT_PES`. The one rule of ``dcaccel.Study``, ``dcaccel.explore``, ``dcaccel.map`` and the CLI."""
    designs = list(designs)
    if not designs or any(unit.count is None for design in designs for unit in design.units.values()):
        return DEFAULT_PES
    return tuple(sorted({design.accelerator_units(1) for design in designs}))


def _shipped() -> dict[str, resources.abc.Traversable]:
    folder = resources.files("dcaccel") / "architectures"
    return {entry.name.removesuffix(".yaml"): entry for entry in folder.iterdir() if entry.name.endswith(".yaml")}


def names() -> list[str]:
    """The shipped architectures, sorted."""
    return sorted(_shipped())


def load(name_or_path: str | Path | Architecture) -> Architecture:
    """A shipped architecture by name, or a YAML file by path (an :class:`Architecture` is returned as is)."""
    if isinstance(name_or_path, Architecture):
        return name_or_path
    shipped = _shipped()
    text = str(name_or_path)
    if text in shipped:
        return Architecture.from_yaml(shipped[text].read_text(encoding="utf-8"), text)
    if Path(text).suffix not in (".yaml", ".yml"):
        raise ArchitectureError(
            f"unknown architecture '{text}' (shipped: {', '.join(sorted(shipped))}; or a .yaml file)"
        )
    return Architecture.from_yaml(read_file(text, "architecture file"), text)
