"""explore(..., arch=...): every point costed on one accelerator description; the abstract columns
do not depend on it; a result file is resumed only on the same description."""

from __future__ import annotations

import pytest

from dcaccel.architecture import load
from dcaccel.cost.schedule import cost_schedule
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


@pytest.mark.slow
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
        costs = cost_schedule(schedule(dag, row.pes, row.scheduler), arch)
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


@pytest.mark.slow
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
    with pytest.raises(DcaccelError, match="architecture tpu whose clock_mhz is 700.0, this sweep's is 100.0"):
        explore("conv-seed", {"Conv": ["mv"]}, arch=slower, resume=True, **options)


@pytest.mark.parametrize("name", ["abstract", "eyeriss", "tpu", "cgra"])
def test_every_point_lies_under_its_roofline(sweeps, name):
    """Throughput never beats the units' peak, off-chip traffic never beats the bandwidth (per cycle)."""
    arch = load(name)
    for row in sweeps[name].itertuples():
        assert row.macs > 0 and row.offchip_bytes > 0
        assert row.macs / row.makespan_cycles <= arch.peak_macs_per_cycle(row.pes)
        if arch.offchip_bandwidth is not None:
            assert row.offchip_bytes / row.makespan_cycles <= arch.offchip_bandwidth


@pytest.fixture(scope="module")
def several(sweeps):
    """One sweep over three architectures (a variant of eyeriss among them) and both schedulers plus HEFT,
    counting the DAGs built."""
    from dcaccel.exploration import evaluation as sweep

    built = []
    original = sweep.build_dag

    def counting(*args, **kwargs):
        built.append(args[1])
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sweep, "build_dag", counting)
        frame = explore(
            "conv-seed",
            {"Conv": ["mv", "lmv"]},
            pes=[16],
            scheduler=("streaming", "list", "heft"),
            progress=False,
            arch=["abstract", "eyeriss", "tpu"],
        )
    return frame, built


@pytest.mark.slow
def test_several_architectures_share_each_dag(several):
    frame, built = several
    assert [str(assignment) for assignment in built] == ["Conv=mv", "Conv=lmv"]
    assert list(dict.fromkeys(frame["architecture"])) == ["abstract", "eyeriss", "tpu"]
    keys = ["assignment", "pes", "scheduler", "architecture"]
    assert not frame.duplicated(keys).any()


@pytest.mark.parametrize("name", ["abstract", "eyeriss", "tpu"])
def test_several_architectures_give_each_one_sweep(sweeps, several, name):
    """The homogeneous points on each architecture are those of a sweep on it alone."""
    frame, _ = several
    mine = frame[(frame["architecture"] == name) & (frame["scheduler"] != "heft")].reset_index(drop=True)
    alone = sweeps[name]
    assert mine.drop(columns=TIMING).equals(alone.drop(columns=TIMING))


@pytest.mark.parametrize(("name", "units"), [("abstract", 16), ("eyeriss", 168), ("tpu", 257)])
def test_heft_runs_on_the_architecture_units(several, conv_seed, name, units):
    frame, _ = several
    rows = frame[(frame["architecture"] == name) & (frame["scheduler"] == "heft")]
    assert rows["pes"].tolist() == [units, units]
    arch = load(name)
    for row in rows.itertuples():
        dag = extract(conv_seed.lower({"Conv": row.assignment.removeprefix("Conv=")}))
        result = schedule(dag, 16, "heft", arch=arch)
        costs = cost_schedule(result, arch)
        assert (row.makespan, row.makespan_cycles, row.pes) == (result.makespan, costs.makespan_cycles, units)
        assert row.energy_pj == pytest.approx(costs.energy_total_pj)


@pytest.mark.slow
def test_parameters_sweep_each_architecture(conv_seed, tmp_path):
    """arch_params: the product of the values on every architecture, each variant costed as itself, and a
    resumed sweep finds every point stored (HEFT on a design of fixed counts: one point for all P)."""
    path = tmp_path / "r.sqlite"
    options = {
        "pes": [4, 8],
        "scheduler": ("list", "heft"),
        "progress": False,
        "arch": ["eyeriss", "cgra"],
        "arch_params": {"offchip.bandwidth_bytes_per_cycle": [4, 64]},
        "results": path,
    }
    frame = explore("conv-seed", {"Conv": ["mv"]}, **options)
    labels = [f"{name}[offchip.bandwidth_bytes_per_cycle={value}]" for name in ("eyeriss", "cgra") for value in (4, 64)]
    assert list(dict.fromkeys(frame["architecture"])) == labels
    assert frame[frame["scheduler"] == "heft"]["pes"].tolist() == [168, 168, 65, 65]
    assert len(frame) == 2 * 4 + 4
    dag = extract(conv_seed.lower({"Conv": "mv"}))
    for row in frame.itertuples():
        name, value = row.architecture.split("[")[0], int(row.architecture.split("=")[1].rstrip("]"))
        memories = load(name).to_dict()["memories"]
        memories[load(name).offchip]["bandwidth_bytes_per_cycle"] = value
        arch = load(name).replace(memories=memories)
        heft = row.scheduler == "heft"
        costs = cost_schedule(schedule(dag, 4 if heft else row.pes, row.scheduler, arch=arch if heft else None), arch)
        assert (row.makespan_cycles, row.energy_pj) == (costs.makespan_cycles, pytest.approx(costs.energy_total_pj))
    for name in ("eyeriss", "cgra"):
        slow, fast = (frame[frame["architecture"] == f"{name}[offchip.bandwidth_bytes_per_cycle={v}]"] for v in (4, 64))
        assert (slow["makespan_cycles"].to_numpy() >= fast["makespan_cycles"].to_numpy()).all()
    resumed = explore("conv-seed", {"Conv": ["mv"]}, resume=True, **options)
    assert resumed.drop(columns=TIMING).equals(frame.drop(columns=TIMING))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"arch": "eyeriss", "pes": [256]}, "explore: architecture eyeriss has 168 units, fewer than P = 256"),
        ({"arch": "abstract", "arch_params": {"units.pe.count": [8]}, "pes": [16]}, "has 8 units, fewer than P = 16"),
        ({"arch": [], "pes": [4]}, "explore: arch is empty"),
        ({"arch": "eyeriss", "arch_params": {"units.pe.cnt": [1]}}, "parameter units.pe.cnt: no field 'cnt'"),
        ({"arch": "eyeriss", "arch_params": {"units.pe.count": [0]}}, "eyeriss[units.pe.count=0]: units.pe.count"),
        ({"arch": "nope"}, "unknown architecture 'nope'"),
    ],
)
def test_architecture_errors_come_first(options, message, monkeypatch):
    from dcaccel.exploration import evaluation as sweep

    monkeypatch.setattr(sweep, "build_dag", lambda *args: pytest.fail("a DAG was built"))
    with pytest.raises(DcaccelError) as raised:
        explore("conv-seed", {"Conv": ["mv"]}, progress=False, **options)
    assert message in str(raised.value)


def test_one_label_one_description():
    from dcaccel.exploration.grid import architectures

    assert [arch.label for arch in architectures(["tpu", "tpu", load("tpu")])] == ["tpu"]
    with pytest.raises(DcaccelError, match="two different architectures are labelled 'tpu'"):
        architectures(["tpu", load("tpu").replace(clock_mhz=1)])
