"""The result file: points stored once each, settings and the workload's fingerprint checked,
damaged, foreign or hand-edited files refused in one line, failures kept until their assignment
succeeds, and a sweep that is interrupted and resumed evaluates every assignment exactly once."""

import dataclasses
import json
import multiprocessing
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, suppress

import numpy as np
import pytest

from dcaccel.errors import DcaccelError
from dcaccel.exploration.executors import Failure
from dcaccel.exploration.points import ExplorationPoint, columns
from dcaccel.exploration.store import KEY, SCHEMA_VERSION, ResultStore, read_failures, read_points

SETTINGS = {"edge_volume": "exact", "partitioning": "relaxed", "cost_model": {"pe_area": 1.0}}
TIMING = [name for name in columns() if name.endswith("_seconds")]


def point(assignment: str = "Conv=mv", pes: int = 4, **changes) -> ExplorationPoint:
    """A consistent point with distinct values in every column (speedup and utilisation derived from
    work, makespan and P unless given)."""
    values = {
        "workload": "conv-seed",
        "assignment": assignment,
        "granularity": "task",
        "pes": pes,
        "scheduler": "streaming",
        "onchip_memory": 0,
        "architecture": "abstract",
        "makespan": 35_715,
        "lower_bound": 35_000,
        "work": 30_073,
        "depth": 35_000,
        "tasks": 12,
        "buffers": 5,
        "opaque_tasks": 0,
        "opaque_work_share": 0.0,
        "io_volume": 150_936,
        "offchip_io": 150_936,
        "onchip_io": 0,
        "streamed_io": 3_456,
        "num_blocks": 3,
        "area": 4.0,
        "power": 1.5e3,
        "makespan_cycles": 35_716,
        "makespan_us": 35.716,
        "macs": 21_600,
        "offchip_bytes": 603_744,
        "energy_pj": 15.5,
        "offchip_energy_pj": 8.0,
        "onchip_energy_pj": 4.0,
        "local_energy_pj": 2.0,
        "link_energy_pj": 1.0,
        "compute_energy_pj": 0.5,
        "area_mm2": 2.5,
        "power_w": 0.75,
        "unit_utilisation": "pe=0.25",
        "partition_policy": "none",
        "offloaded_work_share": 1.0,
        "transfer_volume": 0,
        "host_energy_pj": 0.0,
        "accelerator_energy_pj": 15.5,
        "transfer_energy_pj": 0.0,
        "lower_seconds": 0.25,
        "extract_seconds": 0.125,
        "schedule_seconds": 0.0625,
    }
    values.update(changes)
    values.setdefault("speedup", values["work"] / values["makespan"])
    values.setdefault("utilisation", values["speedup"] / values["pes"])
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
        store.add([point(makespan=np.int64(40_000), area=np.float64(0.5), pes=np.int32(2))])
        (stored,) = store.points("conv-seed", "task")["Conv=mv"]
    assert (stored.makespan, stored.area, stored.pes) == (40_000, 0.5, 2)
    assert type(stored.makespan) is int and type(stored.area) is float


def test_a_point_is_stored_once(tmp_path):
    with ResultStore(tmp_path / "r.sqlite", SETTINGS) as store:
        store.add([point()])
        store.add([point(makespan=40_000, lower_seconds=9.0), point(pes=8)])
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
        ({"edge_volume": "reference"}, 'edge_volume "exact", this sweep\'s is "reference"'),
        ({"cost_model": {"pe_area": 2.0}}, "cost_model whose pe_area is 1.0, this sweep's is 2.0"),
        ({"cost_model": {"pe_area": 1}}, "cost_model whose pe_area is 1.0, this sweep's is 1"),
        ({"cost_model": {"pe_area": 1.0, "pe_power": 2.0}}, "cost_model whose pe_power is absent, this sweep's is 2.0"),
        ({"cost_model": {}}, "cost_model whose pe_area is 1.0, this sweep's is absent"),
        ({"cost_model": {"pe_area": [1.0]}}, "cost_model whose pe_area is 1.0, this sweep's is a list of length 1"),
        ({"partitioning": {"mode": "relaxed"}}, 'partitioning "relaxed", this sweep\'s is a mapping of size 1'),
    ],
)
def test_resume_refuses_other_settings(changes, message, tmp_path):
    """The refusal is one line naming the setting and the first field of it that differs."""
    path = tmp_path / "r.sqlite"
    with ResultStore(path, SETTINGS) as store:
        store.add([point()])
    with pytest.raises(DcaccelError) as raised:
        ResultStore(path, {**SETTINGS, **changes}, resume=True)
    assert str(raised.value) == f"results file {path} was written with {message}"


