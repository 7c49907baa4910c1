"""The result file: points stored once each, settings checked, failures kept until their assignment
succeeds, and a sweep that is interrupted and resumed evaluates every assignment exactly once."""

import sqlite3
from contextlib import closing

import numpy as np
import pytest

from dcaccel.errors import DcaccelError
from dcaccel.exploration.executors import Failure
from dcaccel.exploration.points import ExplorationPoint, columns
from dcaccel.exploration.store import KEY, ResultStore, read_failures, read_points

SETTINGS = {"edge_volume": "exact", "partitioning": "relaxed", "cost_model": {"pe_area": 1.0}}
TIMING = [name for name in columns() if name.endswith("_seconds")]


def point(assignment: str = "Conv=mv", pes: int = 4, **changes) -> ExplorationPoint:
    """A point with distinct values in every column."""
    values = {
        "workload": "conv-seed",
        "assignment": assignment,
        "granularity": "task",
        "pes": pes,
        "scheduler": "streaming",
        "onchip_memory": 0,
        "makespan": 35_715,
        "lower_bound": 35_000,
        "speedup": 3.25,
        "utilisation": 0.8125,
        "work": 116_073,
        "depth": 35_000,
        "tasks": 12,
        "buffers": 5,
        "io_volume": 150_936,
        "offchip_io": 150_936,
        "onchip_io": 0,
        "streamed_io": 3_456,
        "num_blocks": 3,
        "area": 4.0,
        "power": 1.5e3,
        "lower_seconds": 0.25,
        "extract_seconds": 0.125,
        "schedule_seconds": 0.0625,
    }
    values.update(changes)
    return ExplorationPoint(**values)


def test_key_names_point_columns():
    assert set(KEY) <= set(columns())


@pytest.mark.parametrize("count", [0, 1, 3])
def test_points_round_trip(count, tmp_path):
    points = [point(pes=pes) for pes in (1, 16, 128)[:count]]
    with ResultStore(tmp_path / "r.sqlite", SETTINGS) as store:
        store.add(points)
        assert store.points("conv-seed", "task") == ({"Conv=mv": points} if points else {})
        assert store.points("conv-seed", "coarse") == {}
    assert [ExplorationPoint(**row) for row in read_points(tmp_path / "r.sqlite").to_dict("records")] == points


def test_numpy_scalars_are_stored_as_numbers(tmp_path):
    with ResultStore(tmp_path / "r.sqlite", SETTINGS) as store:
        store.add([point(makespan=np.int64(7), speedup=np.float64(0.5), pes=np.int32(2))])
        (stored,) = store.points("conv-seed", "task")["Conv=mv"]
    assert (stored.makespan, stored.speedup, stored.pes) == (7, 0.5, 2)
    assert type(stored.makespan) is int and type(stored.speedup) is float


def test_a_point_is_stored_once(tmp_path):
    with ResultStore(tmp_path / "r.sqlite", SETTINGS) as store:
        store.add([point()])
        store.add([point(makespan=1, lower_seconds=9.0), point(pes=8)])
    results = read_points(tmp_path / "r.sqlite")
    assert results[["pes", "makespan", "lower_seconds"]].values.tolist() == [[4, 35_715, 0.25], [8, 35_715, 0.25]]


def test_a_file_with_points_needs_resume(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path, SETTINGS) as store:
        store.add([point()])
    with pytest.raises(DcaccelError, match=r"r\.sqlite already holds 1 points: resume it"):
        ResultStore(path, SETTINGS)
    with ResultStore(path, SETTINGS, resume=True) as store:
        assert list(store.points("conv-seed", "task")) == ["Conv=mv"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"edge_volume": "reference"}, 'edge_volume="exact", this sweep has "reference"'),
        ({"cost_model": {"pe_area": 2.0}}, "cost_model="),
    ],
)
def test_resume_refuses_other_settings(changes, message, tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path, SETTINGS) as store:
        store.add([point()])
    with pytest.raises(DcaccelError, match=message):
        ResultStore(path, {**SETTINGS, **changes}, resume=True)


