"""The JSON views of result objects: a result shows some of its dataclass fields and properties by name.

One rule for every ``summary()`` / ``to_json()`` of a result (a schedule and its scheduler's detail, its
architecture costs, a partition, a mapping search): the view is the object's attributes named once, each
under its own name unless renamed; what a view computes beyond them (counts, lists of rows) it adds itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any


def field_names(record: Any, without: Iterable[str] = ()) -> tuple[str, ...]:
    """The names of the dataclass ``record``'s fields, in declaration order, but for ``without``."""
    left_out = set(without)
    return tuple(f.name for f in fields(record) if f.name not in left_out)


def attributes(record: Any, names: Iterable[str], **renamed: str) -> dict[str, Any]:
    """``record``'s attributes ``names`` (fields or properties) by name, in order, then each attribute
    ``renamed[key]`` under ``key`` (a view whose key differs from the attribute's name)."""
    view = {name: getattr(record, name) for name in names}
    return view | {key: getattr(record, name) for key, name in renamed.items()}
