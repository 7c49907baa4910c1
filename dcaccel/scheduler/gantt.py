"""Gantt charts of schedules (matplotlib). Only this module plots; the schedulers never import it.

One row per PE, one bar per task (zero-length buffer and pseudo nodes are left out). For a
streaming schedule the blocks are shaded alternately along the time axis and numbered, and bars
take their block's colour.
"""

from __future__ import annotations

import os

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from dcaccel.scheduler.schedule import Schedule

_PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def draw_gantt(result: Schedule, ax: Axes, labels: bool = True) -> None:
    """Draw ``result`` on ``ax``: PEs on the y axis, cycles on the x axis."""
    timing = result.timing
    block_of = [-1] * result.graph.n
    for index, block in enumerate(result.blocks):
        for v in block:
            block_of[v] = index
    spans: dict[int, list[int]] = {}
    for v in range(result.graph.n):
        if timing.end[v] > timing.start[v] and block_of[v] >= 0:
            span = spans.setdefault(block_of[v], [timing.start[v], timing.end[v]])
            span[0] = min(span[0], timing.start[v])
            span[1] = max(span[1], timing.end[v])
    for index, (begin, finish) in sorted(spans.items()):
        ax.axvspan(begin, finish, color="#000000", alpha=0.05 if index % 2 == 0 else 0.12, linewidth=0)
        ax.text((begin + finish) / 2, -0.75, f"B{index}", ha="center", va="center", fontsize=7)
    for v in range(result.graph.n):
        duration = timing.end[v] - timing.start[v]
        if duration <= 0:
            continue
        colour = _PALETTE[block_of[v] % len(_PALETTE)] if block_of[v] >= 0 else _PALETTE[0]
        ax.barh(timing.pe[v], duration, left=timing.start[v], height=0.7, color=colour, edgecolor="black", lw=0.4)
        if labels:
            ax.text(
                timing.start[v] + duration / 2, timing.pe[v], result.dag.label(v), ha="center", va="center", fontsize=6
            )
    ax.set_ylim(result.pes - 0.4, -1.0)  # PE 0 on top, block numbers above it
    ax.set_yticks(range(result.pes))
    ax.set_ylabel("PE")
    ax.set_xlabel("time (cycles)")
    ax.set_title(f"{result.dag.name}: {result.scheduler} schedule, P={result.pes}, makespan {result.makespan:,}")


def save_gantt(result: Schedule, path: str | os.PathLike, labels: bool | None = None) -> None:
    """Write the Gantt chart of ``result`` to ``path`` (the format follows the suffix: .png, .svg, .pdf).
    Task labels are drawn for schedules of at most 200 tasks unless ``labels`` says otherwise."""
    tasks = len(result.dag.tasks)
    figure = Figure(figsize=(12.0, min(24.0, 1.5 + 0.3 * result.pes)))
    draw_gantt(result, figure.add_subplot(), labels=tasks <= 200 if labels is None else labels)
    figure.tight_layout()
    figure.savefig(os.fspath(path))
