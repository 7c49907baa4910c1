"""Architecture parameters: one field of one component set to a value, to sweep variants of a design.

A parameter path names a field of the schema (:mod:`dcaccel.architecture.schema`):

- ``FIELD``: a top-level scalar (``element_bytes``, ``clock_mhz``);
- ``units.NAME.FIELD`` and ``memories.NAME.FIELD``: a field of a unit kind or a memory, a nested
  one included (``units.pe.topology.rows``);
- ``links.A.B.FIELD``: a field of the link between components ``A`` and ``B``;
- ``offchip.FIELD`` / ``onchip.FIELD``: the memory of that level, whatever its name (the on-chip
  memory only when the design has exactly one).

Paths are checked against the schema's models before anything is set (an unknown component or
field is a one-line error naming the path); values are YAML scalars (``8``, ``2.4``, ``1e-3``, ``null``)
read as a description's YAML is (:func:`~dcaccel.architecture.reader.read_yaml`), never evaluated, and
the whole description is validated again by the schema (types and ranges), so a bad value is the
schema's one-line error under the variant's label, e.g.
``architecture eyeriss[units.pe.count=0]: units.pe.count: Input should be greater than 0``.
"""

from __future__ import annotations

import itertools
import math
import typing
from collections.abc import Mapping, Sequence

import pydantic
import yaml

from dcaccel.architecture.graph import Architecture, ArchitectureError
from dcaccel.architecture.reader import read_yaml, shown
from dcaccel.architecture.schema import ArchitectureSpec, Link, Memory, MemoryLevel, Unit

#: Top-level fields that are not a parameter: the name (a variant keeps it) and the components.
_NOT_PARAMETERS = ("name", "units", "memories", "links")

#: The most variants one architecture's parameters may give (the product of their values).
MAX_VARIANTS = 4096

#: Level aliases of a memory path.
_LEVELS = (MemoryLevel.OFFCHIP.value, MemoryLevel.ONCHIP.value)

Scalar = int | float | str | bool | None


def parse_parameter(text: str) -> tuple[str, tuple[Scalar, ...]]:
    """``PATH=VALUE[,VALUE...]`` as (path, values); each value a YAML scalar."""
    path, sep, values = text.partition("=")
    path = path.strip()
    pieces = [piece.strip() for piece in values.split(",")]
    if not sep or not path or not all(pieces):
        raise ArchitectureError(f"architecture parameter {text!r}: expected PATH=VALUE[,VALUE...]")
    parsed = []
    for piece in pieces:
        try:
            value = read_yaml(piece, f"parameter {path}")
        except ArchitectureError:  # not YAML: the text itself
            value = piece
        if not isinstance(value, Scalar):
            raise ArchitectureError(
                f"architecture parameter {shown(path)}: {_quoted(piece)} is not a number, text or null"
            )
        parsed.append(value)
    return path, tuple(parsed)


def locate(arch: Architecture, path: str) -> tuple[str | int, ...]:
    """Where ``path`` is in ``arch.to_dict()`` (keys and list indices), after checking that it names an
    existing component and a field of the schema; raises :class:`ArchitectureError` naming the path."""
    parts = path.split(".")
    head = parts[0]

    def fail(reason: str) -> typing.NoReturn:
        raise ArchitectureError(f"architecture {arch.label}: parameter {shown(path)}: {reason}")

    if len(parts) == 1:
        if head in _NOT_PARAMETERS or head not in ArchitectureSpec.model_fields:
            fail(f"not a parameter (top-level parameters: {', '.join(_top_level())})")
        return (head,)
    if head in _LEVELS:
        memories = arch.onchip if head == MemoryLevel.ONCHIP else [arch.offchip]
        if len(memories) != 1:
            fail(f"the design has {len(memories)} {head} memories ({', '.join(memories) or 'none'}): name one")
        return ("memories", memories[0], *_field(Memory, parts[1:], fail))
    if head in ("units", "memories"):
        components = arch.units if head == "units" else arch.memories
        if len(parts) < 3:
            fail(f"expected {head}.NAME.FIELD")
        if parts[1] not in components:
            fail(f"no {'unit' if head == 'units' else 'memory'} {_quoted(parts[1])} ({head}: {', '.join(components)})")
        return (head, parts[1], *_field(Unit if head == "units" else Memory, parts[2:], fail))
    if head == "links":
        if len(parts) < 4:
            fail("expected links.A.B.FIELD")
        for index, link in enumerate(arch.spec.links):
            if set(link.between) == set(parts[1:3]):
                if parts[3] == "between":
                    fail("the ends of a link are not a parameter")
                return ("links", index, *_field(Link, parts[3:], fail))
        fail(f"no link between {shown(parts[1])} and {shown(parts[2])}")
    fail(
        f"expected units.NAME.FIELD, memories.NAME.FIELD, links.A.B.FIELD, {'|'.join(_LEVELS)}.FIELD "
        "or a top-level field"
    )


