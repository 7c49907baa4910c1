import json
import math
from dataclasses import replace

import numpy as np
import pytest

from dcaccel.costmodel.data import SHIPPED_ROWS
from dcaccel.costmodel.features import CACHE, CATEGORICAL, feature_matrix
from dcaccel.costmodel.measure import read_rows
from dcaccel.costmodel.models import (
    LEAST_MISS_COST,
    VERSION,
    AnalyticModel,
    BoostedModel,
    CostModel,
    Floors,
    MissCost,
    SequenceModel,
    above_fixed,
    mean_loss,
    program_weights,
    relative_scale,
    times,
)
from dcaccel.errors import DcaccelError

from .rows import ATOMIC_NS, CONSTANTS, PRICES, RATES, missing, row


@pytest.fixture(scope="module")
def shipped():
    return read_rows(SHIPPED_ROWS)


@pytest.fixture(scope="module")
def small(shipped):
    """Rows of two families of the shipped set (seconds to train on)."""
    return [r for r in shipped if r.family in ("conv-seed", "products")]


@pytest.fixture(scope="module")
def trained(small):
    return CostModel.train(small)


def test_shipped_set_has_every_family(shipped):
    from dcaccel.costmodel.evaluate import FAMILIES

    assert {r.family for r in shipped} == set(FAMILIES)
    assert all(r.timing.median_ns > 0 and r.timing.n >= 10 for r in shipped)


def test_analytic_factor_is_geometric_mean():
    rows = [row("f", "w", "a", "t0", 10, 20.0), row("f", "w", "a", "t1", 10, 80.0)]
    assert AnalyticModel().fit(rows).factor == pytest.approx(4.0)  # sqrt(2 * 8)


def test_analytic_copies_are_scaled_per_byte():
    copy = row("f", "w", "a", "c0", 10, 80.0)
    copy.features.update(kind="copy", bytes_out=40.0)  # 2 ns per byte
    model = AnalyticModel().fit([row("f", "w", "a", "t0", 10, 30.0), copy])
    assert (model.factor, model.copy_factor) == pytest.approx((3.0, 2.0))
    assert model.predict([copy]).tolist() == pytest.approx([80.0])


@pytest.mark.parametrize(("target", "extrapolates"), [("per-unit", True), ("over-misses", True), ("time", False)])
def test_per_unit_target_extrapolates_in_work(target, extrapolates):
    """Steps of 3 ns per element of work, 10 to 80 elements: trees predict a constant past the largest
    training value, so only the targets per unit (and over the miss cost, per unit) predict a step of 8,000
    elements near 24,000 ns."""
    rows = [row("f", "w", "a", f"t{i}", work, 3.0 * work) for i, work in enumerate(range(10, 81, 5))]
    large = row("f", "w", "a", "t", 8000, 24000.0)
    predicted = BoostedModel(target=target, floored=False, iterations=50).fit(rows).predict([large])[0]
    assert (abs(predicted - 24000.0) / 24000.0 < 0.1) == extrapolates


@pytest.mark.parametrize(("leaf_rows", "distinct"), [(2, 2), (8, 2), (9, 1), (20, 1)])
def test_leaf_rows_bound_what_the_trees_tell_apart(leaf_rows, distinct):
    """16 steps, 8 at 1 ns per element and 8 at 3, told apart by their work: a split needs ``leaf_rows`` rows
    on each side, so leaves of 9 or more rows cannot separate them and every step gets one time per unit."""
    rows = [row("f", f"w{i}", "a", "t", 10 + (i >= 8), (10 + (i >= 8)) * (3.0 if i >= 8 else 1.0)) for i in range(16)]
    model = BoostedModel(loss="squared", floored=False, iterations=20, leaf_rows=leaf_rows).fit(rows)
    per_unit = model.predict(rows) / np.array([r.analytic for r in rows])
    assert len(np.unique(per_unit.round(6))) == distinct


