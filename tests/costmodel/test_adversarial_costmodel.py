"""Adversarial cost-model files and measured rows (issue 22's bar applied to dcaccel.costmodel): each ends
in one line naming what is wrong, never a traceback (an out-of-range tree child, an empty tree, a shift
without a value, a negative shape, a network too wide to allocate) nor a silently wrong number (NaN or
negative weights and factors, NaN, infinite or negative times, a size 1.5 read as 1, tokens "ABC" read as
three tokens)."""

import json

import pytest

from dcaccel.costmodel.features import CATEGORICAL
from dcaccel.costmodel.measure import Row
from dcaccel.costmodel.models import MAX_WIDTH, AnalyticModel, BoostedModel, CostModel, MissCost, SequenceModel
from dcaccel.errors import DcaccelError

from .rows import row

#: A boosted model of one tree: the root splits feature 0 at 10 into two leaves.
BOOSTED = {
    "target": "per-unit",
    "loss": "squared",
    "categories": {name: [] for name in CATEGORICAL},
    "baseline": 1.0,
    "trees": [
        {
            "feature": [0, -1, -1],
            "threshold": [10.0, 0.0, 0.0],
            "missing_left": [1, 0, 0],
            "left": [1, 0, 0],
            "right": [2, 0, 0],
            "value": [0.0, 0.5, 1.5],
        }
    ],
    "floors": {"parallel": 0.0, "serial": 0.0},
    "misses": MissCost().to_json(),
}
SEQUENCE = {
    "target": "per-unit",
    "loss": "squared",
    "vocabulary": ["MAP"],
    "width": 2,
    "state": {"head.bias": {"shape": [1], "values": [0.0]}, "shift": {"shape": [], "values": [0.5]}},
    "floors": {"parallel": 0.0, "serial": 0.0},
    "misses": MissCost().to_json(),
}


def _edited(data: dict, edit) -> dict:
    copied = json.loads(json.dumps(data))
    edit(copied)
    return copied


@pytest.mark.parametrize(
    ("factor", "message"),
    [(float("nan"), "is nan"), (-1.0, "is -1.0"), (float("inf"), "is inf"), (0.0, "is 0.0")],
)
def test_analytic_factor_must_be_finite_and_positive(factor, message):
    with pytest.raises(DcaccelError, match=f"the analytic factor {message}, expected a finite number > 0"):
        AnalyticModel.from_json({"factor": factor, "copy_factor": 1.0})


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["trees"][0]["left"].__setitem__(0, 10**6),  # IndexError
        lambda d: d["trees"][0]["left"].__setitem__(0, -5),  # silently read the last node
        lambda d: d["trees"][0].update(left=[0, 0, 0], right=[0, 0, 0]),  # a cycle: stopped after n steps
        lambda d: d["trees"][0].update({key: [] for key in d["trees"][0]}),  # IndexError
        lambda d: d["trees"][0]["value"].__setitem__(1, float("nan")),
        lambda d: d["trees"][0]["threshold"].__setitem__(0, float("nan")),
    ],
    ids=["child-out-of-range", "child-negative", "cycle", "empty", "nan-leaf", "nan-threshold"],
)
def test_malformed_tree_refused(edit):
    assert BoostedModel.from_json(BOOSTED).trees[0]["left"] == [1, 0, 0]
    with pytest.raises(DcaccelError, match="a tree of the boosted model is malformed"):
        BoostedModel.from_json(_edited(BOOSTED, edit))


def test_unknown_target_refused():
    with pytest.raises(DcaccelError, match="the target is 'log', expected one of time, per-unit"):
        BoostedModel.from_json(_edited(BOOSTED, lambda d: d.update(target="log")))


@pytest.mark.parametrize(("model", "data"), [(BoostedModel, BOOSTED), (SequenceModel, SEQUENCE)])
def test_unknown_loss_refused(model, data):
    with pytest.raises(DcaccelError, match="the loss is 'mape', expected one of squared, absolute, relative$"):
        model.from_json(_edited(data, lambda d: d.update(loss="mape")))