def test_a_file_that_is_not_sqlite_is_named(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_text("not a database " * 100)
    with pytest.raises(DcaccelError, match="notes.sqlite: not a dcaccel result file"):
        ResultStore(path, SETTINGS)


def test_reading_a_missing_file_is_named(tmp_path):
    with pytest.raises(DcaccelError, match="missing.sqlite: no such file"):
        read_points(tmp_path / "missing.sqlite")


def test_a_failure_is_kept_until_its_assignment_succeeds(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path, SETTINGS) as store:
        store.add_failure(Failure("Conv=op", "ValueError: first", "trace 1"))
        store.add_failure(Failure("Conv=op", "ValueError: second", "trace 2"))
        store.add_failure(Failure("Conv=lmv", "KilledWorker: lost", "trace 3"))
        assert [f.error for f in store.failures()] == ["KilledWorker: lost", "ValueError: second"]
        store.add([point("Conv=op")])
        assert store.failures() == [Failure("Conv=lmv", "KilledWorker: lost", "trace 3")]
    assert read_failures(path).to_dict("records") == [
        {"assignment": "Conv=lmv", "error": "KilledWorker: lost", "traceback": "trace 3"}
    ]


def test_columns_are_typed_from_the_point_fields(tmp_path):
    with ResultStore(tmp_path / "r.sqlite", SETTINGS):
        pass
    with closing(sqlite3.connect(tmp_path / "r.sqlite")) as connection:
        declared = {row[1]: row[2] for row in connection.execute("PRAGMA table_info(points)")}
    assert list(declared) == columns()
    assert (declared["assignment"], declared["pes"], declared["speedup"]) == ("TEXT", "INTEGER", "REAL")


class Interrupted(Exception):
    """Stands for the user stopping the sweep."""


@pytest.fixture
def counted(monkeypatch):
    """Counts the assignments ``Sweep.points`` evaluates, by their text."""
    from dcaccel.exploration.sweep import Sweep

    evaluated: list[str] = []
    original = Sweep.points

    def points(self, workload, assignment):
        evaluated.append(str(assignment))
        return original(self, workload, assignment)

    monkeypatch.setattr(Sweep, "points", points)
    return evaluated


@pytest.mark.parametrize("stop_after", [0, 1])
def test_interrupted_sweep_resumes_without_loss_or_repeat(stop_after, conv_seed, counted, monkeypatch, tmp_path):
    from dcaccel.exploration.sweep import explore

    shapes = {"Conv": ["op", "lmv", "op"]}
    options = {"pes": [2, 16], "scheduler": "list", "progress": False}
    path = tmp_path / "r.sqlite"
    original_add = ResultStore.add

    def add_then_stop(self, points):
        if len(counted) > stop_after:
            raise Interrupted
        original_add(self, points)

    monkeypatch.setattr(ResultStore, "add", add_then_stop)
    with pytest.raises(Interrupted):
        explore(conv_seed, shapes, results=path, **options)
    finished = read_points(path)
    assert len(finished) == 2 * stop_after
    monkeypatch.setattr(ResultStore, "add", original_add)

    counted.clear()
    resumed = explore(conv_seed, shapes, results=path, resume=True, **options)
    assert counted == ["Conv=op", "Conv=lmv"][stop_after:]
    assert resumed["assignment"].tolist() == ["Conv=op"] * 2 + ["Conv=lmv"] * 2
    stored = read_points(path)
    assert len(stored) == 4 and not stored.duplicated(list(KEY)).any()
    kept = resumed.merge(finished, on=list(KEY), suffixes=("", "_before"))
    assert len(kept) == len(finished)
    for name in TIMING:
        assert kept[name].tolist() == kept[f"{name}_before"].tolist()

    counted.clear()
    again = explore(conv_seed, shapes, results=path, resume=True, **options)
    assert counted == []
    assert again.equals(resumed)


def test_a_wider_grid_evaluates_only_the_missing_points(conv_seed, counted, tmp_path):
    from dcaccel.exploration.sweep import explore

    path = tmp_path / "r.sqlite"
    narrow = explore(conv_seed, {"Conv": ["op"]}, pes=[4], scheduler="list", results=path, progress=False)
    wide = explore(conv_seed, {"Conv": ["op"]}, pes=[4, 8], scheduler="list", results=path, resume=True, progress=False)
    assert counted == ["Conv=op", "Conv=op"]
    assert wide["pes"].tolist() == [4, 8]
    assert wide.iloc[:1].drop(columns=TIMING).equals(narrow.drop(columns=TIMING))
    assert read_points(path)["lower_seconds"].iloc[0] == narrow["lower_seconds"].iloc[0]


def test_sweep_settings_are_stored(conv_seed, tmp_path):
    from dcaccel.exploration.sweep import explore

    path = tmp_path / "r.sqlite"
    explore(conv_seed, {"Conv": ["op"]}, pes=[4], scheduler="list", results=path, progress=False)
    with pytest.raises(DcaccelError, match="partitioning"):
        explore(conv_seed, {"Conv": ["op"]}, pes=[4], partitioning="strict", results=path, resume=True, progress=False)