def _quoted(text: str) -> str:
    """``text`` in quotes for a one-line message (cut, its line breaks escaped, when it is not a plain name)."""
    return f"'{text}'" if shown(text) == text else shown(text)


def _top_level() -> list[str]:
    return [name for name in ArchitectureSpec.model_fields if name not in _NOT_PARAMETERS]


def _field(model: type[pydantic.BaseModel], parts: Sequence[str], fail) -> tuple[str, ...]:
    """``parts`` as the path of a scalar field of ``model``, going into nested models."""
    for index, part in enumerate(parts):
        if part not in model.model_fields:
            fail(f"no field {_quoted(part)} (fields: {', '.join(model.model_fields)})")
        nested = _model_of(model.model_fields[part].annotation)
        if index == len(parts) - 1:
            if nested is not None:
                fail(f"'{part}' has fields of its own: {', '.join(nested.model_fields)}")
            return tuple(parts)
        if nested is None:
            fail(f"'{part}' has no fields")
        model = nested
    return tuple(parts)


def _model_of(annotation) -> type[pydantic.BaseModel] | None:
    """The pydantic model an annotation holds (``Topology``, ``Topology | None``), or None."""
    candidates = [annotation, *typing.get_args(annotation)]
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, pydantic.BaseModel)), None)


def value_text(value: Scalar) -> str:
    """A value as a label writes it (YAML's spelling: ``null``, ``true``)."""
    if value is None or isinstance(value, bool):
        return yaml.safe_dump(value).removesuffix("\n...\n").strip()
    return shown(value)


def with_parameters(arch: Architecture, settings: Mapping[str, Scalar]) -> Architecture:
    """``arch`` with each parameter path of ``settings`` set to its value, validated by the schema and
    labelled ``NAME[path=value,...]`` (``arch`` itself without settings)."""
    if not settings:
        return arch
    data = arch.to_dict()
    for path, value in settings.items():
        *where, last = locate(arch, path)
        target = data
        for key in where:
            target = target[key]
        target[last] = value
    label = f"{arch.label}[{','.join(f'{path}={value_text(value)}' for path, value in settings.items())}]"
    return Architecture.from_dict(data, label, label=label)


def variants(arch: Architecture, parameters: Mapping[str, Sequence[Scalar]]) -> list[Architecture]:
    """One variant of ``arch`` per combination of the parameters' values (the product, in order)."""
    for path, values in parameters.items():
        locate(arch, path)
        if not values:
            raise ArchitectureError(f"architecture {arch.label}: parameter {path}: no value")
    count = math.prod(len(values) for values in parameters.values())
    if count > MAX_VARIANTS:
        raise ArchitectureError(
            f"architecture {arch.label}: the parameters give {count} variants, more than {MAX_VARIANTS}"
        )
    paths = list(parameters)
    return [
        with_parameters(arch, dict(zip(paths, combination, strict=True)))
        for combination in itertools.product(*(parameters[path] for path in paths))
    ]
