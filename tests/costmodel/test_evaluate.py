import json
import math
from dataclasses import replace

import numpy as np
import pytest

from dcaccel.costmodel.evaluate import fold_means, fold_table, noise_floor, remeasured, scores
from dcaccel.costmodel.measure import Timing
from dcaccel.errors import DcaccelError

from .rows import row

# two programs of one workload (assignments a, b), two steps each: totals a = 300, b = 130
ROWS = [
    row("f", "w", "a", "t0", 10, 100.0),
    row("f", "w", "a", "t1", 20, 200.0),
    row("f", "w", "b", "t0", 10, 100.0),
    row("f", "w", "b", "t1", 20, 30.0),
]


def test_perfect_prediction():
    result = scores(ROWS, np.array([100.0, 200.0, 100.0, 30.0]))
    assert (result.task_mape, result.median_ape, result.program_mape) == (0.0, 0.0, 0.0)
    assert result.kendall_tau == pytest.approx(1.0)
    assert (result.pair_order, result.tasks, result.programs) == (1.0, 4, 2)


def test_errors_and_pair_order():
    # each prediction 50 % high, then b predicted slower than a: the one pair in the wrong order
    result = scores(ROWS, np.array([150.0, 300.0, 150.0, 450.0]))
    assert result.task_mape == pytest.approx((0.5 + 0.5 + 0.5 + 14.0) / 4)
    assert result.program_mape == pytest.approx((0.5 + (600 - 130) / 130) / 2)
    assert result.pair_order == 0.0


def test_no_pairs_without_two_assignments():
    assert math.isnan(scores(ROWS[:2], np.array([100.0, 200.0])).pair_order)


def _measured_again(rows, b_total):
    """``rows`` measured again: program a as before, program b's two steps scaled to ``b_total``."""
    scale = b_total / 130.0
    return [
        replace(r, timing=Timing(r.timing.median_ns * (scale if r.assignment["n"] == "b" else 1), 0, 0, 0, 5))
        for r in rows
    ]


@pytest.mark.parametrize(
    ("again_totals", "predicted", "expected"),
    [
        ([], [100.0, 200.0, 100.0, 30.0], math.nan),  # no re-measurement: no pair to count
        ([200.0], [100.0, 200.0, 100.0, 30.0], 1.0),  # b still faster (200 < 300): the pair counts, and is right
        ([200.0], [150.0, 300.0, 150.0, 450.0], 0.0),  # ... and wrong
        ([200.0, 400.0], [100.0, 200.0, 100.0, 30.0], math.nan),  # the second puts b slower: no order to get
        ([300.0], [100.0, 200.0, 100.0, 30.0], math.nan),  # a tie measured again: not reproduced
    ],
)
def test_pair_order_over_the_pairs_measured_again_alike(again_totals, predicted, expected):
    again = remeasured(ROWS, [_measured_again(ROWS, total) for total in again_totals])
    result = scores(ROWS, np.array(predicted), again)
    assert result.pair_order == (1.0 if predicted[3] < 200 else 0.0)  # the metric over every pair is unchanged
    assert result.reproduced_pair_order == pytest.approx(expected, nan_ok=True)
    assert result.reproduced_pairs == (0 if math.isnan(expected) else 1)


@pytest.mark.parametrize(
    ("again", "kept"),
    [
        (ROWS[:2], {"a"}),  # b not measured again: its pair is not reproduced
        (ROWS[:3], {"a"}),  # b measured without its step t1: left out, not compared on the one step
        ([*ROWS, row("f", "w", "c", "t0", 10, 1.0)], {"a", "b"}),  # a program ROWS lacks: not used
    ],
)
def test_a_remeasurement_counts_the_programs_of_the_same_steps(again, kept):
    (totals,) = remeasured(ROWS, [again])
    assert {json.loads(run[2])["n"] for run in totals} == kept
    assert math.isnan(scores(ROWS, np.array([100.0, 200.0, 100.0, 30.0]), [totals]).reproduced_pair_order) == (
        "b" not in kept
    )


def test_a_remeasurement_of_other_programs_is_refused():
    other = [replace(r, program="v") for r in ROWS]
    with pytest.raises(DcaccelError, match="re-measurement 2 has no program measured with the same steps"):
        remeasured(ROWS, [ROWS, other])


def test_noise_floor_matches_steps():
    second = [r.__class__(**{**r.__dict__, "timing": Timing(r.timing.median_ns * 1.1, 0, 0, 0, 5)}) for r in ROWS[:3]]
    result = noise_floor(ROWS, second)
    assert result.tasks == 3
    assert result.task_mape == pytest.approx(0.1)


def test_noise_floor_refuses_disjoint_measurements():
    other = [r.__class__(**{**r.__dict__, "step": "x"}) for r in ROWS]
    with pytest.raises(DcaccelError, match="share no step"):
        noise_floor(ROWS, other)


def test_fold_table_holds_out_each_family():
    rows = [
        row(family, f"{family}{i}", shape, f"t{j}", work, work * speed)
        for family, speed in (("p", 2.0), ("q", 2.5), ("r", 3.0))
        for i in range(3)
        for shape in ("mv", "op")
        for j, work in enumerate((10.0 * (i + 1), 40.0 * (i + 1)))
    ]
    table = fold_table(rows)
    assert list(table["held out"].unique()) == ["p", "q", "r"]
    assert set(table["model"]) == {"analytic", "boosted", "sequence"}
    assert (table["tasks"] == 12).all()
    # times proportional to the work: the scaled analytic model orders every step right
    assert (table[table["model"] == "analytic"]["kendall_tau"] > 0.99).all()


def test_fold_table_refuses_unknown_family():
    with pytest.raises(DcaccelError, match="no rows of family 'x'"):
        fold_table(ROWS, ["x"])


def test_fold_means_average_every_metric_per_model():
    from dataclasses import asdict

    import pandas as pd

    table = pd.DataFrame(
        [
            {"held out": family, "model": model, **asdict(scores(ROWS, np.array(predicted)))}
            for family, predicted in (("f", [100.0, 200.0, 100.0, 30.0]), ("g", [150.0, 300.0, 150.0, 450.0]))
            for model in ("boosted", "analytic")
        ]
    )
    means = fold_means(table)
    assert list(means["model"]) == ["boosted", "analytic"]
    metrics = [
        "task_mape",
        "median_ape",
        "kendall_tau",
        "program_mape",
        "pair_order",
        "reproduced_pair_order",
    ]  # floats
    assert list(means.columns) == ["model", *metrics]
    # fold g: errors 0.5, 0.5, 0.5 and 14 (450 against 30)
    assert means.loc[0, "pair_order"] == 0.5 and means.loc[0, "task_mape"] == pytest.approx((0 + 15.5 / 4) / 2)
