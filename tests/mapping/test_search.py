"""The mapping search on small layers: decoupled against exhaustive, and the report."""

import pytest

from dcaccel.errors import DcaccelError
from dcaccel.mapping import map_workload, parse


@pytest.fixture(scope="module")
def seed_results():
    options = {"objective": "edp", "pes": (16,), "tile_limit": 3}
    return {
        search: map_workload("conv-seed", "eyeriss", search=search, **options) for search in ("decoupled", "exhaustive")
    }


def test_decoupled_is_near_the_exhaustive_optimum_with_fewer_schedules(seed_results):
    decoupled, exhaustive = seed_results["decoupled"], seed_results["exhaustive"]
    assert decoupled.space_size == exhaustive.space_size
    assert exhaustive.evaluations == decoupled.layers[0].fitting * 4  # every fitting choice × 2 fusions × 2 schedulers
    assert decoupled.evaluations <= 4 * 3 * 4  # 4 groups of at most 3 task tiles, 4 on-chip choices each
    assert exhaustive.objective <= decoupled.objective <= 1.05 * exhaustive.objective


def test_report(seed_results):
    result = seed_results["decoupled"]
    data = result.to_json()
    assert set(data) >= {"space_size", "evaluations", "objective", "best", "seconds"}
    ((node, text),) = data["best"].items()
    assert parse(text) == result.best[node]
    row = result.table().iloc[0]
    assert row["objective"] == pytest.approx(result.objective)
    assert row["makespan_cycles"] * row["energy_pj"] == pytest.approx(result.objective)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"objective": "area"}, "unknown objective"),
        ({"search": "random"}, "unknown search"),
        ({"top_k": 0}, "top_k"),
        ({"arch": "abstract"}, "no on-chip capacity"),
    ],
)
def test_errors(arguments, message):
    with pytest.raises(DcaccelError, match=message):
        map_workload("conv-seed", **{"arch": "eyeriss", **arguments})
