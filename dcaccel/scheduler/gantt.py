"""Gantt charts of schedules (matplotlib). Only this module plots; the schedulers never import it.

:func:`draw_gantt` draws one row per PE in use and one bar per task (zero-length buffer and pseudo
nodes are left out), coloured by the model node the task lowers (its record's ``node``, else its op
type, else its kind), with the legend outside the axes. Task labels and block numbers are drawn
only where they fit. For a streaming schedule the blocks are shaded alternately along the time axis.

:func:`draw_blocks` draws the block-level view of a streaming schedule: one bar per block (gang),
all blocks equally wide, its height the block's duration, so that short late blocks stay readable.
:func:`gantt_figure` (written by :func:`save_gantt`) puts it under the Gantt chart when a schedule has
more than :data:`HANDFUL` blocks.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from dcaccel.scheduler.schedule import Schedule

_TAB20 = colormaps["tab20"].colors
_PALETTE = tuple(to_hex(colour) for colour in _TAB20[0::2] + _TAB20[1::2])  # ten strong colours, then their light pairs
_OTHER = "#d0d0d0"
_FONT = 6  # points, task labels and block numbers
_CHAR_WIDTH = 0.62  # width of a character in units of the font size (a conservative average)

#: Streaming schedules with more blocks than this get the block-level view under the Gantt chart.
HANDFUL = 8


@dataclass(frozen=True)
class Span:
    """A block of a streaming schedule as it runs: its index, first start, last end and tasks."""

    block: int
    start: int
    end: int
    tasks: int
    group: str  # the colour group with the most work in the block


def block_spans(result: Schedule) -> list[Span]:
    """The blocks that contain a task of positive duration, in block order."""
    timing, groups = result.timing, _groups(result)
    spans = []
    for index, block in enumerate(result.blocks):
        timed = [v for v in block if timing.end[v] > timing.start[v]]
        if not timed:
            continue
        work: Counter[str] = Counter()
        for v in timed:
            work[groups[v]] += timing.end[v] - timing.start[v]
        begin, finish = min(timing.start[v] for v in timed), max(timing.end[v] for v in timed)
        spans.append(Span(index, begin, finish, len(timed), work.most_common(1)[0][0]))
    return spans


def draw_gantt(result: Schedule, ax: Axes, labels: bool = True, legend: bool = True) -> None:
    """Draw ``result`` on ``ax``: PEs on the y axis (those in use), cycles on the x axis. Task labels
    (with ``labels``) and block numbers are drawn where they fit in their bar or block."""
    timing = result.timing
    timed = [v for v in range(result.graph.n) if timing.end[v] > timing.start[v]]
    rows = max((timing.pe[v] for v in timed), default=0) + 1
    makespan = max(result.makespan, 1)
    ax.set_xlim(0, makespan)
    ax.set_ylim(rows - 0.4, -1.0)  # PE 0 on top, block numbers above it
    cycles_per_point = makespan / max(_axes_width_points(ax), 1.0)
    for span in block_spans(result):
        ax.axvspan(span.start, span.end, color="#000000", alpha=0.05 if span.block % 2 == 0 else 0.12, linewidth=0)
        text = f"B{span.block}"
        if _fits(text, span.end - span.start, cycles_per_point):
            ax.text((span.start + span.end) / 2, -0.75, text, ha="center", va="center", fontsize=_FONT)
    groups = _groups(result)
    colours = _colours(result, groups)
    by_pe: dict[int, list[int]] = {}
    for v in timed:
        by_pe.setdefault(timing.pe[v], []).append(v)
    for pe, nodes in sorted(by_pe.items()):  # one collection per PE: drawing stays fast for many tasks
        ax.broken_barh(
            [(timing.start[v], timing.end[v] - timing.start[v]) for v in nodes],
            (pe - 0.35, 0.7),
            facecolors=[colours.get(groups[v], _OTHER) for v in nodes],
            edgecolor="black",
            lw=0.3,
        )
    for v in timed:
        duration = timing.end[v] - timing.start[v]
        label = result.dag.label(v)
        if labels and _fits(label, duration, cycles_per_point):
            ax.text(timing.start[v] + duration / 2, timing.pe[v], label, ha="center", va="center", fontsize=_FONT)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=min(rows, 24), integer=True))
    ax.set_ylabel("PE")
    ax.set_xlabel("time (cycles)")
    in_use = f", {rows:,} in use" if rows < result.pes else ""
    ax.set_title(
        f"{result.dag.name}: {result.scheduler} schedule, P={result.pes:,}{in_use}, makespan {result.makespan:,}"
    )
    if legend:
        _legend(ax, colours)


def draw_blocks(result: Schedule, ax: Axes, legend: bool = False) -> None:
    """The block-level view of a streaming schedule on ``ax``: one bar per block, equally wide, its
    height the block's duration (log scale when durations differ by more than 100×), coloured by
    the group with the most work in it, with its number of tasks above it where it fits."""
    spans = block_spans(result)
    colours = _colours(result, _groups(result))
    positions = range(len(spans))
    durations = [span.end - span.start for span in spans]
    ax.bar(positions, durations, width=0.8, color=[colours.get(span.group, _OTHER) for span in spans],
           edgecolor="black", lw=0.3)  # fmt: skip
    if durations and max(durations) > 100 * min(durations):
        ax.set_yscale("log")
    slot = _axes_width_points(ax) / max(len(spans), 1)
    for x, (span, duration) in enumerate(zip(spans, durations, strict=True)):
        text = str(span.tasks)
        if len(text) * _FONT * _CHAR_WIDTH <= slot:
            ax.text(x, duration, text, ha="center", va="bottom", fontsize=_FONT)
    ax.set_xlim(-0.6, len(spans) - 0.4)
    ticks = list(positions)[:: max(1, -(-len(spans) // 40))]
    ax.set_xticks(ticks, [f"B{spans[x].block}" for x in ticks], fontsize=_FONT, rotation=90)
    ax.set_xlabel("block (gang), in execution order; number of tasks above each bar")
    ax.set_ylabel("duration (cycles)")
    if legend:
        _legend(ax, colours)


def gantt_figure(result: Schedule, labels: bool | None = None) -> Figure:
    """The Gantt chart of ``result``, with the block-level view under it when the schedule has more
    than :data:`HANDFUL` blocks. Task labels are considered for schedules of at most 200 tasks unless
    ``labels`` says otherwise."""
    timing = result.timing
    rows = max((timing.pe[v] for v in range(result.graph.n) if timing.end[v] > timing.start[v]), default=0) + 1
    blocks = len(block_spans(result)) > HANDFUL
    height = min(24.0, 1.5 + 0.3 * rows) + (3.5 if blocks else 0.0)
    figure = Figure(figsize=(14.0, height), layout="constrained")
    if blocks:
        gantt_ax, blocks_ax = figure.subplots(2, 1, height_ratios=[height - 3.5, 3.5])
    else:
        gantt_ax, blocks_ax = figure.add_subplot(), None
    draw_gantt(result, gantt_ax, labels=len(result.dag.tasks) <= 200 if labels is None else labels)
    if blocks_ax is not None:
        draw_blocks(result, blocks_ax)
    return figure


def save_gantt(result: Schedule, path: str | os.PathLike, labels: bool | None = None) -> None:
    """Write :func:`gantt_figure` of ``result`` to ``path`` (the format follows the suffix: .png, .svg,
    .pdf)."""
    gantt_figure(result, labels).savefig(os.fspath(path))


def _groups(result: Schedule) -> list[str]:
    """The colour group of every node: the model node it lowers (with its op type), else its op type,
    else its kind."""
    dag = result.dag
    groups = []
    for v in range(dag.num_nodes):
        info = dag.info(v)
        node, op = info.node, info.op
        if node is not None:
            groups.append(f"{node} ({op})" if op is not None and op != node else str(node))
        else:
            groups.append(str(op) if op is not None else dag.kind(v).value)
    return groups


def _colours(result: Schedule, groups: list[str]) -> dict[str, str]:
    """A colour per group, in order of first appearance in time; groups beyond the palette share grey."""
    timing = result.timing
    timed = sorted((timing.start[v], v) for v in range(result.graph.n) if timing.end[v] > timing.start[v])
    order = list(dict.fromkeys(groups[v] for _, v in timed))
    return {group: colour for group, colour in zip(order, _PALETTE, strict=False)}


def _legend(ax: Axes, colours: dict[str, str]) -> None:
    """The groups' colours as a legend outside the axes, on the right."""
    if len(colours) < 2:
        return
    handles = [Patch(facecolor=colour, edgecolor="black", lw=0.3, label=group) for group, colour in colours.items()]
    if len(colours) == len(_PALETTE):
        handles.append(Patch(facecolor=_OTHER, edgecolor="black", lw=0.3, label="other"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)


def _axes_width_points(ax: Axes) -> float:
    """The width of ``ax`` in points (before the layout adjusts it; a slight overestimate)."""
    figure = ax.get_figure()
    return ax.get_position().width * figure.get_figwidth() * 72.0


def _fits(text: str, extent: float, cycles_per_point: float) -> bool:
    """Whether ``text`` at the labels' font size fits in ``extent`` cycles."""
    return len(text) * _FONT * _CHAR_WIDTH * cycles_per_point <= extent
