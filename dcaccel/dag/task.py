"""What a node of the task DAG is: a typed, versioned record (docs/dag.md, "Task information").

Every node of a :class:`~dcaccel.dag.taskdag.TaskDAG` carries one :class:`TaskInfo`: the model node and
ONNX op a task lowers and with which implementation, its role (compute, transfer, buffer, opaque; with
the reason), its arithmetic (:mod:`dcaccel.dag.arithmetic`), the unit kind a partition placed it on, where
in the lowered program it comes from (state, map, iteration or tile), and for a buffer node its container
and version. A field that does not apply is ``None`` (``()`` for :attr:`TaskInfo.fused`).

The record is written to DAG files field by field (:meth:`TaskInfo.to_json`, only the fields that are
set) and read back by :meth:`TaskInfo.from_json`, which checks every field's type and refuses a field it
does not know, in one line naming the field. :data:`SCHEMA_VERSION` is the version of this layout; a DAG
file of version 1 (a free-form ``meta`` object per node) is converted once by :func:`from_meta`.
Counts are integers >= 0 or the text of an expression in the sizes, read by
:func:`~dcaccel.dag.expression.parse_expression` and never evaluated. Importing this module does not
import DaCe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import sympy

from dcaccel.dag.expression import MAX_CONSTANT, ExpressionError, parse_expression
from dcaccel.errors import DcaccelError

#: Version of the DAG file layout that :meth:`TaskInfo.to_json` writes (a file without one is version 1).
SCHEMA_VERSION = 2

#: Why an opaque task is one.
NO_CANONICAL = "no canonical implementation"

Count = int | sympy.Expr


class Role(StrEnum):
    """What a node does in the DAG."""

    COMPUTE = "compute"  # a task of a canonical implementation
    TRANSFER = "transfer"  # a task moving data between the host and an accelerator
    OPAQUE = "opaque"  # a task standing for an op without a canonical implementation
    BUFFER = "buffer"  # a container fully written before it is read
    PSEUDO = "pseudo"  # the pseudo source or sink


class TaskInfoError(DcaccelError):
    """A field of a task record has the wrong type or is unknown."""


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.isprintable():
        raise TaskInfoError("must be a string on one line")
    return value


def _natural(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TaskInfoError("must be an integer >= 0")
    return value


def _count(value: Any) -> Count:
    if isinstance(value, str):
        try:
            count = parse_expression(value)
        except ExpressionError as err:
            raise TaskInfoError(f"{_excerpt(value)}: {err}") from None
        if count.is_number and not (count.is_Integer and count >= 0) or count.is_negative:
            raise TaskInfoError(f"{_excerpt(value)} is {count}, not an integer >= 0")
        return int(count) if count.is_Integer else count
    if isinstance(value, sympy.Basic):
        return int(value) if value.is_Integer else value
    try:
        count = _natural(value)
    except TaskInfoError:
        raise TaskInfoError(f"must be an integer >= 0 or an expression, got {_excerpt(value)}") from None
    if count >= MAX_CONSTANT:  # as an edge volume and every constant of an expression
        raise TaskInfoError(f"is {count}, more than {MAX_CONSTANT - 1}")
    return count


def _role(value: Any) -> Role:
    if not isinstance(value, str) or value not in Role._value2member_map_:
        raise TaskInfoError(f"is {_excerpt(value)}, expected one of {', '.join(Role)}")
    return Role(value)


def _index(value: Any) -> tuple[tuple[str, int], ...]:
    pairs = value.items() if isinstance(value, Mapping) else value
    try:
        return tuple((_text(name), _integer(point)) for name, point in pairs)
    except (TypeError, ValueError, TaskInfoError):
        raise TaskInfoError("must be an object of parameter names to integers") from None


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TaskInfoError("must be an integer")
    return value


def _range(value: Any) -> tuple[int, int]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise TaskInfoError("must be a list of two integers (first iteration, end)")
    first, end = _natural(value[0]), _natural(value[1])
    if end < first:
        raise TaskInfoError(f"is [{first}, {end}]: the end is before the first iteration")
    return first, end


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise TaskInfoError("must be a list of node names")
    return tuple(_text(name) for name in value)


def _field(read: Callable[[Any], Any], doc: str, default: Any = None) -> Any:
    return field(default=default, metadata={"read": read, "doc": doc})


@dataclass(frozen=True)
class TaskInfo:
    """What a node of the task DAG is (see the module docstring); the defaults say "does not apply"."""

    role: Role = _field(_role, "compute, transfer, opaque, buffer or pseudo", Role.COMPUTE)
    reason: str | None = _field(_text, "why a buffer node is one (its mark), or why a task is opaque")
    op: str | None = _field(_text, "the ONNX op type the task lowers (Transfer for a transfer)")
    node: str | None = _field(_text, "the model node the task lowers")
    implementation: str | None = _field(_text, "the implementation the node was lowered with")
    fused: tuple[str, ...] = _field(_names, "the model nodes of a fused task, in program order", ())
    unit: str | None = _field(_text, "the unit kind a partition placed the node on")
    transfer: str | None = _field(_text, "a transfer's direction (to-accelerator, to-host)")
    macs: Count | None = _field(_count, "multiply-accumulates (dcaccel.dag.arithmetic)")
    ops: Count | None = _field(_count, "other arithmetic operations")
    elements: Count | None = _field(_count, "elements a transfer moves")
    iterations: Count | None = _field(_count, "iterations of the map the task runs")
    iteration: int | None = _field(_natural, "the iteration of its map a task is (fine granularity)")
    index: tuple[tuple[str, int], ...] | None = _field(_index, "that iteration's map parameters")
    tile: int | None = _field(_natural, "the tile of its map a task is (tiles granularity)")
    iteration_range: tuple[int, int] | None = _field(_range, "the iterations [first, end) of that tile")
    state: str | None = _field(_text, "the state of the lowered program holding the task")
    map: str | None = _field(_text, "the label of the map the task comes from")
    library_node: str | None = _field(_text, "the class of the library node the task comes from")
    guid: str | None = _field(_text, "the guid of the SDFG node the task comes from")
    container: str | None = _field(_text, "a buffer node's data container")
    container_version: int | None = _field(_natural, "which write of the container the buffer node holds")
    inserted_buffer: str | None = _field(_text, "why the extraction's contract repair made the buffer node")
    layer: int | None = _field(_natural, "the layer of a generated DAG's task")
    file_id: int | None = _field(_natural, "the node's id in the file it was read from, where it differs")

    @property
    def opaque(self) -> bool:
        """Whether the task stands for an op without a canonical implementation."""
        return self.role is Role.OPAQUE

    @property
    def is_transfer(self) -> bool:
        """Whether the task moves data between the host and an accelerator."""
        return self.role is Role.TRANSFER

    def derive(self, **changes: Any) -> TaskInfo:
        """A copy with ``changes`` (as :func:`dataclasses.replace`, unchecked: for the producers, which make
        one record per task of a map with millions of iterations)."""
        derived = object.__new__(TaskInfo)
        derived.__dict__.update(self.__dict__)
        derived.__dict__.update(changes)
        return derived

    def given(self) -> dict[str, Any]:
        """The fields that differ from their defaults, by name, in field order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) != f.default}

    def to_json(self) -> dict[str, Any]:
        """The fields that are set, as JSON values (expressions as text, the index as an object)."""
        data = {}
        for name, value in self.given().items():
            if name == "index":
                value = dict(value)
            elif isinstance(value, sympy.Basic):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            data[name] = value.value if isinstance(value, Role) else value
        return data

    @classmethod
    def from_json(cls, data: Any, default: TaskInfo | None = None) -> TaskInfo:
        """The record of ``data`` (an object of field names to JSON values) over ``default`` (the kind's
        record, :func:`info_of_kind`); raises :class:`TaskInfoError` naming the first bad or unknown field."""
        if not isinstance(data, Mapping):
            raise TaskInfoError("must be an object of task fields")
        values = {}
        for name, value in data.items():
            spec = _FIELDS.get(name)
            if spec is None:
                raise TaskInfoError(f"has an unknown field {_excerpt(name)} (known: {', '.join(_FIELDS)})")
            if value is None:
                continue
            try:
                values[name] = spec.metadata["read"](value)
            except TaskInfoError as err:
                raise TaskInfoError(f"field '{name}' {err}") from None
        return dataclasses.replace(default or cls(), **values)


