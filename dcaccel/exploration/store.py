"""The result file of a sweep: an SQLite database that points stream into as their assignments finish.

Four tables, each derived from a dataclass or a mapping, never listed by hand:

- ``points``: one row per :class:`ExplorationPoint` (its fields are the columns), keyed by the
  design point (:data:`KEY`), so a point is stored at most once;
- ``mappings``: the mapping strategy's rows, one :class:`~dcaccel.exploration.mapping.MappedLayer` per
  layer, architecture and on-chip size;
- ``failures``: the last :class:`Failure` of each assignment that has not succeeded since;
- ``settings``: what the numbers depend on that is not part of a point's key: the sweep's options
  (edge-volume rule, partitioning, cost model), the description behind each ``architecture`` label
  and each workload's fingerprint (its program and
  sizes, see :func:`dcaccel.exploration.load.fingerprint`). A sweep resumes only a file written
  with the same settings. A setting, once written, is never replaced: a label names the description
  it was first written with for the life of the file, so two descriptions never share stored points.
  Beside them, the setting ``study`` holds the YAML of the :class:`~dcaccel.exploration.study.Study` that
  wrote the file last (:func:`read_study`; ``dcaccel run --resume FILE`` continues it).

Opening a store checks the file and its settings and writes the settings it lacks in one transaction
that holds SQLite's write lock from its start (``BEGIN IMMEDIATE``): of two sweeps opening one file at
once, the second checks what the first wrote. A refusal names the first field that differs (the
description of ``architecture eyeriss``: ``memories.dram.bandwidth_bytes_per_cycle``).

Each finished assignment is committed in one transaction: an interrupted sweep loses no finished
point, and a resumed one skips every assignment whose points are all stored.

A result file is a file users share, so it is checked, never trusted: SQLite's ``application_id``
marks it as dcaccel's and ``user_version`` holds :data:`SCHEMA_VERSION`; its tables must have the
expected columns and pass SQLite's ``quick_check``; every point read back must have the types of
its fields and be consistent (:func:`dcaccel.exploration.points.inconsistency`). Anything else is
a one-line :class:`DcaccelError` naming the file.
"""

import json
import os
import sqlite3
import typing
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import astuple, fields
from pathlib import Path

import pandas as pd

from dcaccel.errors import DcaccelError
from dcaccel.exploration.executors import Failure
from dcaccel.exploration.mapping import MappedLayer
from dcaccel.exploration.points import ExplorationPoint, columns, inconsistency, to_frame, typed

#: The columns that identify a design point.
KEY = ("workload", "assignment", "granularity", "pes", "scheduler", "architecture", "onchip_memory", "partition_policy")

#: The largest integer a result file holds (SQLite's INTEGER is 64-bit signed).
MAX_INTEGER = 2**63 - 1

#: The file name suffixes of a result file.
SUFFIXES = (".sqlite", ".sqlite3", ".db")

#: SQLite ``application_id`` of a dcaccel result file ("dcac").
APPLICATION_ID = 0x64636163

#: Version of the tables' layout, SQLite's ``user_version`` (files of dcaccel before it have none).
#: 3: the opaque_tasks and opaque_work_share columns; 4: the architecture columns; 5: the architecture in the key;
#: 6: the partition columns, the policy in the key; 7: the mapping strategy's table; 8: the learned_seconds column
SCHEMA_VERSION = 8

#: The setting holding the YAML text of the study that wrote the file (:meth:`ResultStore.record_study`).
STUDY = "study"

_SQL_TYPES = {str: "TEXT", int: "INTEGER", float: "REAL"}

#: What an SQLite error (by its ``sqlite_errorname``) says about a result file.
_SQLITE_ERRORS = {"SQLITE_NOTADB": "not a dcaccel result file", "SQLITE_CORRUPT": "damaged"}


def _declared(record: type) -> list[tuple[str, str]]:
    """(column, SQL type) of each field of the dataclass ``record``."""
    hints = typing.get_type_hints(record)
    return [(field.name, _SQL_TYPES[hints[field.name]]) for field in fields(record)]


#: The columns of each table, in order.
TABLES = {
    "points": (_declared(ExplorationPoint), KEY),
    "mappings": (_declared(MappedLayer), ("workload", "layer", "architecture", "onchip_memory")),
    "failures": (_declared(Failure), ("assignment",)),
    "settings": ([("name", "TEXT"), ("value", "TEXT")], ("name",)),
}