@pytest.mark.parametrize(
    ("before", "now", "message"),
    [
        ([{"a": 1}, {"b": [2, 3]}], [{"a": 1}, {"b": [2, 4]}], "links whose [1].b[1] is 3, this sweep's is 4"),
        ([1, 2], [1, 2, 3], "links a list of length 2, this sweep's is a list of length 3"),
        ({"x": {"y": True}}, {"x": {"y": 1}}, "links whose x.y is true, this sweep's is 1"),
        ({"x": None}, {"x": "text"}, 'links whose x is null, this sweep\'s is "text"'),
    ],
    ids=["nested-list", "longer-list", "bool-int", "null"],
)
def test_the_refusal_names_the_first_field_that_differs(before, now, message, tmp_path):
    path = tmp_path / "r.sqlite"
    ResultStore(path, {"links": before}).close()
    with pytest.raises(DcaccelError) as raised:
        ResultStore(path, {"links": now})
    assert str(raised.value) == f"results file {path} was written with {message}"


def test_a_setting_is_never_replaced(tmp_path):
    """A new setting is added to the file, a stored one stays as it was first written."""
    path = tmp_path / "r.sqlite"
    ResultStore(path, SETTINGS).close()
    ResultStore(path, {"architecture tpu": {"clock_mhz": 1000.0}}).close()
    with pytest.raises(DcaccelError, match="architecture tpu whose clock_mhz is 1000.0, this sweep's is 100.0"):
        ResultStore(path, {**SETTINGS, "architecture tpu": {"clock_mhz": 100.0}})
    with closing(sqlite3.connect(path)) as connection:
        stored = dict(connection.execute("SELECT name, value FROM settings"))
    assert {name: json.loads(value) for name, value in stored.items()} == {
        **SETTINGS,
        "architecture tpu": {"clock_mhz": 1000.0},
    }


def test_a_damaged_setting_is_named(tmp_path):
    path = tmp_path / "r.sqlite"
    ResultStore(path, SETTINGS).close()
    _execute(path, "UPDATE settings SET value = '{oops' WHERE name = 'cost_model'")
    with pytest.raises(DcaccelError) as raised:
        ResultStore(path, SETTINGS)
    assert str(raised.value) == f"results file {path}: damaged (setting 'cost_model' is not JSON)"


#: The cycles of a point on an ``eyeriss`` whose DRAM moves 16 or 1 bytes per cycle.
CYCLES = {16: 13_512, 1: 173_886}


def _eyeriss(bandwidth: int) -> dict:
    """The settings of a sweep on an architecture labelled ``eyeriss`` whose DRAM moves ``bandwidth``
    bytes per cycle."""
    return {**SETTINGS, "architecture eyeriss": {"name": "eyeriss", "memories": {"dram": {"bandwidth": bandwidth}}}}


def _meet_before_writing_settings(patch: pytest.MonkeyPatch, barrier: threading.Barrier) -> None:
    """Make each result store opened meanwhile wait at ``barrier`` before it first writes the settings:
    two stores opened at once both check the settings before either writes them, unless checking and
    writing are one transaction (then the second waits for the first to commit, and the barrier times
    out)."""
    connect = sqlite3.connect

    def connecting(*args, **kwargs):
        connection = connect(*args, **kwargs)
        first = True

        def wait(statement: str) -> None:
            nonlocal first
            if first and "INTO settings" in statement:
                first = False
                with suppress(threading.BrokenBarrierError):
                    barrier.wait()

        connection.set_trace_callback(wait)
        return connection

    patch.setattr(sqlite3, "connect", connecting)