@pytest.mark.parametrize(("loss", "per_unit"), [("squared", 2.0), ("absolute", 2.0), ("relative", 1.0)])
def test_each_loss_fits_its_constant(loss, per_unit):
    """Steps the features cannot tell apart at 1, 2 and 4 ns per element (5 of each): the squared error of the
    logarithm is least at the geometric mean (2), the absolute error at the median (2), the relative error
    |predicted - measured| / measured at 1 (total 0 + 5 * 1/2 + 5 * 3/4 against 5 * 1 + 0 + 5 * 1/2 at 2).
    Each step is a program of its own: the program weights are alike."""
    rows = [row("f", f"w{i}", "a", "t", 10, 10.0 * speed) for i, speed in enumerate([1.0, 2.0, 4.0] * 5)]
    predicted = BoostedModel(loss=loss, floored=False, iterations=20).fit(rows).predict(rows[:1])[0]
    assert predicted == pytest.approx(10.0 * per_unit, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("kind", [BoostedModel, SequenceModel])
def test_a_step_of_a_few_elements_takes_its_floor(kind):
    """Maps of 450 ns plus 1 ns per element from 10 to 10,000 elements, and memcpy copies of 30 ns plus 0.1 ns
    per byte: each kind's floor is fitted, and a map of one element is predicted near 451 ns, a copy of 4 bytes
    near 30 ns, where a time per unit learned from the larger steps alone gives far less."""
    maps = [row("f", "w", "a", f"t{w}", w, 450.0 + w) for w in np.geomspace(10, 10_000, 30).round()]
    copies = [row("f", "w", "a", f"c{w}", w, 30.0 + 0.4 * w) for w in np.geomspace(10, 10_000, 30).round()]
    for copy in copies:
        copy.features.update(kind="copy", implementation="MemcpyCPU", bytes_out=4 * copy.analytic)
    model = kind().fit(maps + copies)
    assert model.floors.parallel == pytest.approx(450.0 + 10.0, rel=0.02)
    assert model.floors.serial == pytest.approx(30.0 + 4.0, rel=0.02)
    tiny_map, tiny_copy = row("f", "w", "a", "t1", 1, 451.0), row("f", "w", "a", "c1", 1, 30.4)
    tiny_copy.features.update(kind="copy", implementation="MemcpyCPU", bytes_out=4.0)
    predicted = model.predict([tiny_map, tiny_copy])
    assert predicted == pytest.approx([451.0, 30.4], rel=0.15)  # the floors hold the smallest steps' elements too
    unfloored = kind(floored=False).fit(maps + copies).predict([tiny_map])[0]
    assert unfloored < 0.5 * 451.0


@pytest.mark.parametrize(
    ("loss", "value"), [("squared", math.log(2) ** 2), ("absolute", math.log(2)), ("relative", 1.0)]
)
def test_sequence_losses(loss, value):
    """A prediction twice the measured time (its logarithm off by log 2) costs log(2)^2, log 2 or 100%."""
    import torch

    error = torch.full((3,), math.log(2))
    assert mean_loss(loss, error).item() == pytest.approx(value, rel=1e-6)


def test_rows_without_a_feature_refused(small):
    features = dict(small[0].features)
    features.pop("stride_bytes")
    with pytest.raises(DcaccelError, match="a row has no feature 'stride_bytes' .*refeature"):
        feature_matrix([features], {"kind": [], "op": [], "implementation": []})


@pytest.mark.parametrize("kind", ["boosted", "sequence"])
def test_learned_models_fit_their_training_rows(trained, small, kind):
    error = np.abs(trained.predict(small, kind) - times(small)) / times(small)
    assert np.median(error) < 0.5


@pytest.mark.parametrize("kind", ["analytic", "boosted", "sequence"])
def test_saved_model_predicts_the_same(trained, small, tmp_path, kind):
    path = tmp_path / "model.json"
    trained.save(path)
    loaded = CostModel.load(path)
    np.testing.assert_allclose(loaded.predict(small, kind), trained.predict(small, kind), rtol=1e-5)


def test_unknown_model_kind_refused(trained, small):
    with pytest.raises(DcaccelError, match="no model 'gbm'"):
        trained.predict(small, "gbm")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda data: data.update(format="other"), "not a dcaccel-costmodel file"),
        (lambda data: data.update(version=VERSION - 1), f"not a dcaccel-costmodel file of version {VERSION}$"),
        (lambda data: data["boosted"]["trees"][0].update(feature=[99]), "malformed"),
        (lambda data: data["sequence"]["state"]["shift"].update(values=[1.0, 2.0]), "malformed"),
        (lambda data: data.pop("analytic"), "'analytic' missing"),
        (lambda data: data["boosted"].pop("misses"), "'misses' missing"),
        (lambda data: data["sequence"]["misses"]["per_miss"].update(l1_misses=math.inf), "price of a miss of l1"),
        (lambda data: data["scales"].update(boosted=0.0), "scale of the boosted model is 0.0, expected .* > 0"),
        (lambda data: data["scales"].update(sequence=math.nan), "scale of the sequence model is nan"),
        (lambda data: data["scales"].pop("analytic"), r"scales are of \['boosted', 'sequence'\]"),
        (lambda data: data["scales"].update(gbm=1.0), "expected one of each of"),
        (lambda data: data["scales"].update(boosted="2.5"), "scale of the boosted model is '2.5', expected a number"),
        (lambda data: data["scales"].update(analytic=True), "scale of the analytic model is True, expected a number"),
        (lambda data: data.update(scales=[1.0, 1.0, 1.0]), "scales is list, expected an object"),
        (lambda data: data.pop("calibrated_on"), "'calibrated_on' missing"),
        (lambda data: data["calibrated_on"].update(lenet=True), r"calibrated_on\['lenet'\] is True, expected a whole"),
        (lambda data: data["calibrated_on"].update(lenet=2.5), r"calibrated_on\['lenet'\] is 2.5"),
        (lambda data: data["trained_on"].update(lenet=-3), r"trained_on\['lenet'\] is -3"),
        (lambda data: data.update(trained_on=[]), "trained_on is list, expected an object"),
    ],
)
def test_bad_model_file_refused(trained, tmp_path, edit, message):
    data = json.loads(json.dumps(trained.to_json()))  # a copy: the edits leave the shared model as it is
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DcaccelError, match=message) as refused:
        CostModel.load(path)
    assert str(refused.value).startswith(f"costmodel model {path}: ") and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("predicted", "measured", "expected"),
    [
        ([10.0, 20.0, 40.0], [13.0, 26.0, 52.0], 1.3),  # one factor apart: that factor
        ([10.0], [7.7], 0.77),
        # the median of the ratios 0.5, 1 and 3 weighted 2, 1 and 1/3 (predicted / measured), not their median 1
        ([10.0, 10.0, 10.0], [5.0, 10.0, 30.0], 0.5),
    ],
)
def test_relative_scale_is_the_factor_of_least_relative_error(predicted, measured, expected):
    predicted, measured = np.array(predicted), np.array(measured)
    scale = relative_scale(predicted, measured)
    assert scale == pytest.approx(expected)
    grid = np.linspace(0.1, 5.0, 4901)
    errors = [np.mean(np.abs(c * predicted - measured) / measured) for c in grid]
    assert np.mean(np.abs(scale * predicted - measured) / measured) <= min(errors) + 1e-12