_FIELDS = {f.name: f for f in dataclasses.fields(TaskInfo)}

#: The record of a node of each kind that says nothing else (what ``TaskDAG.add_node`` gives by default).
_BY_KIND = {
    "source": TaskInfo(role=Role.PSEUDO),
    "sink": TaskInfo(role=Role.PSEUDO),
    "task": TaskInfo(),
    "buffer": TaskInfo(role=Role.BUFFER),
}
#: The roles a node of each kind may have.
_ROLES = {
    "source": {Role.PSEUDO},
    "sink": {Role.PSEUDO},
    "task": {Role.COMPUTE, Role.TRANSFER, Role.OPAQUE},
    "buffer": {Role.BUFFER},
}


def info_of_kind(kind: str) -> TaskInfo:
    """The record of a node of ``kind`` (a ``NodeKind``) that says nothing but its role."""
    return _BY_KIND[kind]


def check_role(kind: str, info: TaskInfo) -> None:
    """Raise :class:`TaskInfoError` when a node of ``kind`` cannot have ``info``'s role."""
    if info.role not in _ROLES[kind]:
        expected = " or ".join(sorted(_ROLES[kind]))
        raise TaskInfoError(f"field 'role' is {info.role.value}, but a {kind} node's role is {expected}")


#: Version 1's ``meta`` keys that were renamed.
_RENAMED = {"version": "container_version", "node_type": "library_node"}
#: Version 1's ``meta`` keys that no field keeps (folded into others, or position only).
_DROPPED = frozenset({"opaque", "scope", "fused"})