@pytest.mark.parametrize(("model", "data"), [(BoostedModel, BOOSTED), (SequenceModel, SEQUENCE)])
@pytest.mark.parametrize(
    ("floors", "message"),
    [
        ({"parallel": float("nan"), "serial": 0.0}, "the parallel floor is nan"),
        ({"parallel": 0.0, "serial": float("inf")}, "the serial floor is inf"),
        ({"parallel": -1.0, "serial": 0.0}, "a floor is below 0"),
        ({"parallel": 0.0}, "'serial'"),
    ],
)
def test_bad_floors_refused(model, data, floors, message):
    assert model.from_json(data).floors.parallel == 0.0
    with pytest.raises((DcaccelError, KeyError), match=message):
        model.from_json(_edited(data, lambda d: d.update(floors=floors)))


def test_nan_baseline_refused():
    with pytest.raises(DcaccelError, match="the boosted baseline is nan"):
        BoostedModel.from_json(_edited(BOOSTED, lambda d: d.update(baseline=float("nan"))))


def test_prediction_that_overflows_is_refused():
    model = CostModel(
        AnalyticModel(1.0), BoostedModel.from_json(_edited(BOOSTED, lambda d: d.update(baseline=1e6))), None
    )
    rows = [row("f", "p", "mv", "s", 4.0, 8.0)]
    assert model.predict(rows, "analytic").tolist() == [4.0]
    with pytest.raises(DcaccelError, match="the boosted model predicts a time that is not a finite number"):
        model.predict(rows, "boosted")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["state"]["shift"].update(shape=[0], values=[]), "weights are malformed"),
        (lambda d: d["state"]["head.bias"].update(shape=[-1, -1]), "weights are malformed"),
        (lambda d: d["state"]["head.bias"].update(values=[float("nan")]), "weights are malformed"),
        (lambda d: d.update(width=10**7), f"width is 10000000, expected 1 to {MAX_WIDTH}"),
        (lambda d: d.update(width=0), f"width is 0, expected 1 to {MAX_WIDTH}"),
    ],
)
def test_malformed_sequence_model_refused(edit, message):
    assert SequenceModel.from_json(SEQUENCE).width == 2
    with pytest.raises(DcaccelError, match=message):
        SequenceModel.from_json(_edited(SEQUENCE, edit))


def test_model_file_that_is_a_folder(tmp_path):
    with pytest.raises(DcaccelError, match=r"costmodel model .*: is a folder$"):
        CostModel.load(tmp_path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["timing"].update(median_ns=float("nan")),
            "timing.median_ns is nan, expected a finite number >= 0",
        ),
        (lambda d: d["timing"].update(p90_ns=float("inf")), "timing.p90_ns is inf, expected a finite number >= 0"),
        (lambda d: d["timing"].update(min_ns=-5.0), "timing.min_ns is -5.0, expected a finite number >= 0"),
        (lambda d: d["timing"].update(n=0), "timing.n is 0, expected an integer >= 1"),
        (lambda d: d["features"].update(work=float("nan")), "feature work is nan, expected a finite number"),
        (lambda d: d["sizes"].update(K=1.5), "size K is 1.5, expected an integer"),
        (lambda d: d["sizes"].update(K=True), "size K is True, expected an integer"),
        (lambda d: d.update(tokens="ABC"), "tokens must be a list of strings"),
    ],
)
def test_bad_row_refused(edit, message):
    data = row("f", "p", "mv", "s", 4.0, 8.0).to_json()
    assert Row.from_json(data).timing.median_ns == 8.0
    with pytest.raises(DcaccelError, match=f"^costmodel row s: {message}$"):
        Row.from_json(_edited(data, edit))


def test_a_step_timed_as_zero_is_still_read():
    """The timer reads a very short step as 0 ns; the models count it as 1 ns (models.times)."""
    data = _edited(row("f", "p", "mv", "s", 4.0, 8.0).to_json(), lambda d: d["timing"].update(median_ns=0.0))
    assert Row.from_json(data).timing.median_ns == 0.0
