import json
from types import SimpleNamespace

import numpy as np
import pytest

from dcaccel.costmodel.measure import Timing, _manifest_entry, read_rows, write_rows
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
