"""Plots of exploration results (matplotlib). Each function returns the Figure; ``save(fig, path)``
writes PNG or SVG by the path's suffix."""

import math
from collections.abc import Iterable
from pathlib import Path

import matplotlib.colors
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from dcaccel.architecture import Architecture
from dcaccel.errors import DcaccelError
from dcaccel.exploration.pareto import pareto_front

#: Line style and marker of each scheduler's series.
SCHEDULER_STYLES = {"streaming": "-o", "list": "--s", "heft": ":^"}

#: The energy columns of a point, one per component level, in the order their bars stack.
ENERGY_PARTS = {
    "offchip_energy_pj": "off chip",
    "onchip_energy_pj": "on chip",
    "local_energy_pj": "local memories",
    "link_energy_pj": "links",
    "compute_energy_pj": "compute",
}

#: Legend entries per column; a longer legend gets more columns (and the figure more width).
LEGEND_ROWS = 30

#: Width of one character of a small-font legend label, in inches (to size the figure around the legend).
_CHARACTER_WIDTH = 0.075


def _series_label(assignment: str, scheduler: str, schedulers: int, architecture: str | None = None) -> str:
    label = f"{assignment} ({scheduler})" if schedulers > 1 else assignment
    return label if architecture is None else f"{label} on {architecture}"


def colours(names: list[str]) -> dict[str, tuple]:
    """A distinct colour per name: the default colour cycle for up to 10 names, ``tab20`` for up to 20,
    else evenly spaced along ``turbo``."""
    if len(names) <= 10:
        return {name: matplotlib.colors.to_rgba(f"C{i}") for i, name in enumerate(names)}
    if len(names) <= 20:
        return {name: plt.get_cmap("tab20")(i) for i, name in enumerate(names)}
    turbo = plt.get_cmap("turbo")
    return {name: turbo(i / (len(names) - 1)) for i, name in enumerate(names)}


