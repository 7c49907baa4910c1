"""How good a cost model is, on rows it was not trained on (docs/costmodel.md).

Metrics of predicted against measured step times (:func:`scores`):

* ``task_mape`` — mean of |predicted − measured| / measured over the steps; ``median_ape`` its median;
* ``kendall_tau`` — Kendall's τ between predicted and measured step times (the order of the steps);
* ``program_mape`` — the same as ``task_mape`` over whole programs: the sum of a program's steps, copies
  included (a program is a workload at its sizes under one assignment of implementations);
* ``pair_order`` — of the pairs of assignments of one workload at its sizes, the fraction whose
  whole-program times the model puts in the measured order (NaN when no workload has two assignments);
* ``reproduced_pair_order`` — the same over the pairs that every re-measurement of the programs (``again``)
  puts in the rows' order: two assignments nearer than the measurement reproduces have no order to get
  right (NaN without re-measurements, or when they reproduce no pair); ``reproduced_pairs`` counts them.

The held-out protocol (:func:`fold_table`) is never random rows: each fold holds out one workload family
(:data:`FAMILIES` lists the shipped set's), trains on the others and scores the held-out one.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import get_type_hints

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from dcaccel.costmodel.measure import Row
from dcaccel.costmodel.models import MODELS, CostModel, program_times, times
from dcaccel.errors import DcaccelError

#: The workload families of the shipped dataset, each held out by one fold (benchmarks/costmodel_folds.py).
FAMILIES = (
    "products",
    "convs",
    "large-convs",
    "grouped-convs",
    "conv-seed",
    "lenet",
    "resnet18",
    "mobilenetv2-block",
    "transformer-encoder",
    "corpus-resnet",
    "corpus-mobilenet-v2",
)


@dataclass(frozen=True)
class Scores:
    """The metrics of one model on one set of rows (see the module docstring)."""

    task_mape: float
    median_ape: float
    kendall_tau: float
    program_mape: float
    pair_order: float
    reproduced_pair_order: float
    reproduced_pairs: int
    tasks: int
    programs: int


def remeasured(rows: Sequence[Row], again: Sequence[Sequence[Row]]) -> list[dict[tuple, float]]:
    """Per measurement of ``again``, the whole-program times of the programs it measured with the same steps
    as ``rows`` (a program with a step missing or added is left out); a measurement that shares no such
    program with ``rows`` is refused in one line (a file of other programs, by mistake)."""
    steps = _steps(rows)
    totals = []
    for number, other in enumerate(again, start=1):
        same = {run for run, named in _steps(other).items() if steps.get(run) == named}
        if not same:
            raise DcaccelError(f"costmodel eval: re-measurement {number} has no program measured with the same steps")
        kept = [row for row in other if row.run() in same]
        totals.append(program_times([row.run() for row in kept], times(kept)))
    return totals


def _steps(rows: Sequence[Row]) -> dict[tuple, frozenset[str]]:
    named: dict[tuple, set[str]] = {}
    for row in rows:
        named.setdefault(row.run(), set()).add(row.step)
    return {run: frozenset(steps) for run, steps in named.items()}


def scores(rows: Sequence[Row], predicted: np.ndarray, again: Sequence[Mapping[tuple, float]] = ()) -> Scores:
    """The metrics of ``predicted`` (ns per row) against the measured times of ``rows``; ``again``, the
    whole-program times of other measurements of the same programs (:func:`remeasured`), decides which pairs
    count in ``reproduced_pair_order``."""
    if len(rows) == 0:
        raise DcaccelError("costmodel eval: no rows to score")
    measured = times(rows)
    predicted = np.asarray(predicted, dtype=np.float64)
    error = np.abs(predicted - measured) / measured
    runs = [row.run() for row in rows]
    guessed, truths = program_times(runs, predicted), program_times(runs, measured)
    program_error = [abs(guessed[key] - truth) / truth for key, truth in truths.items()]
    by_workload: dict[tuple, list[tuple]] = {}
    for key in truths:
        by_workload.setdefault(key[:2], []).append(key)
    pairs, reproduced = [], []
    for a, b in (pair for keys in by_workload.values() for pair in itertools.combinations(keys, 2)):
        order = np.sign(truths[a] - truths[b])
        if order == 0:
            continue
        right = np.sign(guessed[a] - guessed[b]) == order
        pairs.append(right)
        if again and all(a in m and b in m and np.sign(m[a] - m[b]) == order for m in again):
            reproduced.append(right)
    tau = kendalltau(predicted, measured).statistic if len(rows) > 1 else float("nan")
    return Scores(
        task_mape=float(np.mean(error)),
        median_ape=float(np.median(error)),
        kendall_tau=float(tau),
        program_mape=float(np.mean(program_error)),
        pair_order=float(np.mean(pairs)) if pairs else float("nan"),
        reproduced_pair_order=float(np.mean(reproduced)) if reproduced else float("nan"),
        reproduced_pairs=len(reproduced),
        tasks=len(rows),
        programs=len(truths),
    )


def evaluate(model: CostModel, rows: Sequence[Row], again: Sequence[Sequence[Row]] = ()) -> pd.DataFrame:
    """One row of :class:`Scores` per model of ``model`` on ``rows`` (``again``, re-measurements of the same
    programs: :func:`remeasured`)."""
    totals = remeasured(rows, again)
    return pd.DataFrame([{"model": kind, **asdict(scores(rows, model.predict(rows, kind), totals))} for kind in MODELS])


def families_of(rows: Sequence[Row]) -> list[str]:
    """The families of ``rows``: those of :data:`FAMILIES` in its order, then any other by name."""
    present = {row.family for row in rows}
    return [family for family in FAMILIES if family in present] + sorted(present - set(FAMILIES))


def fold_table(
    rows: Sequence[Row], families: Sequence[str] | None = None, seed: int = 0, again: Sequence[Sequence[Row]] = ()
) -> pd.DataFrame:
    """Leave-one-family-out: per family of ``families`` (default: every family of ``rows``, in the order of
    :data:`FAMILIES`), the models trained on the rows of the other families, scored on that family's rows
    (and on the pairs the re-measurements ``again`` reproduce, :func:`remeasured`)."""
    order = families_of(rows)
    families = order if families is None else list(families)
    missing = [family for family in families if family not in order]
    if missing:
        raise DcaccelError(f"costmodel folds: no rows of family '{missing[0]}' (families: {', '.join(order)})")
    totals = remeasured(rows, again)
    table = []
    for family in families:
        test = [row for row in rows if row.family == family]
        train = [row for row in rows if row.family != family]
        model = CostModel.train(train, seed=seed)
        for kind in MODELS:
            scored = scores(test, model.predict(test, kind), totals)
            table.append({"held out": family, "model": kind, **asdict(scored)})
    return pd.DataFrame(table)


def fold_means(table: pd.DataFrame) -> pd.DataFrame:
    """The mean of each metric of :func:`fold_table` over the folds, per model (over the folds where it is a
    number: a fold without a pair to order has none)."""
    metrics = [name for name, kind in get_type_hints(Scores).items() if kind is float]
    return table.groupby("model", sort=False)[metrics].mean().reset_index()


@dataclass(frozen=True)
class Calibration:
    """One model's scale for a machine (:meth:`~dcaccel.costmodel.models.CostModel.calibrated`) and its task
    MAPE on the rows the scale was fitted on, before and after (in-sample)."""

    model: str
    scale: float
    task_mape_before: float
    task_mape_after: float


def calibration_table(model: CostModel, calibrated: CostModel, rows: Sequence[Row]) -> pd.DataFrame:
    """One row of :class:`Calibration` per model: ``calibrated`` (``model`` calibrated on ``rows``) against
    ``model``, scored on ``rows``."""

    def mape(cost: CostModel, kind: str) -> float:
        return scores(rows, cost.predict(rows, kind)).task_mape

    return pd.DataFrame(
        [
            asdict(Calibration(kind, calibrated.scales[kind], mape(model, kind), mape(calibrated, kind)))
            for kind in MODELS
        ]
    )


def noise_floor(first: Sequence[Row], second: Sequence[Row]) -> Scores:
    """Two measurements of the same programs: the second's times scored as a prediction of the first's, over
    the steps both hold (matched by program, sizes, assignment and step)."""
    second_by_key = {row.key(): row for row in second}
    pairs = [(row, second_by_key[row.key()]) for row in first if row.key() in second_by_key]
    if not pairs:
        raise DcaccelError("costmodel noise: the two measurements share no step")
    return scores([a for a, _ in pairs], times([b for _, b in pairs]))
