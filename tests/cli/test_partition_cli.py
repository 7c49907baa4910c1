"""``dcaccel partition MODEL --arch X``: the per-node report, ``--json``, ``--dot``, and one-line errors;
``dcaccel verify --arch`` checks the partitioned program."""

from __future__ import annotations

import json

import pytest

import dcaccel.cli.verify
from dcaccel.cli import main
from dcaccel.verification import OutputCheck, VerifyReport


@pytest.mark.slow
def test_json_report(npu_chain, capsys):
    model, design = npu_chain
    assert main(["partition", model, "--arch", design, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"nodes", "regions", "offloaded_work_share", "transfer_volume", "makespan", "energy_pj"} <= set(report)
    assert [(n["name"], n["op"], n["target"], n["reason"]) for n in report["nodes"]] == [
        ("conv_in", "Conv", "npu", "pattern Conv+Relu on npu"),
        ("relu_in", "Relu", "npu", "pattern Conv+Relu on npu"),
        ("middle", "Resize", "cpu", "unsupported op Resize"),
        ("conv_out", "Conv", "npu", "pattern Conv+Relu on npu"),
        ("relu_out", "Relu", "npu", "pattern Conv+Relu on npu"),
    ]
    assert [region["nodes"] for region in report["regions"]] == [["conv_in", "relu_in"], ["conv_out", "relu_out"]]
    assert report["transfer_volume"] == 1024 + 4096
    assert sum(report["energy_split_pj"].values()) == pytest.approx(report["energy_pj"])


@pytest.mark.parametrize(
    "objective",
    ["makespan", pytest.param("energy", marks=pytest.mark.slow), pytest.param("edp", marks=pytest.mark.slow)],
)
def test_cost_objective(npu_chain, capsys, objective):
    """--partition-objective is what the cost policy minimises: never more than greedy's value of it."""
    model, design = npu_chain
    reports = {}
    for policy in ("greedy", "cost"):
        assert (
            main(
                ["partition", model, "--arch", design, "--policy", policy, "--partition-objective", objective, "--json"]
            )
            == 0
        )
        reports[policy] = json.loads(capsys.readouterr().out)
    assert reports["cost"]["objective"] == objective

    def value(report):
        return {"makespan": report["makespan"], "energy": report["energy_pj"]}.get(
            objective, report["makespan"] * report["energy_pj"]
        )

    assert value(reports["cost"]) <= value(reports["greedy"])


@pytest.mark.slow
def test_text_report_and_dot(npu_chain, capsys, tmp_path):
    model, design = npu_chain
    dot = tmp_path / "chain.dot"
    assert (
        main(["partition", model, "--arch", design, "--policy", "min-region", "--min-nodes", "3", "--dot", str(dot)])
        == 0
    )
    text = capsys.readouterr().out
    assert "middle    Resize  cpu     -       unsupported op Resize" in text
    assert "region too small (2 node(s)" in text
    assert "policy min-region: 0 of 2 region(s) offloaded, 0 of 5 operators" in text
    assert "offloaded: 0.0% of the MACs, 0.0% of the work" in text
    assert "transfers: 0 task(s), 0 elements over the host link" in text
    graph = dot.read_text()
    assert graph.count("fillcolor=lightgrey") == 5 and '"relu_in" -> "middle";' in graph


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--policy", "all"], "argument --policy: unknown partition policy 'all'"),
        (["--policy", "none"], "argument --policy: invalid choice: 'none'"),
        (["--min-work-share", "2"], "argument --min-work-share: min_work_share must be between 0 and 1, got 2.0"),
        (["--dot", "out.png"], "--dot out.png: unknown format '.png'"),
        (["--arch", "nowhere"], "unknown architecture 'nowhere'"),
    ],
)
def test_errors_are_one_line(npu_chain, capsys, argv, message):
    model, design = npu_chain
    args = ["partition", model, *argv] if "--arch" in argv else ["partition", model, "--arch", design, *argv]
    if argv[0] in ("--policy", "--min-work-share"):  # argparse refuses it
        with pytest.raises(SystemExit) as exit_info:
            main(args)
        assert exit_info.value.code == 2
    else:
        assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_verify_arch_checks_the_partitioned_program(npu_chain, capsys, monkeypatch):
    """``verify --arch`` hands the partition's lowered program to verify (the compile itself is the slow
    test of tests/transforms/test_offload.py)."""
    model, design = npu_chain
    seen = {}

    def fake_verify(workload, lowered, **_):
        seen["opaque"] = lowered.opaque
        return VerifyReport("chain", "lowered", "onnxruntime", 1e-4, 1e-5, 0, (OutputCheck("y", (1,), 0, 0, True),))

    monkeypatch.setattr(dcaccel.cli.verify, "verify", fake_verify)
    assert main(["verify", model, "--arch", design]) == 0
    assert seen["opaque"] == {"middle": "Resize"}
    assert main(["verify", model, "--arch", design, "--strict"]) == 2
    assert "--strict and --arch" in capsys.readouterr().err


@pytest.mark.slow
def test_the_cost_policy_shows_its_progress_over_the_regions(npu_chain, capsys, monkeypatch):
    """The command asks for a bar when the regions take longer than a second; asked always, it shows both."""
    import dcaccel.cli.partition

    model, design = npu_chain
    asked = []

    def partition(*arguments, progress, **options):
        asked.append(progress)
        return dcaccel.partition(*arguments, progress=True, **options)

    monkeypatch.setattr(dcaccel.cli.partition, "partition", partition)
    assert main(["partition", model, "--arch", design, "--policy", "cost"]) == 0
    err = capsys.readouterr().err
    assert asked == [None] and "partition chain: 100%|" in err and "| 2/2 " in err
