"""Plots of exploration results (matplotlib). Each function returns the Figure; ``save(fig, path)``
writes PNG or SVG by the path's suffix."""

from pathlib import Path

import matplotlib.colors
import matplotlib.pyplot as plt
import pandas as pd

from dcaccel.exploration.pareto import pareto_front


def _series_label(assignment: str, scheduler: str, schedulers: int) -> str:
    return f"{assignment} ({scheduler})" if schedulers > 1 else assignment


def plot_makespan(results: pd.DataFrame, onchip_memory: int | None = None) -> plt.Figure:
    """Makespan against the number of PEs, one colour per assignment, solid for the streaming
    scheduler and dashed for the list scheduler, log-log axes."""
    data = _one_memory(results, onchip_memory)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    schedulers = data["scheduler"].nunique()
    colours = {name: f"C{i}" for i, name in enumerate(data["assignment"].unique())}
    for (assignment, scheduler), group in data.groupby(["assignment", "scheduler"], sort=False):
        group = group.sort_values("pes")
        style = "-o" if scheduler == "streaming" else "--s"
        label = _series_label(assignment, scheduler, schedulers)
        ax.plot(group["pes"], group["makespan"], style, color=colours[assignment], label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("processing elements (P)")
    ax.set_ylabel("makespan (cycles)")
    ax.set_title(f"{_title(data)}: makespan vs P")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
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