def plot_makespan(results: pd.DataFrame, onchip_memory: int | None = None, cycles: bool = False) -> plt.Figure:
    """Makespan against the number of PEs, one colour per assignment, solid for the streaming
    scheduler and dashed for the list scheduler, log-log axes. ``cycles``: the makespan on each point's
    architecture (``makespan_cycles``, what a sweep with an architecture ranks by), one series per
    architecture when there are several; else the abstract model's ``makespan``.

    The legend sits outside the axes, on the right: one entry per assignment (its colour) and one per
    scheduler (its line style), in columns of at most :data:`LEGEND_ROWS`; the figure widens to hold it.
    """
    data = _one_memory(results, onchip_memory)
    assignments = list(data["assignment"].unique())
    schedulers = list(data["scheduler"].unique())
    colour = colours(assignments)
    handles = [Line2D([], [], color=colour[name], linewidth=2, label=name) for name in assignments]
    if len(schedulers) > 1:
        for name in schedulers:
            style = SCHEDULER_STYLES[name]
            handles.append(Line2D([], [], color="black", linestyle=style[:-1], marker=style[-1], label=name))
    columns = math.ceil(len(handles) / LEGEND_ROWS)
    rows = math.ceil(len(handles) / columns)
    column_width = _CHARACTER_WIDTH * max(len(handle.get_label()) for handle in handles) + 0.8
    fig, ax = plt.subplots(figsize=(6 + columns * column_width, max(4.5, 0.2 * rows + 1.2)), layout="constrained")
    column = "makespan_cycles" if cycles else "makespan"
    archs = list(data["architecture"].unique()) if cycles else []
    keys = ["assignment", "scheduler", *(["architecture"] if len(archs) > 1 else [])]
    for key, group in data.groupby(keys, sort=False):
        assignment, scheduler, *architecture = key
        group = group.sort_values("pes")
        label = _series_label(assignment, scheduler, len(schedulers), *architecture)
        ax.plot(group["pes"], group[column], SCHEDULER_STYLES[scheduler], color=colour[assignment], label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("processing elements (P)")
    where = f" on {', '.join(archs)}" if archs else ""
    ax.set_ylabel(f"makespan{where} (cycles)")
    ax.set_title(f"{_title(data)}: makespan{where} vs P")
    ax.grid(True, which="both", alpha=0.3)
    fig.legend(handles=handles, loc="outside right upper", ncols=columns, fontsize="small")
    return fig


def plot_io(results: pd.DataFrame, pes: int | None = None, onchip_memory: int | None = None) -> plt.Figure:
    """I/O per assignment: buffer I/O volume beside the off-chip / on-chip / streamed split at ``pes``
    (default: the largest P swept) under the streaming scheduler when present."""
    data = _one_memory(results, onchip_memory)
    if "streaming" in set(data["scheduler"]):
        data = data[data["scheduler"] == "streaming"]
    pes = int(data["pes"].max()) if pes is None else pes
    data = data[data["pes"] == pes].drop_duplicates("assignment").set_index("assignment")
    columns = ["io_volume", "offchip_io", "onchip_io", "streamed_io"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    data[columns].plot.bar(ax=ax, rot=0)
    ax.set_ylabel("elements")
    ax.set_title(f"{_title(data.reset_index())}: I/O per implementation (P={pes})")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_pareto(results: pd.DataFrame, x: str = "makespan", y: str = "offchip_io") -> plt.Figure:
    """Every point in the (``x``, ``y``) plane, coloured by PEs, with the Pareto front of the two."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    points = ax.scatter(results[x], results[y], c=results["pes"], cmap="viridis", norm=matplotlib.colors.LogNorm())
    front = pareto_front(results, (x, y))
    ax.step(front[x], front[y], "r-", where="post", label="Pareto front")
    for _, row in front.iterrows():
        ax.annotate(f"{row['assignment']} P={row['pes']}", (row[x], row[y]), fontsize="x-small")
    fig.colorbar(points, ax=ax, label="PEs")
    ax.set_xscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(f"{_title(results)}: Pareto front")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_energy(results: pd.DataFrame, label: str | Iterable[str] = "architecture") -> plt.Figure:
    """One bar per row of ``results``, named by its ``label`` column(s) (joined with ``/``), stacked by
    component level (:data:`ENERGY_PARTS`, pJ): where each design spends its energy."""
    columns = [label] if isinstance(label, str) else list(label)
    names = ["/".join(str(row[column]) for column in columns) for _, row in results.iterrows()]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(names) + 2.5), 4.5), layout="constrained")
    bottom = np.zeros(len(names))
    for column, part in ENERGY_PARTS.items():
        values = results[column].to_numpy(dtype=float)
        ax.bar(range(len(names)), values, bottom=bottom, label=part)
        bottom += values
    tilted = len(names) > 4
    ax.set_xticks(range(len(names)), names, rotation=30 if tilted else 0, ha="right" if tilted else "center")
    ax.set_ylabel("energy (pJ)")
    ax.set_title(f"{_title(results)}: energy by component")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def plot_roofline(results: pd.DataFrame, archs: Iterable[Architecture]) -> plt.Figure:
    """The roofline of each architecture and its points: achieved throughput (``macs / makespan_cycles``,
    MACs per cycle) against arithmetic intensity (``macs / offchip_bytes``, MACs per byte of off-chip
    traffic), log-log, one colour per architecture (``archs`` must hold every label of the
    ``architecture`` column) and one marker per scheduler. Its roof is ``min(peak, bandwidth ×
    intensity)``: the compute roof :meth:`Architecture.peak_macs_per_cycle` at the largest P of its
    points, the bandwidth roof its off-chip bytes per cycle (flat when unlimited). Points without
    off-chip traffic or cycles have no intensity or throughput and are left out."""
    by_label = {arch.label: arch for arch in archs}
    data = results[(results["offchip_bytes"] > 0) & (results["makespan_cycles"] > 0)]
    if data.empty:
        raise DcaccelError("roofline: no point with off-chip traffic and cycles")
    labels = list(dict.fromkeys(data["architecture"]))
    missing = [label for label in labels if label not in by_label]
    if missing:
        raise DcaccelError(f"roofline: no architecture given for {', '.join(map(repr, missing))}")
    intensity = data["macs"] / data["offchip_bytes"]
    throughput = data["macs"] / data["makespan_cycles"]
    span = np.geomspace(intensity.min() / 4, intensity.max() * 4, 256)
    colour = colours(labels)
    fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
    for label in labels:
        arch = by_label[label]
        mine = data["architecture"] == label
        peak = arch.peak_macs_per_cycle(int(data.loc[mine, "pes"].max()))
        bandwidth = arch.offchip_bandwidth
        roof = np.full_like(span, peak) if bandwidth is None else np.minimum(peak, bandwidth * span)
        ax.plot(span, roof, color=colour[label], linewidth=1.5, alpha=0.8, label=f"{label} (peak {peak:.3g} MAC/cycle)")
        for scheduler in dict.fromkeys(data.loc[mine, "scheduler"]):
            chosen = mine & (data["scheduler"] == scheduler)
            marker = SCHEDULER_STYLES.get(scheduler, "o")[-1]
            ax.scatter(intensity[chosen], throughput[chosen], color=colour[label], marker=marker, s=24, zorder=3)
    schedulers = list(dict.fromkeys(data["scheduler"]))
    markers = [
        Line2D([], [], color="black", linestyle="", marker=SCHEDULER_STYLES.get(name, "o")[-1], label=name)
        for name in schedulers
    ]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (MACs per byte of off-chip traffic)")
    ax.set_ylabel("achieved throughput (MACs per cycle)")
    ax.set_title(f"{_title(data)}: roofline")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(handles=[*ax.get_lines(), *markers], fontsize="small", loc="upper left")
    return fig


def save(fig: plt.Figure, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (PNG or SVG by suffix) and close it."""
    path = Path(path)
    fig.savefig(path, dpi=120 if path.suffix.lower() == ".png" else None)
    plt.close(fig)
    return path


def _one_memory(results: pd.DataFrame, onchip_memory: int | None) -> pd.DataFrame:
    memory = results["onchip_memory"].min() if onchip_memory is None else onchip_memory
    return results[results["onchip_memory"] == memory]


def _title(results: pd.DataFrame) -> str:
    return ", ".join(sorted(results["workload"].unique()))


def plot_layers(layers: pd.DataFrame) -> plt.Figure:
    """Work and buffer I/O per layer (a :func:`dcaccel.exploration.layers.layer_breakdown` table), in program order."""
    fig, (work, io) = plt.subplots(2, 1, figsize=(max(7, 0.45 * len(layers)), 6), sharex=True)
    labels = [f"{row.layer} ({row.implementation})" for row in layers.itertuples()]
    positions = range(len(layers))
    work.bar(positions, layers["work"], color="C0")
    work.set_ylabel("work (cycles)")
    work.set_title("per-layer breakdown")
    io.bar(positions, layers["io_volume"], color="C1")
    io.set_ylabel("buffer I/O (elements)")
    io.set_xticks(list(positions), labels, rotation=60, ha="right", fontsize="small")
    for axes in (work, io):
        axes.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig
