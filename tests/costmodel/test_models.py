import json

import numpy as np
import pytest

from dcaccel.costmodel.data import SHIPPED_ROWS
from dcaccel.costmodel.measure import read_rows
from dcaccel.costmodel.models import AnalyticModel, CostModel, times
from dcaccel.errors import DcaccelError

from .rows import row


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
        (lambda data: data["boosted"]["trees"][0].update(feature=[99]), "malformed"),
        (lambda data: data["sequence"]["state"]["shift"].update(values=[1.0, 2.0]), "malformed"),
        (lambda data: data.pop("analytic"), "'analytic' missing"),
    ],
)
def test_bad_model_file_refused(trained, tmp_path, edit, message):
    data = trained.to_json()
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DcaccelError, match=message):
        CostModel.load(path)
