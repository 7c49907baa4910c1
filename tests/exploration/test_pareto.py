"""Pareto fronts over exploration results."""

import numpy as np
import pandas as pd
import pytest

from dcaccel.exploration.pareto import pareto_front, pareto_mask


def test_dominated_rows_are_dropped():
    values = np.array([[1, 5], [2, 2], [3, 3], [5, 1], [2, 2]])
    assert pareto_mask(values).tolist() == [True, True, False, True, True]


def test_single_row_is_its_own_front():
    assert pareto_mask(np.array([[3.0, 4.0]])).tolist() == [True]


def test_front_is_sorted_by_the_objectives():
    results = pd.DataFrame({"makespan": [30, 10, 20, 40], "offchip_io": [1, 9, 5, 2], "name": list("abcd")})
    front = pareto_front(results, ("makespan", "offchip_io"))
    assert front["name"].tolist() == ["b", "c", "a"]


def test_unknown_objective_is_named():
    with pytest.raises(KeyError, match="power"):
        pareto_front(pd.DataFrame({"makespan": [1]}), ("makespan", "power"))