def test_a_model_is_not_calibrated_until_asked(trained):
    assert trained.scales == {"analytic": 1.0, "boosted": 1.0, "sequence": 1.0}
    assert trained.calibrated_on == {}


@pytest.mark.parametrize("kind", ["analytic", "boosted", "sequence"])
@pytest.mark.parametrize("clock", [0.77, 1.6])
def test_calibration_follows_a_machine_at_another_clock(trained, small, kind, clock):
    """The same steps measured on a machine ``clock`` times as slow: every model's scale is ``clock`` times its
    scale on the rows as measured, and its predictions are ``clock`` times as long; nothing else changes."""
    other = [replace(r, timing=replace(r.timing, median_ns=r.timing.median_ns * clock)) for r in small]
    here, there = trained.calibrated(small), trained.calibrated(other)
    assert there.scales[kind] == pytest.approx(clock * here.scales[kind])
    np.testing.assert_allclose(there.predict(small, kind), clock * here.predict(small, kind), rtol=1e-9)
    assert there.boosted is trained.boosted and there.trained_on == trained.trained_on
    assert there.calibrated_on == {"conv-seed": 30, "products": 84}


def test_calibrating_again_fits_anew(trained, small):
    """A calibrated model calibrated on other rows has the scales the model as trained gets on those rows."""
    fast = [replace(r, timing=replace(r.timing, median_ns=0.5 * r.timing.median_ns)) for r in small]
    again = trained.calibrated(small).calibrated(fast)
    assert again.scales == pytest.approx(trained.calibrated(fast).scales, rel=1e-12)


def test_an_infinite_count_of_rows_is_refused_in_one_line(trained, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(trained.to_json()).replace('"calibrated_on": {}', '"calibrated_on": {"lenet": 1e999}'))
    with pytest.raises(DcaccelError, match=r"calibrated_on\['lenet'\] is inf, expected a whole number") as refused:
        CostModel.load(path)
    assert "\n" not in str(refused.value)