#: The tables of the files dcaccel wrote before it had a schema version.
TABLES_BEFORE_VERSIONS = ("points", "failures", "settings")


def _create(name: str) -> str:
    """``CREATE TABLE`` of the table ``name`` of :data:`TABLES`."""
    declared, key = TABLES[name]
    columns_sql = ", ".join(f"{column} {kind} NOT NULL" for column, kind in declared)
    return f"CREATE TABLE {name} ({columns_sql}, PRIMARY KEY ({', '.join(key)}))"


def _row(record) -> tuple:
    """The fields of ``record`` as Python scalars of their declared types (numpy scalars would be
    stored as blobs)."""
    hints = typing.get_type_hints(type(record))
    return tuple(hints[field.name](value) for field, value in zip(fields(record), astuple(record), strict=True))


@contextmanager
def _sqlite_errors(path: Path) -> Iterator[None]:
    """Turn an SQLite error on the result file ``path`` into a one-line :class:`DcaccelError`."""
    try:
        yield
    except (sqlite3.Error, OverflowError) as err:  # OverflowError: an integer past SQLite's 64 bits
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        what = _SQLITE_ERRORS.get(getattr(err, "sqlite_errorname", ""), "cannot be used")
        raise DcaccelError(f"results file {path}: {what} ({reason})") from None


def _check_file(connection: sqlite3.Connection, path: Path, create: bool) -> None:
    """Check that ``connection`` is to an undamaged dcaccel result file of this schema; an empty file is
    given the tables when ``create`` (in the caller's transaction), else refused. Raises
    :class:`DcaccelError` naming ``path``."""
    damage = [line for (text,) in connection.execute("PRAGMA quick_check") for line in text.splitlines()]
    if damage != ["ok"]:
        details = [line for line in damage if not line.startswith("***")]
        raise DcaccelError(f"results file {path}: damaged ({details[0] if details else damage[0]})")
    tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    application = connection.execute("PRAGMA application_id").fetchone()[0]
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if not tables and not application and create:
        for name in TABLES:
            connection.execute(_create(name))
        connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return
    if application != APPLICATION_ID:
        if set(TABLES_BEFORE_VERSIONS) <= tables:
            raise DcaccelError(
                f"results file {path}: written by an older dcaccel (no schema version; this one reads "
                f"version {SCHEMA_VERSION}): remove it or use another file"
            )
        found = ", ".join(sorted(tables)) or "none"
        raise DcaccelError(f"results file {path}: not a dcaccel result file (tables: {found})")
    if version != SCHEMA_VERSION:
        raise DcaccelError(
            f"results file {path}: result file schema version {version}, this dcaccel reads {SCHEMA_VERSION}: "
            "remove it or use another file"
        )
    for name, (declared, _) in TABLES.items():
        found = [(row[1], row[2]) for row in connection.execute(f"PRAGMA table_info({name})")]
        if found != declared:
            raise DcaccelError(f"results file {path}: damaged (table {name} lacks the columns of schema {version})")


def _point(path: Path, row: tuple) -> ExplorationPoint:
    """The point stored as ``row``, checked (:func:`typed`, :func:`inconsistency`)."""
    where = ", ".join(str(row[columns().index(name)]) for name in KEY)
    try:
        point = typed(row)
    except ValueError as err:
        raise DcaccelError(f"results file {path}: point ({where}): {err}") from None
    problem = inconsistency(point)
    if problem is not None:
        raise DcaccelError(f"results file {path}: point ({where}): {problem}")
    return point


def _failure(path: Path, row: tuple) -> Failure:
    """The failure stored as ``row``, whose fields must all be strings."""
    if not all(isinstance(value, str) for value in row):
        raise DcaccelError(f"results file {path}: failure of {row[0]!r}: not a text record")
    return Failure(*row)


@contextmanager
def _immediate(connection: sqlite3.Connection) -> Iterator[None]:
    """One transaction on ``connection`` that holds SQLite's write lock from its start (``BEGIN
    IMMEDIATE``), so that nothing it reads changes before it writes; committed unless it raises."""
    connection.execute("BEGIN IMMEDIATE")
    with connection:
        yield


