"""explore(..., partition_policy=...): the partition as a dimension of the sweep. Every policy point is
the partition dcaccel.partition gives (same makespan, energy, transfers), its energy split adds up, a
design without a host moves nothing, and a result file keys points by their policy."""

from __future__ import annotations

import pytest

import dcaccel
from dcaccel.errors import DcaccelError
from dcaccel.exploration import explore
from dcaccel.exploration.points import inconsistency, typed

TIMING = ["lower_seconds", "extract_seconds", "schedule_seconds"]
POLICIES = ["none", "greedy", "min-region", "cost"]


@pytest.fixture(scope="module")
def sweeps():
    """conv-seed, Conv=mv|lmv, P = 16, HEFT, every policy, on cgra (a host) and abstract (none)."""
    return {
        arch: explore(
            "conv-seed",
            {"Conv": ["mv", "lmv"]},
            pes=[16],
            scheduler="heft",
            arch=arch,
            partition_policy=POLICIES,
            progress=False,
        )
        for arch in ("cgra", "abstract")
    }


@pytest.mark.parametrize("arch", ["cgra", "abstract"])
def test_rows_per_assignment_and_policy(sweeps, arch):
    frame = sweeps[arch]
    assert list(frame["partition_policy"]) == POLICIES * 2
    assert (frame["scheduler"] == "heft").all() and (frame["architecture"] == arch).all()
    for row in frame.itertuples(index=False):
        point = typed(tuple(row))
        assert inconsistency(point) is None
        assert point.host_energy_pj + point.accelerator_energy_pj + point.transfer_energy_pj == pytest.approx(
            point.energy_pj
        )


@pytest.mark.parametrize("policy", ["greedy", "min-region", "cost"])
@pytest.mark.parametrize("implementation", [pytest.param("mv", marks=pytest.mark.slow), "lmv"])
def test_policy_points_are_the_partitions(sweeps, policy, implementation):
    """The columns of a policy point are those of dcaccel.partition with the assignment as choices."""
    frame = sweeps["cgra"]
    split = dcaccel.partition("conv-seed", "cgra", policy, choices={"Conv": implementation}, pes=16)
    label = f"Conv={implementation}" if split.nodes[0].offloaded else f"Conv={implementation}@host"
    row = frame[(frame["partition_policy"] == policy) & (frame["assignment"] == label)]
    assert len(row) == 1
    row = row.iloc[0]
    assert row["makespan_cycles"] == split.makespan
    assert row["energy_pj"] == pytest.approx(split.energy_pj)
    assert row["transfer_volume"] == split.transfer_volume
    assert row["offloaded_work_share"] == pytest.approx(split.offloaded_work_share)
    energy = split.energy_split_pj
    assert (row["host_energy_pj"], row["accelerator_energy_pj"], row["transfer_energy_pj"]) == pytest.approx(
        (energy["host"], energy["accelerator"], energy["link"])
    )


def test_min_region_keeps_the_lone_conv_on_the_host(sweeps):
    """conv-seed is one Conv: one region of one operator, below min_nodes = 2."""
    frame = sweeps["cgra"].set_index(["partition_policy", "assignment"])
    kept = frame.loc[("min-region", "Conv=mv@host")]
    assert kept["offloaded_work_share"] == 0.0 and kept["transfer_volume"] == 0
    assert kept["host_energy_pj"] > kept["accelerator_energy_pj"]
    offloaded = frame.loc[("greedy", "Conv=mv")]
    assert offloaded["offloaded_work_share"] == 1.0 and offloaded["host_energy_pj"] == 0.0


def test_a_design_without_host_moves_nothing(sweeps):
    frame = sweeps["abstract"]
    columns = [c for c in frame.columns if c not in (*TIMING, "partition_policy")]
    plain = frame[frame["partition_policy"] == "none"][columns].reset_index(drop=True)
    for policy in POLICIES[1:]:
        assert frame[frame["partition_policy"] == policy][columns].reset_index(drop=True).equals(plain)
    assert (frame["offloaded_work_share"] == 1.0).all() and (frame["host_energy_pj"] == 0.0).all()


@pytest.mark.slow
def test_without_policy_the_points_are_the_plain_pipelines(sweeps):
    plain = explore("conv-seed", {"Conv": ["mv", "lmv"]}, pes=[16], scheduler="heft", arch="cgra", progress=False)
    columns = [c for c in plain.columns if c not in TIMING]
    expected = sweeps["cgra"][sweeps["cgra"]["partition_policy"] == "none"][columns].reset_index(drop=True)
    assert plain[columns].equals(expected)
    assert (plain["transfer_volume"] == 0).all() and (plain["partition_policy"] == "none").all()


@pytest.mark.parametrize("objective", ["energy", pytest.param("edp", marks=pytest.mark.slow)])
def test_cost_policy_objective(objective):
    """partition_objective is the cost policy's objective: the point is dcaccel.partition's with it."""
    frame = explore(
        "conv-seed",
        {"Conv": ["mv"]},
        pes=[16],
        scheduler="heft",
        arch="cgra",
        partition_policy="cost",
        partition_objective=objective,
        progress=False,
    )
    split = dcaccel.partition("conv-seed", "cgra", "cost", choices={"Conv": "mv"}, pes=16, objective=objective)
    (row,) = frame.itertuples(index=False)
    assert (row.makespan_cycles, row.transfer_volume) == (split.makespan, split.transfer_volume)
    assert row.energy_pj == pytest.approx(split.energy_pj)
    assert row.offloaded_work_share == pytest.approx(split.offloaded_work_share)


@pytest.mark.slow
def test_result_file_keys_points_by_policy(tmp_path):
    """A resumed file gains the points of a policy it lacks (the assignment is evaluated again: its points
    are one unit) with the same values for the others."""
    options = {"pes": [16], "scheduler": "heft", "arch": "cgra", "progress": False, "results": tmp_path / "r.sqlite"}
    first = explore("conv-seed", {"Conv": ["mv"]}, partition_policy="greedy", **options)
    both = explore("conv-seed", {"Conv": ["mv"]}, partition_policy=["greedy", "min-region"], resume=True, **options)
    assert list(both["partition_policy"]) == ["greedy", "min-region"]
    assert both.iloc[[0]].drop(columns=TIMING).reset_index(drop=True).equals(first.drop(columns=TIMING))
    stored = dcaccel.exploration.store.read_points(tmp_path / "r.sqlite")
    assert sorted(stored["partition_policy"]) == ["greedy", "min-region"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"partition_policy": "fastest"}, "unknown partition policy 'fastest'"),
        ({"partition_policy": []}, "partition_policy is empty"),
        ({"partition_policy": "cost", "scheduler": "list"}, "only the heft scheduler honours"),
        ({"partition_policy": "min-region", "min_work_share": 1.5}, "min_work_share must be between 0 and 1"),
        ({"partition_policy": "min-region", "min_nodes": -1}, "min_nodes must be an integer of at least 0"),
        ({"partition_policy": "cost", "partition_objective": "area"}, "unknown partition objective 'area'"),
        (
            {"partition_policy": "greedy", "scheduler": ["heft", "list"]},
            "scheduler list gives no points under partition policy greedy .* add partition policy none for",
        ),
    ],
)
def test_bad_partition_options(options, message):
    options.setdefault("scheduler", "heft")
    with pytest.raises(DcaccelError, match=message):
        explore("conv-seed", {"Conv": ["mv"]}, pes=[16], arch="cgra", progress=False, **options)
