import json
from dataclasses import asdict, replace
from types import SimpleNamespace

import numpy as np
import pytest

from dcaccel.costmodel.measure import (
    WALL_BELOW_NS,
    Row,
    Timing,
    _manifest_entry,
    _timing,
    choose_clock,
    combine_passes,
    read_rows,
    write_rows,
)
from dcaccel.errors import DcaccelError

from .rows import row


def test_median_ignores_preemption_outliers():
    samples = np.array([100.0] * 9 + [1000.0])  # one call preempted: 10x
    timing = Timing.of(samples)
    assert (timing.median_ns, timing.min_ns, timing.n) == (100.0, 100.0, 10)
    assert timing.p90_ns == pytest.approx(190.0)


def test_rows_round_trip(tmp_path):
    rows = [row("f", "w", "a", "t0", 10, 100.0), row("f", "w", "b", "t0", 20, 200.0)]
    path = tmp_path / "rows.jsonl"
    write_rows(rows[:1], path)
    write_rows(rows[1:], path)  # appends
    assert read_rows(path) == rows


@pytest.mark.parametrize(
    ("line", "message"),
    [("{not json", "rows.jsonl:2"), (json.dumps({"program": "w"}), "rows.jsonl:2: .*'family' missing")],
)
def test_bad_row_refused_with_its_line(tmp_path, line, message):
    path = tmp_path / "rows.jsonl"
    write_rows([row("f", "w", "a", "t0", 10, 100.0)], path)
    with open(path, "a") as stream:
        stream.write(line + "\n")
    with pytest.raises(DcaccelError, match=message):
        read_rows(path)


def test_host_tasks_are_timed_in_this_process_only(tmp_path):
    program = SimpleNamespace(sdfg=SimpleNamespace(name="prog", build_folder=str(tmp_path)))
    arguments = {"X": np.zeros(2, np.float32), "N": 2, "__host_call_0": lambda: 0}
    with pytest.raises(DcaccelError, match=r"measure prog: host tasks \(__host_call_0\) run in this process only"):
        _manifest_entry(program, arguments, tmp_path / "a.npz")
    del arguments["__host_call_0"]
    entry = _manifest_entry(program, arguments, tmp_path / "a.npz")
    assert entry["scalars"] == {"N": 2} and entry["folder"] == str(tmp_path)
    with np.load(entry["arrays"]) as arrays:
        assert arrays.files == ["X"]


@pytest.mark.parametrize(
    ("field", "before", "bad", "expected"),
    [
        ("clock", "wall", "sundial", "wall, thread-cpu"),  # rows of before the thread CPU clock
        ("heap", "per-call", "tidy", "steady, per-call"),  # rows of before the steady heap
    ],
)
def test_a_row_of_before_a_provenance_field_reads_as_it_was_measured(field, before, bad, expected):
    data = row("f", "w", "a", "t0", 10, 100.0).to_json()
    del data["provenance"][field]
    assert getattr(Row.from_json(data).provenance, field) == before
    data["provenance"][field] = bad
    with pytest.raises(DcaccelError, match=f"{field} '{bad}', expected one of {expected}"):
        Row.from_json(data)


def test_a_row_without_its_threads_is_refused():
    data = row("f", "w", "a", "t0", 10, 100.0).to_json()
    del data["provenance"]["threads"]
    with pytest.raises(DcaccelError, match="'threads' missing"):
        Row.from_json(data)


@pytest.mark.parametrize(("threads", "clock"), [("1", "thread-cpu"), ("2", "wall")])
def test_the_thread_clock_times_a_program_on_one_thread(monkeypatch, threads, clock):
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    assert choose_clock() == clock
    assert choose_clock("wall") == "wall"


def test_the_thread_clock_on_more_threads_or_an_unknown_clock_is_refused(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    with pytest.raises(DcaccelError, match="thread-cpu clock misses OpenMP's other threads"):
        choose_clock("thread-cpu")
    with pytest.raises(DcaccelError, match="clock 'sundial', expected one of wall, thread-cpu"):
        choose_clock("sundial")


@pytest.mark.parametrize(
    ("wall_ns", "clock", "median"),
    [(WALL_BELOW_NS - 1, "wall", WALL_BELOW_NS - 1), (WALL_BELOW_NS, "thread-cpu", 700.0)],
)
def test_a_short_step_of_the_thread_timer_is_read_from_its_wall_clock(wall_ns, clock, median):
    samples = {"t0": np.full(5, 700.0), "t0_wall": np.full(5, float(wall_ns))}
    timing, timed_by = _timing(samples, "t0", "thread-cpu")
    assert (timing.median_ns, timed_by) == (median, clock)
    assert _timing({"t0": np.full(5, 9.0)}, "t0", "wall")[1] == "wall"


def _timed(source, timings):
    return [replace(r, timing=Timing(*t)) for r, t in zip(source, timings, strict=True)]


PASS = [row("f", "w", "a", "t0", 10, 100.0), row("f", "w", "a", "t1", 20, 200.0)]


@pytest.mark.parametrize(
    ("timings", "expected"),
    [
        # one pass: itself
        ([[(100, 90, 120, 80, 20), (200, 190, 230, 180, 20)]], [(100, 90, 120, 80, 20), (200, 190, 230, 180, 20)]),
        # two: the mean of the medians and quantiles, the least minimum, the samples summed
        (
            [[(100, 90, 120, 80, 20), (200, 190, 230, 180, 20)], [(140, 100, 200, 70, 40), (100, 90, 110, 85, 40)]],
            [(120, 95, 160, 70, 60), (150, 140, 170, 85, 60)],
        ),
        # three: the median pass of each, a slow outlier pass ignored
        (
            [[(100, 0, 0, 1, 1)] * 2, [(900, 0, 0, 1, 1)] * 2, [(110, 0, 0, 1, 1)] * 2],
            [(110, 0, 0, 1, 3)] * 2,
        ),
    ],
)
def test_passes_combine_step_by_step(timings, expected):
    passes = [_timed(PASS, t)[:: -1 if k else 1] for k, t in enumerate(timings)]  # matched by step, not place
    combined = combine_passes(passes)
    assert [r.step for r in combined] == ["t0", "t1"]
    assert [tuple(asdict(r.timing).values()) for r in combined] == expected
    assert all(r.features == p.features for r, p in zip(combined, PASS, strict=True))


def test_passes_of_other_steps_or_features_are_refused():
    with pytest.raises(DcaccelError, match="passes 1 and 2 differ in step t1"):
        combine_passes([PASS, PASS[:1]])
    with pytest.raises(DcaccelError, match="passes 1 and 2 differ in step t1"):
        combine_passes([PASS[:1], PASS])  # a step only the later pass has
    with pytest.raises(DcaccelError, match="pass 2 measures a step twice"):
        combine_passes([PASS, [*PASS, PASS[0]]])
    other = replace(PASS[1], features={**PASS[1].features, "work": 21.0})
    with pytest.raises(DcaccelError, match="step t1 .* other features"):
        combine_passes([PASS, [PASS[0], other]])
    with pytest.raises(DcaccelError, match="no pass"):
        combine_passes([])