@pytest.fixture
def coinciding(monkeypatch):
    """The barrier (two parties, 0.15 s) at which the result stores opened meanwhile meet before they
    write their settings."""
    barrier = threading.Barrier(2, timeout=0.15)
    _meet_before_writing_settings(monkeypatch, barrier)
    return barrier


def test_concurrent_sweeps_of_one_label_never_share_points(coinciding, tmp_path):
    """Two sweeps on one file whose ``eyeriss`` differs in its DRAM bandwidth, opened at the same moment
    (on a new file, or one whose tables are made): one is refused naming the field, and the file holds
    only the points of the description it names."""

    def sweep(path, bandwidth: int) -> str | None:
        try:
            with ResultStore(path, _eyeriss(bandwidth)) as store:
                store.add(
                    [point(architecture="eyeriss", pes=pes, makespan_cycles=CYCLES[bandwidth]) for pes in (1, 16)]
                )
        except DcaccelError as err:
            return str(err)
        return None

    for round in range(10):
        path = tmp_path / f"r{round}.sqlite"
        if round % 2:  # the tables already made: both sweeps read the settings at once
            ResultStore(path, {}).close()
        coinciding.reset()
        with ThreadPoolExecutor(2) as pool:
            refusals = dict(zip((16, 1), pool.map(sweep, [path, path], (16, 1)), strict=True))
        (winner,) = [bandwidth for bandwidth, refusal in refusals.items() if refusal is None]
        loser = 17 - winner
        assert refusals[loser] == (
            f"results file {path} was written with architecture eyeriss whose memories.dram.bandwidth is {winner}, "
            f"this sweep's is {loser}"
        )
        with closing(sqlite3.connect(path)) as connection:
            (stored,) = connection.execute("SELECT value FROM settings WHERE name = 'architecture eyeriss'").fetchone()
        assert json.loads(stored)["memories"]["dram"]["bandwidth"] == winner
        assert read_points(path)["makespan_cycles"].tolist() == [CYCLES[winner]] * 2


def _eyeriss_architecture(bandwidth: float):
    """The shipped ``eyeriss`` whose DRAM moves ``bandwidth`` bytes per cycle, labelled ``eyeriss``."""
    from dcaccel.architecture import Architecture, load

    data = load("eyeriss").to_dict()
    data["memories"]["dram"]["bandwidth_bytes_per_cycle"] = bandwidth
    return Architecture.from_dict(data, "eyeriss")


@pytest.mark.slow
def test_concurrent_sweep_processes_never_resume_another_design(conv_seed, counted, tmp_path):
    """Two ``explore`` processes on one file, on an ``eyeriss`` with 16 or 1 B/cycle of DRAM, meeting
    before they write their settings: one is refused naming the field, and resuming the file returns
    the numbers of a fresh sweep of the design it names, evaluating nothing."""
    from dcaccel.exploration.sweep import explore

    context = multiprocessing.get_context("fork")
    options = {"pes": [16], "scheduler": "list", "progress": False}
    shapes = {"Conv": ["mv", "op", "lmv"]}
    fresh = {
        bandwidth: explore(conv_seed, shapes, arch=_eyeriss_architecture(bandwidth), **options).drop(columns=TIMING)
        for bandwidth in (16, 1)
    }
    best = {bandwidth: frame.loc[frame["makespan_cycles"].idxmin(), "assignment"] for bandwidth, frame in fresh.items()}
    assert best == {16: "Conv=mv", 1: "Conv=op"}

    def sweep(path, bandwidth: float, outcomes) -> None:
        try:
            explore(conv_seed, shapes, arch=_eyeriss_architecture(bandwidth), results=path, **options)
        except DcaccelError as err:
            outcomes.put((bandwidth, str(err)))
        else:
            outcomes.put((bandwidth, None))

    for round in range(3):
        path = tmp_path / f"r{round}.sqlite"
        outcomes = context.Queue()
        with pytest.MonkeyPatch.context() as patch:
            _meet_before_writing_settings(patch, context.Barrier(2, timeout=2.0))
            processes = [context.Process(target=sweep, args=(path, bandwidth, outcomes)) for bandwidth in (16, 1)]
            for process in processes:
                process.start()
            refusals = dict(outcomes.get(timeout=300) for _ in processes)
            for process in processes:
                process.join()
        (winner,) = [bandwidth for bandwidth, refusal in refusals.items() if refusal is None]
        loser = 17 - winner
        assert refusals[loser] == (
            f"results file {path} was written with architecture eyeriss whose "
            f"memories.dram.bandwidth_bytes_per_cycle is {float(winner)}, this sweep's is {float(loser)}"
        )
        stored = read_points(path).drop(columns=TIMING)
        assert stored.equals(fresh[winner].sort_values(list(KEY)).reset_index(drop=True))
        counted.clear()
        resumed = explore(conv_seed, shapes, arch=_eyeriss_architecture(winner), results=path, resume=True, **options)
        assert counted == [] and resumed.drop(columns=TIMING).equals(fresh[winner])
        with pytest.raises(DcaccelError, match="memories.dram.bandwidth_bytes_per_cycle"):
            explore(conv_seed, shapes, arch=_eyeriss_architecture(loser), results=path, resume=True, **options)


def _stored(path) -> None:
    """A result file at ``path`` with three points and a failure."""
    with ResultStore(path, SETTINGS) as store:
        store.add([point(pes=pes) for pes in (1, 16, 128)])
        store.add_failure(Failure("Conv=op", "ValueError: no", "trace"))


def _patch(path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write(data)


def _execute(path, *statements: str) -> None:
    with closing(sqlite3.connect(path)) as connection, connection:
        for statement in statements:
            connection.execute(statement)


def _older_schema(path) -> None:
    """The layout of the result files dcaccel wrote before it had a schema version (no application id)."""
    _execute(path, "CREATE TABLE points (workload TEXT, assignment TEXT)", "CREATE TABLE failures (assignment TEXT)")
    _execute(path, "CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT)")


PAGE = 4096  # SQLite's default page size: page 1 holds the header and the schema, page 2 a table


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda path: path.write_text("not a database " * 100), "not a dcaccel result file"),
        (lambda path: _patch(path, 0, b"SQLite format 2\0"), "not a dcaccel result file"),
        (lambda path: _patch(path, 2 * PAGE, bytes(PAGE)), "damaged"),
        (lambda path: _patch(path, PAGE, b"\xff" * 64), "damaged"),
        (lambda path: _patch(path, PAGE + 8, b"\x7f\x7f"), "damaged"),
        (lambda path: path.write_bytes(path.read_bytes()[: PAGE + 100]), "damaged"),
        (lambda path: (path.unlink(), _execute(path, "CREATE TABLE users (name TEXT)")), "tables: users"),
        (lambda path: (path.unlink(), _older_schema(path)), "written by an older dcaccel"),
        (
            lambda path: _execute(path, "PRAGMA user_version = 99"),
            f"schema version 99, this dcaccel reads {SCHEMA_VERSION}",
        ),
        (lambda path: _execute(path, "ALTER TABLE points ADD COLUMN extra TEXT"), "table points lacks the columns"),
    ],
    ids=[
        "text",
        "flipped-header",
        "zeroed-page",
        "garbage-page",
        "flipped-cell-pointer",
        "truncated",
        "foreign",
        "older-schema",
        "newer-schema",
        "other-columns",
    ],
)
@pytest.mark.parametrize("reader", ["resume", "read_points", "read_failures"])
def test_a_damaged_or_foreign_file_is_one_line_naming_it(damage, message, reader, tmp_path):
    path = tmp_path / "r.sqlite"
    _stored(path)
    damage(path)
    read = {
        "resume": lambda: ResultStore(path, SETTINGS, resume=True).points("conv-seed", "task"),
        "read_points": lambda: read_points(path),
        "read_failures": lambda: read_failures(path),
    }[reader]
    with pytest.raises(DcaccelError) as raised:
        read()
    text = str(raised.value)
    assert text.startswith(f"results file {path}") and message in text and len(text.splitlines()) == 1


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("makespan = -1", "makespan -1 is out of range"),
        ("makespan = 'abc'", "makespan 'abc' is not an integer"),
        ("speedup = 'fast'", "speedup 'fast' is not a number"),
        ("pes = 2.5", "pes 2.5 is not an integer"),
        ("pes = 0", "pes 0 is out of range"),
        ("onchip_memory = -4096", "onchip_memory -4096 is out of range"),
        ("area = 9e999", "area inf is out of range"),
        ("scheduler = 'fifo'", "scheduler 'fifo' is unknown"),
        ("lower_bound = makespan + 1", "makespan 35715 is below its lower bound 35716"),
        ("lower_bound = 1", "lower bound 1 is below work / P"),
        ("speedup = speedup * 2", "speedup 1.6840543189136217 is not work / makespan = 0.8420271594568108"),
        ("utilisation = 1.5, speedup = 1.5 * pes", "utilisation 1.5 is above 1"),
        ("utilisation = utilisation / 2", "utilisation 0.02631334873302534 is not speedup / P = 0.05262669746605068"),
        ("assignment = x'01'", "assignment b'\\x01' is not a string"),
    ],
)
@pytest.mark.parametrize("reader", ["resume", "read_points"])
def test_hand_edited_values_are_refused(edit, message, reader, tmp_path):
    path = tmp_path / "r.sqlite"
    _stored(path)
    _execute(path, f"UPDATE points SET {edit} WHERE pes = 16")
    with pytest.raises(DcaccelError) as raised:
        if reader == "resume":
            with ResultStore(path, SETTINGS, resume=True) as store:
                store.points("conv-seed", "task")
        else:
            read_points(path)
    text = str(raised.value)
    assert text.startswith(f"results file {path}: point (conv-seed, ") and f"): {message}" in text
    assert len(text.splitlines()) == 1