def test_calibrated_model_survives_its_file(trained, small, tmp_path):
    calibrated = trained.calibrated(small[:7])
    path = tmp_path / "calibrated.json"
    calibrated.save(path)
    loaded = CostModel.load(path)
    assert (loaded.scales, loaded.calibrated_on) == (calibrated.scales, calibrated.calibrated_on)
    np.testing.assert_allclose(loaded.predict(small, "boosted"), calibrated.predict(small, "boosted"), rtol=1e-5)


def test_calibration_without_rows_refused(trained):
    with pytest.raises(DcaccelError, match="no rows to calibrate on"):
        trained.calibrated([])


def test_miss_cost_fits_the_prices_of_a_miss():
    rows = [
        missing(100.0, rates, copy=i % 3 == 0, vector=i % 3 == 1, atomic={2: 0.5, 14: 1.0, 22: 0.25}.get(i, 0.0))
        for i, rates in enumerate(RATES)
    ]
    cost = MissCost.fit(rows, Floors())
    assert {kind: getattr(cost, kind) for kind in MissCost.CONSTANTS} == pytest.approx(CONSTANTS)
    assert cost.per_miss == pytest.approx(PRICES)
    assert cost.atomic_ns == pytest.approx(ATOMIC_NS)
    assert cost.rates == pytest.approx({level: np.mean([rates[level] for rates in RATES]) for level in CACHE})
    # the atomic writes cost apart from the miss cost the models scale
    np.testing.assert_allclose(100.0 * cost.per_unit(rows) + cost.atomic(rows), times(rows))
    assert cost.atomic(rows)[14] == pytest.approx(100.0 * ATOMIC_NS)


def test_a_prediction_adds_the_atomic_writes_unscaled():
    """Trees that learned a factor of 2 over a miss cost of 1 ns a unit: 100 units with 75 atomic writes at 4 ns
    over a floor of 100 ns take 100 + 300 + 2 x 100 ns (900 if the atomic writes were scaled too)."""
    step = row("f", "w", "a", "t0", 100.0, 1000.0)
    step.features.update(dict.fromkeys(CACHE, 0.0), atomic_writes=75.0)
    model = BoostedModel(
        categories={name: [] for name in CATEGORICAL},
        baseline=2.0,
        floors=Floors(parallel=100.0),
        misses=MissCost(map_ns=1.0, atomic_ns=ATOMIC_NS),
    )
    assert model.predict([step])[0] == pytest.approx(600.0)


@pytest.mark.parametrize(("measured", "above"), [(1000.0, 600.0), (420.0, 21.0)])
def test_the_time_learned_is_above_the_floor_and_the_atomic_writes(measured, above):
    """A map of 100 units with 75 atomic writes at 4 ns (300 ns) over a floor of 100 ns: 1,000 ns measured
    leave 600 to learn; 420 ns would leave 20, less than 5% of the time (21 ns are kept)."""
    step = row("f", "w", "a", "t0", 100.0, measured)
    step.features["atomic_writes"] = 75.0
    cost = MissCost(atomic_ns=ATOMIC_NS)
    assert above_fixed([step], Floors(parallel=100.0), cost)[0] == pytest.approx(above)


def test_miss_cost_fits_the_relative_error():
    """Steps alike measured at 1 and 3 ns a unit, no misses: the relative error ((c - 1)/1)^2 + ((c - 3)/3)^2 is
    least at c = (1 + 1/3) / (1 + 1/9) = 1.2 (the absolute error's least squares would give 2)."""
    rows = [row("f", "w", "a", f"t{ns}", 100, ns) for ns in (100.0, 300.0)]
    for step in rows:
        step.features.update(dict.fromkeys(CACHE, 0.0))
    assert MissCost.fit(rows, Floors()).map_ns == pytest.approx(1.2)


def test_an_unread_rate_counts_the_training_mean():
    rows = [missing(100.0, dict.fromkeys(CACHE, rate)) for rate in (0.1, 0.3, 0.0)]
    rows[2].features.update(dict.fromkeys(CACHE, -1.0))  # measured, its window unread
    assert MissCost.fit(rows, Floors()).rates == pytest.approx(dict.fromkeys(CACHE, 0.2))  # the -1 left out
    cost = MissCost(map_ns=0.1, per_miss=dict(PRICES), rates=dict.fromkeys(CACHE, 0.25))
    unread = missing(100.0, dict.fromkeys(CACHE, -1.0))
    assert cost.per_unit([unread])[0] == pytest.approx(0.1 + 2 * 0.25 * sum(PRICES.values()))


