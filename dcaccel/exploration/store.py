"""The result file of a sweep: an SQLite database that points stream into as their assignments finish.

Three tables, each derived from a dataclass or a mapping, never listed by hand:

- ``points``: one row per :class:`ExplorationPoint` (its fields are the columns), keyed by the
  design point (:data:`KEY`), so a point is stored at most once;
- ``failures``: the last :class:`Failure` of each assignment that has not succeeded since;
- ``settings``: the options of the sweep that are not part of a point's key (edge-volume rule,
  partitioning, cost model). A sweep resumes only a file written with the same settings.

Each finished assignment is committed in one transaction: an interrupted sweep loses no finished
point, and a resumed one skips every assignment whose points are all stored.
"""

import json
import os
import sqlite3
import typing
from collections.abc import Iterable, Mapping
from contextlib import closing
from dataclasses import astuple, fields
from pathlib import Path

import pandas as pd

from dcaccel.errors import DcaccelError
from dcaccel.exploration.executors import Failure
from dcaccel.exploration.points import ExplorationPoint, columns, to_frame

#: The columns that identify a design point.
KEY = ("workload", "assignment", "granularity", "pes", "scheduler", "onchip_memory")

_SQL_TYPES = {str: "TEXT", int: "INTEGER", float: "REAL"}


def _table(name: str, record: type, key: tuple[str, ...]) -> str:
    """``CREATE TABLE`` for the fields of the dataclass ``record`` with primary key ``key``."""
    hints = typing.get_type_hints(record)
    declared = ", ".join(f"{field.name} {_SQL_TYPES[hints[field.name]]} NOT NULL" for field in fields(record))
    return f"CREATE TABLE IF NOT EXISTS {name} ({declared}, PRIMARY KEY ({', '.join(key)}))"


def _row(record) -> tuple:
    """The fields of ``record`` as Python scalars of their declared types (numpy scalars would be
    stored as blobs)."""
    hints = typing.get_type_hints(type(record))
    return tuple(hints[field.name](value) for field, value in zip(fields(record), astuple(record), strict=True))


class ResultStore:
    """An open result file. ``resume=False`` refuses a file that already holds points; ``resume=True``
    continues it after checking that it was written with the same ``settings``."""

    def __init__(self, path: str | os.PathLike, settings: Mapping[str, object], resume: bool = False):
        self.path = Path(path)
        try:
            self.connection = sqlite3.connect(self.path)
            with self.connection:
                self.connection.execute(_table("points", ExplorationPoint, KEY))
                self.connection.execute(_table("failures", Failure, ("assignment",)))
                self.connection.execute("CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT)")
        except sqlite3.DatabaseError as err:
            raise DcaccelError(f"results file {self.path}: not a dcaccel result file ({err})") from None
        self._check_settings({name: json.dumps(value, sort_keys=True) for name, value in settings.items()}, resume)

    def _check_settings(self, settings: dict[str, str], resume: bool) -> None:
        stored = dict(self.connection.execute("SELECT name, value FROM settings"))
        count = self.connection.execute("SELECT COUNT(*) FROM points").fetchone()[0]
        if count and not resume:
            self.close()
            raise DcaccelError(
                f"results file {self.path} already holds {count} points: resume it (--resume) or remove it"
            )
        changed = [name for name in settings if name in stored and stored[name] != settings[name]]
        if changed:
            self.close()
            name = changed[0]
            raise DcaccelError(
                f"results file {self.path} was written with {name}={stored[name]}, this sweep has {settings[name]}"
            )
        with self.connection:
            self.connection.executemany("INSERT OR REPLACE INTO settings VALUES (?, ?)", settings.items())

    def points(self, workload: str, granularity: str) -> dict[str, list[ExplorationPoint]]:
        """The stored points of ``workload`` at ``granularity``, by assignment."""
        names = ", ".join(columns())
        rows = self.connection.execute(
            f"SELECT {names} FROM points WHERE workload = ? AND granularity = ?", (workload, granularity)
        )
        found: dict[str, list[ExplorationPoint]] = {}
        for row in rows:
            point = ExplorationPoint(*row)
            found.setdefault(point.assignment, []).append(point)
        return found

    def add(self, points: Iterable[ExplorationPoint]) -> None:
        """Store the points of one finished assignment in one transaction (points already stored are
        kept) and forget the assignment's failure."""
        points = list(points)
        if not points:
            return
        marks = ", ".join("?" * len(columns()))
        with self.connection:
            self.connection.executemany(f"INSERT OR IGNORE INTO points VALUES ({marks})", map(_row, points))
            self.connection.execute("DELETE FROM failures WHERE assignment = ?", (points[0].assignment,))

    def add_failure(self, failure: Failure) -> None:
        """Record the failure of an assignment (replacing an earlier one)."""
        marks = ", ".join("?" * len(fields(Failure)))
        with self.connection:
            self.connection.execute(f"INSERT OR REPLACE INTO failures VALUES ({marks})", _row(failure))

    def failures(self) -> list[Failure]:
        """The recorded failures, by assignment."""
        names = ", ".join(field.name for field in fields(Failure))
        return [Failure(*row) for row in self.connection.execute(f"SELECT {names} FROM failures ORDER BY assignment")]

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_points(path: str | os.PathLike) -> pd.DataFrame:
    """Every point of the result file at ``path`` as a DataFrame (columns: the point fields), in key order."""
    with closing(_connect_existing(path)) as connection:
        names = ", ".join(columns())
        rows = connection.execute(f"SELECT {names} FROM points ORDER BY {', '.join(KEY)}").fetchall()
    return to_frame([ExplorationPoint(*row) for row in rows])


def read_failures(path: str | os.PathLike) -> pd.DataFrame:
    """The failures recorded in the result file at ``path`` (columns: the fields of :class:`Failure`)."""
    names = [field.name for field in fields(Failure)]
    with closing(_connect_existing(path)) as connection:
        rows = connection.execute(f"SELECT {', '.join(names)} FROM failures ORDER BY assignment").fetchall()
    return pd.DataFrame(rows, columns=names)


def _connect_existing(path: str | os.PathLike) -> sqlite3.Connection:
    """A connection to the result file at ``path``, which must exist."""
    if not Path(path).is_file():
        raise DcaccelError(f"results file {path}: no such file")
    return sqlite3.connect(path)