#: A mapping's key that one of two compared values lacks (:func:`_difference`).
_ABSENT = object()


def _difference(before: object, now: object, path: tuple[str | int, ...] = ()) -> tuple[str, object, object] | None:
    """The first field (keys in sorted order, list items in order) where the JSON values ``before`` and
    ``now`` differ, found below ``path``: (its path as :func:`_field` writes it, its value in ``before``,
    in ``now``); None when they are equal, types included."""
    if isinstance(before, dict) and isinstance(now, dict):
        for key in sorted(before.keys() | now.keys()):
            found = _difference(before.get(key, _ABSENT), now.get(key, _ABSENT), (*path, key))
            if found is not None:
                return found
        return None
    if isinstance(before, list) and isinstance(now, list):
        for index, (item_before, item_now) in enumerate(zip(before, now, strict=False)):
            found = _difference(item_before, item_now, (*path, index))
            if found is not None:
                return found
        return None if len(before) == len(now) else (_field(path), before, now)
    return None if type(before) is type(now) and before == now else (_field(path), before, now)


def _field(path: tuple[str | int, ...]) -> str:
    """A path into a JSON value as a refusal names it: ``memories.dram.bandwidth``, ``links[2].latency``."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).removeprefix(".")


def _shown(value: object) -> str:
    """A JSON value as a refusal shows it: a scalar as JSON, a mapping or list by its size."""
    if value is _ABSENT:
        return "absent"
    if isinstance(value, dict):
        return f"a mapping of size {len(value)}"
    if isinstance(value, list):
        return f"a list of length {len(value)}"
    return json.dumps(value)


class ResultStore:
    """An open result file. ``resume=False`` refuses a file that already holds points; ``resume=True``
    continues it after checking that it was written with the same ``settings``."""

    def __init__(self, path: str | os.PathLike, settings: Mapping[str, object], resume: bool = False):
        self.path = Path(path)
        with _sqlite_errors(self.path):
            self.connection = sqlite3.connect(self.path)
        try:
            with _sqlite_errors(self.path), _immediate(self.connection):
                _check_file(self.connection, self.path, create=True)
                self._check_settings(settings, resume)
        except BaseException:
            self.connection.close()
            raise

    def _check_settings(self, settings: Mapping[str, object], resume: bool) -> None:
        """Refuse other settings than the stored ones, or stored points without ``resume``; then store the
        settings the file lacks (in the caller's transaction)."""
        stored = dict(self.connection.execute("SELECT name, value FROM settings"))
        for name, value in settings.items():
            if name in stored:
                self._check_setting(name, stored[name], value)
        count = self.connection.execute("SELECT COUNT(*) FROM points").fetchone()[0]
        if count and not resume:
            raise DcaccelError(
                f"results file {self.path} already holds {count} points: resume it (--resume) or remove it"
            )
        new = [(name, json.dumps(value, sort_keys=True)) for name, value in settings.items() if name not in stored]
        self.connection.executemany("INSERT INTO settings VALUES (?, ?)", new)

    def _check_setting(self, name: str, stored: str, value: object) -> None:
        """Refuse ``value`` for the setting ``name`` unless it equals the ``stored`` one (JSON text), in one
        line naming the first field that differs."""
        encoded = json.dumps(value, sort_keys=True)
        if stored == encoded:
            return
        try:
            written = json.loads(stored)
        except ValueError:
            raise DcaccelError(f"results file {self.path}: damaged (setting {name!r} is not JSON)") from None
        difference = _difference(written, json.loads(encoded))
        if difference is None:
            return
        field, before, now = difference
        what = f"{name} whose {field} is" if field else name
        raise DcaccelError(
            f"results file {self.path} was written with {what} {_shown(before)}, this sweep's is {_shown(now)}"
        )

    def record_study(self, text: str) -> None:
        """Record the YAML ``text`` of the study that writes the file (the last one, when a resumed study
        differs from the first in what the settings allow: more architectures, another executor)."""
        with _sqlite_errors(self.path), self.connection:
            self.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (STUDY, json.dumps(text)))

    def points(self, workload: str, granularity: str) -> dict[str, list[ExplorationPoint]]:
        """The stored points of ``workload`` at ``granularity``, by assignment (each checked)."""
        names = ", ".join(columns())
        found: dict[str, list[ExplorationPoint]] = {}
        with _sqlite_errors(self.path):
            rows = self.connection.execute(
                f"SELECT {names} FROM points WHERE workload = ? AND granularity = ?", (workload, granularity)
            ).fetchall()
        for row in rows:
            point = _point(self.path, row)
            found.setdefault(point.assignment, []).append(point)
        return found

    def mapped(self, workload: str) -> dict[str, list[MappedLayer]]:
        """The stored rows of the mapping strategy on ``workload``, by the layer's unit of work (each checked)."""
        names = ", ".join(field.name for field in fields(MappedLayer))
        with _sqlite_errors(self.path):
            rows = self.connection.execute(f"SELECT {names} FROM mappings WHERE workload = ?", (workload,)).fetchall()
        found: dict[str, list[MappedLayer]] = {}
        for row in rows:
            try:
                mapped = typed(row, MappedLayer)
            except ValueError as err:
                raise DcaccelError(f"results file {self.path}: mapping of {row[1]!r}: {err}") from None
            found.setdefault(mapped.assignment, []).append(mapped)
        return found

    def add(self, points: Iterable[ExplorationPoint | MappedLayer]) -> None:
        """Store the points (or the mapping strategy's rows) of one finished assignment in one transaction
        (rows already stored are kept) and forget the assignment's failure."""
        points = list(points)
        if not points:
            return
        table = "mappings" if isinstance(points[0], MappedLayer) else "points"
        marks = ", ".join("?" * len(TABLES[table][0]))
        with _sqlite_errors(self.path), self.connection:
            self.connection.executemany(f"INSERT OR IGNORE INTO {table} VALUES ({marks})", map(_row, points))
            self.connection.execute("DELETE FROM failures WHERE assignment = ?", (points[0].assignment,))

    def add_failure(self, failure: Failure) -> None:
        """Record the failure of an assignment (replacing an earlier one)."""
        marks = ", ".join("?" * len(fields(Failure)))
        with _sqlite_errors(self.path), self.connection:
            self.connection.execute(f"INSERT OR REPLACE INTO failures VALUES ({marks})", _row(failure))

    def failures(self) -> list[Failure]:
        """The recorded failures, by assignment."""
        names = ", ".join(field.name for field in fields(Failure))
        with _sqlite_errors(self.path):
            rows = self.connection.execute(f"SELECT {names} FROM failures ORDER BY assignment").fetchall()
        return [_failure(self.path, row) for row in rows]

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_points(path: str | os.PathLike) -> pd.DataFrame:
    """Every point of the result file at ``path`` as a DataFrame (columns: the point fields), in key
    order, each checked."""
    path = Path(path)
    names = ", ".join(columns())
    with _reading(path) as connection:
        rows = connection.execute(f"SELECT {names} FROM points ORDER BY {', '.join(KEY)}").fetchall()
    return to_frame([_point(path, row) for row in rows])


def read_failures(path: str | os.PathLike) -> pd.DataFrame:
    """The failures recorded in the result file at ``path`` (columns: the fields of :class:`Failure`)."""
    path = Path(path)
    names = [field.name for field in fields(Failure)]
    with _reading(path) as connection:
        rows = connection.execute(f"SELECT {', '.join(names)} FROM failures ORDER BY assignment").fetchall()
    return pd.DataFrame([astuple(_failure(path, row)) for row in rows], columns=names)


def read_study(path: str | os.PathLike) -> str:
    """The YAML text of the study recorded in the result file at ``path``."""
    path = Path(path)
    with _reading(path) as connection:
        row = connection.execute("SELECT value FROM settings WHERE name = ?", (STUDY,)).fetchone()
    try:
        text = None if row is None else json.loads(row[0])
    except ValueError:
        text = None
    if not isinstance(text, str):
        raise DcaccelError(f"results file {path}: no study recorded (written by dcaccel explore before studies)")
    return text


@contextmanager
def _reading(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the checked result file at ``path``, which must exist."""
    if not path.is_file():
        raise DcaccelError(f"results file {path}: no such file")
    with _sqlite_errors(path), closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as connection:
        _check_file(connection, path, create=False)
        yield connection
