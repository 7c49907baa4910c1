"""Pareto fronts over exploration results."""

from collections.abc import Sequence

import numpy as np
import pandas as pd

#: The default objectives, all minimised.
OBJECTIVES = ("makespan", "offchip_io", "pes", "onchip_memory")


def pareto_mask(values: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of ``values`` (n × d, minimised) that no other row dominates.

    A row dominates another when it is no worse in every column and better in at least one.
    Duplicate rows are all kept.
    """
    n = len(values)
    keep = np.ones(n, dtype=bool)
    for i in range(n):
        no_worse = np.all(values <= values[i], axis=1)
        better = np.any(values < values[i], axis=1)
        if np.any(no_worse & better):
            keep[i] = False
    return keep


def pareto_front(results: pd.DataFrame, objectives: Sequence[str] = OBJECTIVES) -> pd.DataFrame:
    """The rows of ``results`` on the Pareto front of ``objectives`` (all minimised), sorted by them."""
    missing = [name for name in objectives if name not in results.columns]
    if missing:
        raise KeyError(f"objectives not in the results: {missing}")
    mask = pareto_mask(results[list(objectives)].to_numpy(dtype=float))
    return results[mask].sort_values(list(objectives)).reset_index(drop=True)
