"""explore(..., arch=...): every point costed on one accelerator description; the abstract columns
do not depend on it; a result file is resumed only on the same description."""

from __future__ import annotations

import pytest

from dcaccel.architecture import load
from dcaccel.dag import extract
from dcaccel.errors import DcaccelError
from dcaccel.exploration import explore
from dcaccel.scheduler import schedule

TIMING = ["lower_seconds", "extract_seconds", "schedule_seconds"]
ABSTRACT_COLUMNS = ["assignment", "pes", "scheduler", "makespan", "io_volume", "offchip_io", "area", "power"]


@pytest.fixture(scope="module")
def sweeps():
    """conv-seed, Conv=mv|lmv, P = 16, both schedulers, on every shipped design."""
    return {
        name: explore("conv-seed", {"Conv": ["mv", "lmv"]}, pes=[16], progress=False, arch=name)
        for name in ("abstract", "eyeriss", "tpu", "cgra")
    }


def test_abstract_columns_do_not_depend_on_the_architecture(sweeps):
    reference = sweeps["abstract"][ABSTRACT_COLUMNS]
    for frame in sweeps.values():
        assert frame[ABSTRACT_COLUMNS].equals(reference)


def test_abstract_is_the_schedule_itself(sweeps):
    frame = sweeps["abstract"]
    assert (frame["architecture"] == "abstract").all()
    assert (frame["makespan_cycles"] == frame["makespan"]).all()
    assert (frame["makespan_us"] == frame["makespan"] / 1000).all()  # 1000 MHz


@pytest.mark.parametrize("name", ["eyeriss", "tpu", "cgra"])
def test_columns_are_the_schedule_costs(sweeps, conv_seed, name):
    """Each row's columns are those of the same schedule costed directly (the design's on-chip capacity)."""
    frame = sweeps[name]
    arch = load(name)
    for row in frame.itertuples():
        dag = extract(conv_seed.lower({"Conv": row.assignment.removeprefix("Conv=")}))
        costs = schedule(dag, row.pes, row.scheduler, arch=arch).costs
        levels = costs.energy_by_level
        assert row.architecture == name
        assert row.makespan_cycles == costs.makespan_cycles
        assert row.energy_pj == pytest.approx(costs.energy_total_pj)
        parts = (row.offchip_energy_pj, row.onchip_energy_pj, row.local_energy_pj, row.link_energy_pj)
        assert parts == pytest.approx((levels["offchip"], levels["onchip"], levels["local"], levels["links"]))
        assert row.compute_energy_pj == pytest.approx(levels["compute"])
        assert row.area_mm2 == pytest.approx(arch.area_mm2(row.pes))
        assert row.power_w == pytest.approx(costs.average_power_w)
        shares = dict(part.split("=") for part in row.unit_utilisation.split(","))
        assert {unit: float(share) for unit, share in shares.items()} == pytest.approx(costs.utilisation, rel=1e-5)


def test_resume_adds_architectures_and_refuses_a_changed_one(tmp_path):
    """The architecture is part of a point's key: resuming with another one adds its points; a label whose
    description changed since the file was written is refused."""
    path = tmp_path / "sweep.sqlite"
    options = {"pes": [4], "scheduler": "list", "progress": False, "results": path}
    tpu = explore("conv-seed", {"Conv": ["mv"]}, arch="tpu", **options)
    both = explore("conv-seed", {"Conv": ["mv"]}, arch=["tpu", "abstract"], resume=True, **options)
    assert both["architecture"].tolist() == ["tpu", "abstract"]
    assert both.iloc[:1].drop(columns=TIMING).equals(tpu.drop(columns=TIMING))
    slower = load("tpu").replace(clock_mhz=100)
    with pytest.raises(DcaccelError, match="was written with architecture tpu="):
        explore("conv-seed", {"Conv": ["mv"]}, arch=slower, resume=True, **options)
