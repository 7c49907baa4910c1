"""Plots of exploration results, on a small synthetic table (no lowering needed)."""

import dataclasses

import pytest

from dcaccel.architecture import Architecture, load
from dcaccel.errors import DcaccelError
from dcaccel.exploration.plots import (
    ENERGY_PARTS,
    plot_energy,
    plot_io,
    plot_makespan,
    plot_pareto,
    plot_roofline,
    save,
)
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


@pytest.mark.parametrize("suffix", [".png", pytest.param(".svg", marks=pytest.mark.slow)])
def test_save_writes_the_format_of_the_suffix(suffix, results, tmp_path):
    path = save(plot_makespan(results), tmp_path / f"sweep{suffix}")
    head = path.read_bytes()[:64]
    assert head.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in path.read_bytes()[:2000]


@pytest.mark.parametrize(
    "count", [1, 9, pytest.param(18, marks=pytest.mark.slow), pytest.param(61, marks=pytest.mark.slow)]
)
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


def _costed(architecture, scheduler, pes, macs, offchip_bytes, cycles, energy=(0, 0, 0, 0, 0)):
    """A point costed on ``architecture``: its MACs, off-chip bytes, cycles and energy parts."""
    point = _point("Conv=mv", pes, scheduler, cycles)
    parts = dict(zip(ENERGY_PARTS, energy, strict=True))
    return dataclasses.replace(
        point,
        architecture=architecture,
        macs=macs,
        offchip_bytes=offchip_bytes,
        makespan_cycles=cycles,
        energy_pj=float(sum(energy)),
        **parts,
    )


@pytest.fixture(scope="module")
def designs():
    """Two designs: 4 units of 2 MACs/cycle behind 8 B/cycle, and P units of one element per cycle with
    unlimited bandwidth."""
    narrow = Architecture.from_dict(
        {
            "name": "narrow",
            "units": {"pe": {"count": 4, "macs_per_cycle": 2}},
            "memories": {"dram": {"level": "offchip", "bandwidth_bytes_per_cycle": 8}},
        }
    )
    return [narrow, load("abstract")]


@pytest.mark.parametrize(
    ("points", "peaks"),
    [
        ([("narrow", "list", 4, 800, 400, 200), ("abstract", "streaming", 16, 900, 100, 90)], [8, 16]),
        ([("narrow", "heft", 4, 100, 800, 400)], [8]),  # memory bound, one design
        ([("abstract", "list", 2, 10, 1, 10), ("abstract", "list", 32, 10, 1, 1)], [32]),  # the largest P's roof
    ],
)
def test_roofline_puts_each_point_under_its_roof(designs, points, peaks):
    results = to_frame([_costed(*point) for point in points])
    axes = plot_roofline(results, designs).axes[0]
    roofs = axes.get_lines()
    labels = list(dict.fromkeys(architecture for architecture, *_ in points))
    assert [line.get_label().split(" ")[0] for line in roofs] == labels
    for line, label, peak in zip(roofs, labels, peaks, strict=True):
        x, y = line.get_xdata(), line.get_ydata()
        bandwidth = 8 if label == "narrow" else None
        assert y == pytest.approx([min(peak, bandwidth * value) if bandwidth else peak for value in x])
    dots = [value for collection in axes.collections for offset in collection.get_offsets() for value in offset]
    expected = [(macs / traffic, macs / cycles) for _, _, _, macs, traffic, cycles in points]
    assert dots == pytest.approx([value for dot in expected for value in dot])  # (x, y) of each point, in order
    assert axes.get_xscale() == axes.get_yscale() == "log"


def test_roofline_needs_every_architecture(designs):
    results = to_frame([_costed("tpu", "list", 4, 10, 10, 10)])
    with pytest.raises(DcaccelError, match="roofline: no architecture given for 'tpu'"):
        plot_roofline(results, designs)
    with pytest.raises(DcaccelError, match="no point with off-chip traffic"):
        plot_roofline(to_frame([_costed("narrow", "list", 4, 10, 0, 10)]), designs)


@pytest.mark.parametrize("energies", [[(5, 4, 3, 2, 1)], [(100, 0, 0, 0, 1), (0, 0, 0, 0, 0), (1, 2, 3, 4, 5)]])
def test_energy_bars_stack_the_parts(energies):
    results = to_frame([_costed(f"d{i}", "list", 4, 1, 1, 1, energy) for i, energy in enumerate(energies)])
    axes = plot_energy(results).axes[0]
    assert [tick.get_text() for tick in axes.get_xticklabels()] == [f"d{i}" for i in range(len(energies))]
    assert len(axes.patches) == len(energies) * len(ENERGY_PARTS)
    bars = axes.patches
    for index, energy in enumerate(energies):
        mine = bars[index :: len(energies)]
        assert [bar.get_height() for bar in mine] == list(energy)
        assert mine[-1].get_y() + mine[-1].get_height() == sum(energy)
