"""Gantt charts: files in the requested format, one bar per task, blocks shaded, a legend outside the
axes, labels where they fit, and the block-level view for schedules of many blocks."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from dcaccel.dag import NodeKind, TaskDAG, TaskInfo
from dcaccel.dag import generators as gen
from dcaccel.scheduler import schedule
from dcaccel.scheduler.gantt import block_spans, draw_gantt, gantt_figure, save_gantt

MAGIC = {".png": b"\x89PNG", ".svg": b"<?xml", ".pdf": b"%PDF"}


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
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
    t = result.timing
    timed = [v for v in range(dag.num_nodes) if t.end[v] > t.start[v]]
    assert sorted(_task_bars(ax)) == sorted((t.pe[v], t.start[v], t.end[v] - t.start[v]) for v in timed)
    shaded_blocks = {i for i, block in enumerate(result.blocks) if any(v in timed for v in block)}
    labels = {t.get_text() for t in ax.texts if t.get_text()[0] == "B" and t.get_text()[1:].isdigit()}
    assert labels == {f"B{i}" for i in shaded_blocks}


def _task_bars(ax) -> list[tuple[int, float, float]]:
    """(PE, start, duration) of every task bar drawn on ``ax`` (one collection of bars per PE)."""
    bars = []
    for collection in ax.collections:
        for path in collection.get_paths():
            xs, ys = path.vertices[:, 0], path.vertices[:, 1]
            bars.append((round((ys.min() + ys.max()) / 2), xs.min(), xs.max() - xs.min()))
    return bars


def _layers(widths: list[int], volume: int = 8) -> TaskDAG:
    """A chain of layers (model node ``layer{i}`` of op type ``Conv`` or ``Relu``), layer i made of
    ``widths[i]`` parallel tasks between two buffers; every layer is a block on P = max(widths)."""
    dag = TaskDAG("layers")
    previous = dag.add_node(NodeKind.SOURCE, "source")
    for i, width in enumerate(widths):
        op = "Conv" if i % 2 == 0 else "Relu"
        tasks = [dag.add_node(NodeKind.TASK, f"L{i}_{j}", TaskInfo(node=f"layer{i}", op=op)) for j in range(width)]
        buffer = dag.add_node(NodeKind.BUFFER, f"out{i}")
        for task in tasks:
            dag.add_edge(previous, task, volume * (i + 1) if i else volume)
            dag.add_edge(task, buffer, volume * (i + 2))
        previous = buffer
    return dag


def test_legend_outside_and_colours_by_model_node():
    result = schedule(_layers([2, 2, 2]), 2)
    ax = Figure(figsize=(10, 3)).add_subplot()
    draw_gantt(result, ax)
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["layer0 (Conv)", "layer1 (Relu)", "layer2 (Conv)"]
    assert legend.get_bbox_to_anchor().x0 > ax.bbox.x1  # right of the axes, not over the bars
    colours = {tuple(colour) for collection in ax.collections for colour in collection.get_facecolor()}
    assert len(colours) == 3


def test_labels_only_where_they_fit():
    dag = TaskDAG("two")
    s = dag.add_node(NodeKind.SOURCE, "s")
    long, short = dag.add_node(NodeKind.TASK, "long_task"), dag.add_node(NodeKind.TASK, "short_task")
    dag.add_edge(s, long, 100_000)
    dag.add_edge(long, short, 10)
    result = schedule(dag, 1, "list")
    ax = Figure(figsize=(8, 2)).add_subplot()
    draw_gantt(result, ax)
    assert {t.get_text() for t in ax.texts} == {"long_task"}


@pytest.mark.parametrize(("widths", "views"), [([2] * 4, 1), ([2] * 8, 1), ([2] * 9, 2), ([3, 1, 3] * 10, 2)])
def test_block_level_view_beyond_a_handful_of_blocks(widths, views):
    result = schedule(_layers(widths), max(widths))
    spans = block_spans(result)
    figure = gantt_figure(result)
    assert len(figure.axes) == views
    if views == 2:
        blocks_ax = figure.axes[1]
        bars = [bar for container in blocks_ax.containers for bar in container]
        assert [bar.get_height() for bar in bars] == [span.end - span.start for span in spans]
        assert len({round(bar.get_width(), 6) for bar in bars}) == 1  # every block equally wide
        assert sum(span.tasks for span in spans) == sum(widths)


def test_rows_are_the_pes_in_use():
    result = schedule(gen.fork_join(3, 2, 8), 10**8, "list")
    ax = Figure().add_subplot()
    draw_gantt(result, ax)
    used = max(result.timing.pe) + 1
    assert ax.get_ylim() == (used - 0.4, -1.0)
    assert f"P=100,000,000, {used} in use" in ax.get_title()


def test_huge_volumes_draw(tmp_path):
    result = schedule(gen.chain([2**62, 2**62, 2**62]), 2)
    path = tmp_path / "huge.svg"
    save_gantt(result, path)
    assert path.read_bytes().startswith(MAGIC[".svg"])
