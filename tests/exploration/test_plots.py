"""Plots of exploration results, on a small synthetic table (no lowering needed)."""

import dataclasses

import pytest

from dcaccel.exploration.plots import plot_io, plot_makespan, plot_pareto, save
from dcaccel.exploration.points import ExplorationPoint, to_frame


def _point(assignment, pes, scheduler, makespan, memory=0):
    values = {field.name: 0 for field in dataclasses.fields(ExplorationPoint)}
    values.update(
        workload="toy",
        assignment=assignment,
        granularity="task",
        pes=pes,
        scheduler=scheduler,
        onchip_memory=memory,
        makespan=makespan,
        io_volume=100 * len(assignment),
        offchip_io=makespan // 10,
    )
    return ExplorationPoint(**values)


@pytest.fixture(scope="module")
def results():
    return to_frame(
        [
            _point(assignment, pes, scheduler, makespan=base // pes + pes)
            for assignment, base in (("Conv=mv", 1000), ("Conv=op", 1600))
            for scheduler in ("streaming", "list")
            for pes in (1, 2, 4, 8)
        ]
    )


def test_makespan_plot_has_a_line_per_assignment_and_scheduler(results):
    axes = plot_makespan(results).axes[0]
    assert len(axes.lines) == 4
    labels = sorted(line.get_label() for line in axes.lines)
    assert labels == ["Conv=mv (list)", "Conv=mv (streaming)", "Conv=op (list)", "Conv=op (streaming)"]
    mv = next(line for line in axes.lines if line.get_label() == "Conv=mv (streaming)")
    assert list(mv.get_ydata()) == [1001, 502, 254, 133]


def test_io_plot_has_a_bar_group_per_assignment(results):
    axes = plot_io(results).axes[0]
    assert [tick.get_text() for tick in axes.get_xticklabels()] == ["Conv=mv", "Conv=op"]
    assert len(axes.patches) == 2 * 4


def test_pareto_plot_marks_the_front(results):
    axes = plot_pareto(results).axes[0]
    front = next(line for line in axes.lines if line.get_label() == "Pareto front")
    assert len(front.get_xdata()) >= 1


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_save_writes_the_format_of_the_suffix(suffix, results, tmp_path):
    path = save(plot_makespan(results), tmp_path / f"sweep{suffix}")
    head = path.read_bytes()[:64]
    assert head.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in path.read_bytes()[:2000]


@pytest.mark.parametrize("count", [1, 9, 18, 61])
def test_makespan_legend_is_outside_the_axes_with_an_entry_per_assignment(count):
    names = [f"conv1=mv,conv2=op,fc{i}=lmv" for i in range(count)]
    results = to_frame(
        [
            _point(name, pes, scheduler, 1000 + i)
            for i, name in enumerate(names)
            for scheduler in ("streaming", "list")
            for pes in (1, 4)
        ]
    )
    fig = plot_makespan(results)
    fig.canvas.draw()
    (legend,) = fig.legends
    (axes,) = fig.axes
    box, frame = legend.get_window_extent(), axes.get_window_extent()
    assert box.x0 >= frame.x1 and box.x1 <= fig.bbox.x1 and box.y0 >= fig.bbox.y0
    assert [text.get_text() for text in legend.get_texts()] == [*names, "streaming", "list"]
    assert len({line.get_color() for line in axes.lines}) == count