def test_a_miss_cost_is_at_least_its_least():
    assert MissCost().per_unit([missing(100.0, dict.fromkeys(CACHE, 0.0))])[0] == LEAST_MISS_COST


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        # one kind only: the others take its constant, not 0
        ({"map_ns"}, {"map_ns": 0.1, "vector_ns": 0.1, "copy_ns": 0.1}),
        ({"copy_ns"}, {"map_ns": 0.05, "vector_ns": 0.05, "copy_ns": 0.05}),
        ({"vector_ns"}, {"map_ns": 0.02, "vector_ns": 0.02, "copy_ns": 0.02}),
        # no vectorised maps: they cost what the other maps do, not what copies do
        ({"map_ns", "copy_ns"}, {"map_ns": 0.1, "vector_ns": 0.1, "copy_ns": 0.05}),
        # no copies: they take the maps' constant
        ({"map_ns", "vector_ns"}, {"map_ns": 0.1, "vector_ns": 0.02, "copy_ns": 0.1}),
        # no maps that are not vectorised: they take the vectorised maps' constant, not the copies'
        ({"vector_ns", "copy_ns"}, {"map_ns": 0.02, "vector_ns": 0.02, "copy_ns": 0.05}),
    ],
)
def test_a_kind_absent_from_training_costs_what_the_nearest_present_one_does(kinds, expected):
    order = sorted(kinds)
    rows = [
        missing(100.0, rates, copy=kind == "copy_ns", vector=kind == "vector_ns")
        for i, rates in enumerate(RATES)
        for kind in [order[i % len(order)]]
    ]
    cost = MissCost.fit(rows, Floors())
    assert {kind: getattr(cost, kind) for kind in MissCost.CONSTANTS} == pytest.approx(expected)


@pytest.mark.parametrize(("target", "extrapolates"), [("over-misses", True), ("per-unit", False)])
def test_miss_cost_target_extrapolates_in_misses(target, extrapolates):
    """Steps alike but for their misses (0 to 0.5 per access at each level), the time their prices make: a
    step missing every access (3.5 times the largest training time) is predicted within 10% over the miss
    cost, and at most the largest per-unit time the trees saw per unit."""
    rows = [missing(100.0, rates) for rates in RATES]
    every = missing(100.0, dict.fromkeys(CACHE, 1.0))
    predicted = BoostedModel(target=target, floored=False, iterations=50).fit(rows).predict([every])[0]
    assert (abs(predicted - times([every])[0]) / times([every])[0] < 0.1) == extrapolates


def test_miss_cost_survives_its_file():
    cost = MissCost.fit([missing(100.0, rates, atomic=float(i == 3)) for i, rates in enumerate(RATES)], Floors())
    assert cost.atomic_ns == pytest.approx(ATOMIC_NS)
    assert MissCost.from_json(json.loads(json.dumps(cost.to_json()))) == cost
    for group, value, message in [
        ("vector_ns", -1.0, "price or rate of the miss cost is below 0"),
        ("per_miss", -1.0, "price or rate of the miss cost is below 0"),
        ("atomic_ns", -1.0, "price or rate of the miss cost is below 0"),
        ("rates", -0.5, "price or rate of the miss cost is below 0"),
        ("rates", 1.5, "mean rate of the miss cost is above 1 miss per access"),
    ]:
        data = json.loads(json.dumps(cost.to_json()))
        if group in (*MissCost.CONSTANTS, "atomic_ns"):
            data[group] = value
        else:
            data[group]["l2_misses"] = value
        with pytest.raises(DcaccelError, match=message):
            MissCost.from_json(data)


def test_program_weights_add_each_steps_share_of_its_program():
    """Program A of 100, 100 and 800 ns, program B of 500 and 500 ns: 2.5 rows per program, so each row's
    weight is 1 + 2.5 times its share (0.1, 0.1, 0.8; 0.5, 0.5)."""
    rows = [row("f", "w", "A", f"t{i}", 10, ns) for i, ns in enumerate([100.0, 100.0, 800.0])]
    rows += [row("f", "w", "B", f"t{i}", 10, 500.0) for i in range(2)]
    assert program_weights(rows) == pytest.approx([1.25, 1.25, 3.0, 2.25, 2.25])
    assert program_weights(rows[:1]) == pytest.approx([2.0])