def from_meta(kind: str, meta: Mapping[str, Any]) -> TaskInfo:
    """The record of a node of ``kind`` read from a version-1 file's ``meta`` object (converted once, at
    the reader): its role from the kind, ``opaque`` and ``transfer`` (a transfer task's direction), a
    tile's ``iterations`` ``[first, end]`` as :attr:`~TaskInfo.iteration_range`, ``version`` as
    :attr:`~TaskInfo.container_version`; keys no field holds are left out (version 1 had no schema).
    Every kept value is checked as in :meth:`TaskInfo.from_json`."""
    if not isinstance(meta, Mapping) or not all(isinstance(key, str) for key in meta):
        raise TaskInfoError("'meta' must be an object")
    data = {_RENAMED.get(key, key): value for key, value in meta.items() if key not in _DROPPED}
    data = {key: value for key, value in data.items() if key in _FIELDS}
    if kind == "task" and isinstance(data.get("iterations"), list):
        data["iteration_range"] = data.pop("iterations")
    if kind == "task" and meta.get("opaque"):
        data.setdefault("reason", NO_CANONICAL)
        data["role"] = Role.OPAQUE.value
    elif kind == "task" and "transfer" in meta:
        data["role"] = Role.TRANSFER.value
    else:
        data.pop("role", None)
    return TaskInfo.from_json(data, info_of_kind(kind))


def evaluated(info: TaskInfo, values: Mapping[str, int]) -> TaskInfo:
    """``info`` with its symbolic counts evaluated at ``values`` (symbols matched by name; itself when it
    has none); a count that evaluates to a negative or fractional number raises :class:`TaskInfoError`."""
    changes = {}
    for name in ("macs", "ops", "elements", "iterations"):
        count = getattr(info, name)
        if isinstance(count, sympy.Basic):
            value = count.xreplace({s: sympy.Integer(values[s.name]) for s in count.free_symbols if s.name in values})
            if value.is_number and not (value.is_Integer and value >= 0):
                raise TaskInfoError(f"field '{name}' {count} is {value} at these sizes, not an integer >= 0")
            changes[name] = int(value) if value.is_Integer else value
    return info.derive(**changes) if changes else info


def _excerpt(text: Any, limit: int = 60) -> str:
    """``text`` quoted on one line, cut to about ``limit`` characters."""
    quoted = repr(text) if isinstance(text, str) else repr(str(text))
    return quoted if len(quoted) <= limit else quoted[: limit - 4] + "...'"
