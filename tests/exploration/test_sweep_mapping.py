"""explore(..., strategy="mapping"): the mapping search's rows in the results table's form, one per layer
and one for the whole network per architecture, equal to what dcaccel.map finds."""

from __future__ import annotations

import math

import pytest

import dcaccel
from dcaccel.errors import DcaccelError
from dcaccel.exploration import explore
from dcaccel.exploration.points import columns

COMPUTED = ["workload", "assignment", "granularity", "pes", "scheduler", "onchip_memory", "architecture"]
COMPUTED += ["makespan_cycles", "makespan_us", "energy_pj", "partition_policy", "lower_seconds"]


@pytest.fixture(scope="module")
def mapped():
    """conv-seed (one Conv), P = 16, EDP, on eyeriss and tpu."""
    return explore("conv-seed", pes=[16], strategy="mapping", arch=["eyeriss", "tpu"], objective="edp")


@pytest.mark.slow
def test_rows_and_columns(mapped):
    assert list(mapped.columns) == columns()
    assert list(mapped["architecture"]) == ["eyeriss", "eyeriss", "tpu", "tpu"]
    assert list(mapped["granularity"]) == ["layer", "network"] * 2
    uncomputed = [name for name in columns() if name not in COMPUTED]
    assert mapped[uncomputed].isna().all().all()


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["eyeriss", "tpu"])
def test_rows_are_the_search(mapped, arch):
    result = dcaccel.map("conv-seed", arch, "edp", pes=(16,))
    rows = mapped[mapped["architecture"] == arch]
    layer, network = rows.iloc[0], rows.iloc[1]
    (searched,) = result.layers
    best = result.best[searched.layer]
    assert layer["assignment"] == searched.mapping and layer["assignment"].startswith(f"{searched.layer} = ")
    assert (layer["pes"], layer["scheduler"]) == (best.pes, best.scheduler)
    assert (layer["makespan_cycles"], layer["energy_pj"]) == (searched.makespan_cycles, searched.energy_pj)
    assert network["assignment"] == f"{searched.layer}={best.implementation}"
    assert (network["makespan_cycles"], network["energy_pj"]) == (
        result.total.makespan_cycles,
        result.total.energy_pj,
    )
    assert math.isclose(network["makespan_us"], network["makespan_cycles"] / dcaccel.architecture.load(arch).clock_mhz)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"objective": "work"}, "the mapping strategy's objective is one of makespan, energy, edp, not 'work'"),
        ({"partition_policy": "greedy"}, "the mapping strategy takes no partition policy"),
        ({"arch": "abstract"}, "has no on-chip capacity"),
        ({"arch": []}, "explore: arch is empty"),
    ],
)
def test_bad_options(options, message):
    options = {"arch": "eyeriss", **options}
    with pytest.raises(DcaccelError, match=message):
        explore("conv-seed", pes=[16], strategy="mapping", **options)


@pytest.mark.slow
def test_the_search_runs_on_the_pool_and_resumes_from_its_store(mapped, tmp_path, monkeypatch):
    """The layers are the assignments of the process pool; their rows are stored, and a resumed study
    evaluates nothing and gives the same rows."""
    from dcaccel.exploration import run
    from dcaccel.exploration.store import ResultStore

    timing = [name for name in columns() if name.endswith("_seconds")]
    path = tmp_path / "m.sqlite"
    options = {"pes": [16], "strategy": "mapping", "arch": "eyeriss", "objective": "edp", "results": str(path)}
    started = []
    make_executor = run.make_executor
    monkeypatch.setattr(run, "make_executor", lambda kind, *args: started.append(kind) or make_executor(kind, *args))
    pooled = explore("conv-seed", executor="process", workers=1, progress=False, **options)
    assert started == ["process"]
    local = mapped[mapped["architecture"] == "eyeriss"].reset_index(drop=True)
    assert pooled.drop(columns=timing).equals(local.drop(columns=timing))
    with ResultStore(path, {}, resume=True) as store:
        (stored,) = store.mapped("conv-seed").values()
    assert [(row.architecture, row.mapping, row.makespan_cycles) for row in stored] == [
        ("eyeriss", local["assignment"][0], local["makespan_cycles"][0])
    ]
    monkeypatch.setattr(run, "make_executor", lambda *args: pytest.fail("a layer was searched again"))
    resumed = explore("conv-seed", resume=True, progress=False, **options)
    assert resumed.drop(columns=timing).equals(local.drop(columns=timing))
