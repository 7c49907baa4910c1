"""The numbers do not move (issue 23): four sweeps, re-run on the live tree, give the points they gave before
the refactor (91f9bb2; ResNet-18 at c450d7a), saved as CSV in ``data/before/`` (its README says how they were
captured and why each sweep is this size). Every column the CSV holds but the timing ones is compared:
integers and strings exactly, floats to a relative 1e-9; the rows are matched by their key columns.

Running this file as a script writes the CSVs: ``PYTHONPATH=<a work tree at the reference commit> python
tests/exploration/test_numbers_unchanged.py`` (the script's folder comes first on ``sys.path``, then
``PYTHONPATH``, so ``dcaccel`` is the reference tree's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

import dcaccel

BEFORE = Path(__file__).parent / "data" / "before"
#: The columns that time the run (wall seconds of lowering, extraction, scheduling, or of the mapping search):
#: they differ from run to run and are not compared.
TIMING = ("lower_seconds", "extract_seconds", "schedule_seconds")
#: What identifies a point of a sweep (the design point, not what the model says about it).
POINT_KEYS = (
    "workload",
    "assignment",
    "granularity",
    "pes",
    "scheduler",
    "onchip_memory",
    "architecture",
    "partition_policy",
)
#: What identifies a row of the mapping strategy: its ``assignment`` is the mapping found (a result), so a
#: layer's row is keyed by its node, the part of the assignment before " = ", and the network's by "network".
MAPPING_KEYS = ("architecture", "onchip_memory", "granularity", "node")
#: Relative tolerance of the float columns.
RELATIVE = 1e-9


@dataclass(frozen=True)
class Sweep:
    """One sweep of issue 23: ``dcaccel.explore(workload, **options)``, its CSV and the columns keying its rows."""

    name: str
    workload: str
    options: dict = field(default_factory=dict)
    keys: tuple[str, ...] = POINT_KEYS

    @property
    def csv(self) -> Path:
        return BEFORE / f"{self.name}.csv"

    def run(self) -> pd.DataFrame:
        return dcaccel.explore(self.workload, progress=False, **self.options)


SWEEPS = (
    Sweep(
        "lenet_per_node",
        "lenet",
        {
            "implementations": {"Conv": ["mv", "op", "lmv"]},
            "pes": [16, 128],
            "scheduler": ["streaming", "list"],
            "strategy": "per-node",
        },
    ),
    Sweep(
        "resnet18_per_op_type_eyeriss",
        "resnet18",
        {
            "implementations": {"Conv": ["mv", "lmv"]},
            "pes": [16, 128],
            "scheduler": ["streaming", "list"],
            "strategy": "per-op-type",
            "arch": "eyeriss",
        },
    ),
    Sweep(
        "lenet_partition_cgra",
        "lenet",
        {
            "implementations": {"Conv": ["mv", "lmv"]},
            "pes": [16],
            "scheduler": ["heft"],
            "arch": "cgra",
            "partition_policy": ["none", "greedy", "min-region", "cost"],
        },
    ),
    Sweep("lenet_mapping_eyeriss", "lenet", {"pes": [16], "strategy": "mapping", "arch": "eyeriss"}, MAPPING_KEYS),
)


def keyed(frame: pd.DataFrame, keys: tuple[str, ...]) -> pd.DataFrame:
    """``frame`` with its ``node`` key derived when ``keys`` asks for it, sorted by ``keys``, indexed from 0."""
    if "node" in keys:
        layer = frame["granularity"] == "layer"
        frame = frame.assign(node=frame["assignment"].str.partition(" = ")[0].where(layer, "network"))
    return frame.sort_values(list(keys), kind="stable").reset_index(drop=True)


def compare(before: pd.DataFrame, after: pd.DataFrame, keys: tuple[str, ...]) -> None:
    """Assert that ``after`` has the rows (by ``keys``) and the values of ``before`` in every column of ``before``
    but :data:`TIMING`: exactly where ``before``'s column is not a float one, else to :data:`RELATIVE`."""
    compared = [name for name in before.columns if name not in TIMING]
    missing = [name for name in compared if name not in after.columns]
    assert not missing, f"columns gone: {', '.join(missing)}"
    before, after = keyed(before[compared], keys), keyed(after[compared], keys)
    rows_before = before[list(keys)].astype(str).apply(tuple, axis=1)
    rows_after = after[list(keys)].astype(str).apply(tuple, axis=1)
    gone, new = sorted(set(rows_before) - set(rows_after)), sorted(set(rows_after) - set(rows_before))
    assert list(rows_after) == list(rows_before), f"rows gone: {gone}, rows new: {new}"
    floats = [name for name in compared if pd.api.types.is_float_dtype(before[name])]
    exact = [name for name in compared if name not in floats]
    pd.testing.assert_frame_equal(after[exact], before[exact], check_dtype=False, check_exact=True)
    pd.testing.assert_frame_equal(
        after[floats], before[floats], check_dtype=False, check_exact=False, rtol=RELATIVE, atol=0
    )


def read(sweep: Sweep) -> pd.DataFrame:
    return pd.read_csv(sweep.csv)


@pytest.mark.slow
@pytest.mark.parametrize("sweep", SWEEPS, ids=[sweep.name for sweep in SWEEPS])
def test_numbers_unchanged(sweep):
    compare(read(sweep), sweep.run(), sweep.keys)


@pytest.mark.parametrize("sweep", SWEEPS, ids=[sweep.name for sweep in SWEEPS])
def test_before_is_a_whole_sweep(sweep):
    """Each CSV holds every column of the results table at the reference commit and one row per key."""
    before = read(sweep)
    assert set(TIMING) <= set(before.columns) and "makespan_cycles" in before.columns
    assert not keyed(before, sweep.keys).duplicated(list(sweep.keys)).any()


def _moved_integer(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame.loc[frame.index[-1], "makespan_cycles"] += 1
    return frame


def _moved_float(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame.loc[frame.index[0], "energy_pj"] *= 1 + 1e-7
    return frame


def _moved_string(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame.loc[frame.index[0], "workload"] = "other"
    return frame


def _row_gone(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.iloc[1:]


def _column_gone(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns="energy_pj")


@pytest.mark.parametrize("sweep", SWEEPS, ids=[sweep.name for sweep in SWEEPS])
@pytest.mark.parametrize(
    ("move", "message"),
    [
        (_moved_integer, "makespan_cycles"),
        (_moved_float, "energy_pj"),
        (_moved_string, "workload|rows gone"),
        (_row_gone, "rows gone"),
        (_column_gone, "columns gone: energy_pj"),
    ],
)
def test_a_moved_number_fails(sweep, move, message):
    """The comparison fails when a number, a string, a row or a column of the CSV moves."""
    before = read(sweep)
    with pytest.raises(AssertionError, match=message):
        compare(before, move(before), sweep.keys)


@pytest.mark.parametrize("sweep", SWEEPS, ids=[sweep.name for sweep in SWEEPS])
def test_timing_and_order_are_not_compared(sweep):
    """Other timings, rows in another order and floats within the tolerance pass."""
    before = read(sweep)
    after = before.iloc[::-1].copy()
    after[list(TIMING)] = after[list(TIMING)] * 2 + 1
    after["energy_pj"] *= 1 + RELATIVE / 10
    compare(before, after, sweep.keys)


def main() -> None:
    """Write each sweep's results to its CSV (run against the reference tree; see the module docstring)."""
    BEFORE.mkdir(parents=True, exist_ok=True)
    for sweep in SWEEPS:
        sweep.run().to_csv(sweep.csv, index=False)


if __name__ == "__main__":
    main()