def test_an_empty_file_is_a_new_result_file_but_has_no_points(tmp_path):
    path = tmp_path / "r.sqlite"
    path.write_bytes(b"")
    with pytest.raises(DcaccelError, match=r"r\.sqlite: not a dcaccel result file \(tables: none\)"):
        read_points(path)
    with ResultStore(path, SETTINGS) as store:
        store.add([point()])
    assert len(read_points(path)) == 1


def test_a_file_is_marked_with_the_schema_version(tmp_path):
    _stored(tmp_path / "r.sqlite")
    with closing(sqlite3.connect(tmp_path / "r.sqlite")) as connection:
        marks = [connection.execute(f"PRAGMA {name}").fetchone()[0] for name in ("application_id", "user_version")]
    assert marks == [0x64636163, SCHEMA_VERSION]


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
    from dcaccel.exploration.evaluation import Sweep

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


@pytest.mark.parametrize(
    ("other", "message"),
    [
        (
            lambda: __import__("dcaccel").workloads.get("mmm", N=64),
            "sizes of mmm whose N is 8, this sweep's is 64",
        ),
        (lambda: dataclasses.replace(__import__("dcaccel").workloads.get("conv-seed"), name="mmm"), 'program of mmm "'),
    ],
    ids=["sizes", "program"],
)
def test_resume_refuses_another_workload_of_the_same_name(other, message, mmm, counted, tmp_path):
    from dcaccel.exploration.sweep import explore

    path = tmp_path / "r.sqlite"
    options = {"pes": [2], "scheduler": "list", "results": path, "progress": False}
    first = explore(mmm, {"MatMul": ["mv", "lmv"]}, **options)
    counted.clear()
    with pytest.raises(DcaccelError) as raised:
        explore(other(), {"MatMul": ["mv", "lmv"]}, resume=True, **options)
    assert f"results file {path} was written with {message}" in str(raised.value)
    assert counted == []
    assert (
        read_points(path)
        .drop(columns=TIMING)
        .equals(first.drop(columns=TIMING).sort_values(list(KEY)).reset_index(drop=True))
    )


def test_resume_accepts_the_same_workload_built_again(mmm, counted, tmp_path):
    from dcaccel import workloads
    from dcaccel.exploration.sweep import explore

    options = {"pes": [2], "scheduler": "list", "results": tmp_path / "r.sqlite", "progress": False}
    explore(mmm, {"MatMul": ["mv"]}, **options)
    again = explore(workloads.get("mmm", N=8), {"MatMul": ["mv"]}, resume=True, **options)
    assert counted == ["MatMul=mv"] and len(again) == 1
