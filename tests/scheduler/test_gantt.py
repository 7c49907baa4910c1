"""Gantt charts: files in the requested format, one bar per task, blocks shaded."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from dcaccel.dag import generators as gen
from dcaccel.scheduler import schedule
from dcaccel.scheduler.gantt import draw_gantt, save_gantt

MAGIC = {".png": b"\x89PNG", ".svg": b"<?xml"}


@pytest.mark.parametrize("suffix", [".png", ".svg"])
@pytest.mark.parametrize("scheduler", ["streaming", "list"])
def test_gantt_file(tmp_path, suffix, scheduler):
    result = schedule(gen.fork_join(3, 2, 8), 2, scheduler)
    path = tmp_path / f"chart{suffix}"
    save_gantt(result, path)
    assert path.read_bytes().startswith(MAGIC[suffix])


@pytest.mark.parametrize(("shape", "pes"), [("mv", 4), ("op", 2), ("lmv", 16)])
def test_bars_and_blocks(shape, pes):
    dag = gen.mmm(shape, 3, 4, 5)
    result = schedule(dag, pes)
    ax = Figure().add_subplot()
    draw_gantt(result, ax)
    bars = [bar for container in ax.containers for bar in container]
    timed = [v for v in range(dag.num_nodes) if result.timing.end[v] > result.timing.start[v]]
    assert len(bars) == len(timed)
    assert sorted((b.get_x(), b.get_width()) for b in bars) == sorted(
        (result.timing.start[v], result.timing.end[v] - result.timing.start[v]) for v in timed
    )
    shaded_blocks = {i for i, block in enumerate(result.blocks) if any(v in timed for v in block)}
    labels = {t.get_text() for t in ax.texts if t.get_text()[0] == "B" and t.get_text()[1:].isdigit()}
    assert labels == {f"B{i}" for i in shaded_blocks}
