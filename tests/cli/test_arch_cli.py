"""``dcaccel arch list|show|check``: the shipped designs, one description, a user's file, one-line errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from dcaccel.architecture import Architecture, load, names
from dcaccel.cli import main


def test_list(capsys):
    assert main(["arch", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == names()
    assert any("108 KB global buffer" in line for line in lines)


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("eyeriss", ["pe: count 168", "mesh", "glb: onchip, 110592 B, 8 B/cycle", "dram: offchip, open, 2.4 B/cycle"]),
        ("abstract", ["pe: count P (the schedule's)", "unlimited MACs/cycle", "onchip: onchip, open, unlimited"]),
        ("tpu", ["column: count 256, ops Conv, Gemm, MatMul", "vector: count 1, ops *"]),
    ],
)
def test_show(capsys, name, fragments):
    assert main(["arch", "show", name]) == 0
    out = capsys.readouterr().out
    for fragment in fragments:
        assert fragment in out


@pytest.mark.parametrize("name", ["abstract", "cgra", "eyeriss", "tpu"])
def test_show_yaml_round_trips(capsys, name):
    assert main(["arch", "show", name, "--yaml"]) == 0
    assert Architecture.from_dict(yaml.safe_load(capsys.readouterr().out)).spec == load(name).spec


def test_check_a_valid_file(capsys, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nunits: {pe: {count: 2, ops: [Conv]}}\nmemories: {dram: {level: offchip}}\n")
    assert main(["arch", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: valid\nmine: ")
    assert "pe: count 2, ops Conv" in out


@pytest.mark.parametrize(
    ("argv", "content", "message"),
    [
        (["check", "{file}"], "name: x\nunits: {pe: {count: -3}}\nmemories: {d: {level: offchip}}\n", "units.pe.count"),
        (["check", "{file}"], "name: x\nunits: {pe: {}}\n", "memories: exactly one offchip memory, got none"),
        (["check", "{file}"], "name: [x\n", "not valid YAML"),
        (["check", "missing.yaml"], None, "architecture file missing.yaml does not exist"),
        (["show", "eyeris"], None, "unknown architecture 'eyeris' (did you mean 'eyeriss'?)"),
    ],
)
def test_errors_are_one_line(capsys, tmp_path, monkeypatch, argv, content, message):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "broken.yaml"
    if content is not None:
        path.write_text(content)
    status = main(["arch", *(part.format(file=path) for part in argv)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("dcaccel arch: error: ")
    assert message in err
    assert err.count("\n") == 1


def test_action_required(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["arch"])
    assert exit_info.value.code == 2
    assert "required" in capsys.readouterr().err


SEED = "tests/data/vectors/seedconv_mv_noxycolbuf.json"


@pytest.mark.parametrize("name", ["abstract", "eyeriss"])
def test_schedule_with_an_architecture(capsys, name):
    from dcaccel.cost.schedule import cost_schedule
    from dcaccel.dag import TaskDAG
    from dcaccel.scheduler import schedule

    costs = cost_schedule(schedule(TaskDAG.from_json(SEED), 16), name)
    assert main(["schedule", SEED, "--pes", "16", "--arch", name]) == 0
    out = capsys.readouterr().out
    assert "makespan       145,730 cycles" in out  # the abstract schedule is unchanged
    assert f"  on {name}:\n    makespan     {costs.makespan_cycles:,} cycles" in out
    assert f"energy       {costs.energy_total_pj:,.0f} pJ" in out
    main(["schedule", SEED, "--pes", "16", "--arch", name, "--json"])
    assert json.loads(capsys.readouterr().out)["architecture"] == json.loads(json.dumps(costs.summary()))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pes", "16", "--arch", "nope"], "unknown architecture 'nope'"),
        (["--pes", "200", "--arch", "eyeriss"], "architecture eyeriss has 168 units, the schedule uses 200 PEs"),
    ],
)
def test_schedule_architecture_errors(capsys, argv, message):
    assert main(["schedule", SEED, *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_explore_on_an_architecture(capsys, tmp_path):
    out = tmp_path / "points.csv"
    argv = ["explore", "conv-seed", "--impl", "Conv=mv", "--pes", "16", "--scheduler", "list", "--out", str(out)]
    assert main([*argv, "--arch", "eyeriss"]) == 0
    summary = capsys.readouterr().out
    frame = pd.read_csv(out)
    assert list(frame["architecture"]) == ["eyeriss"]
    assert frame["makespan_cycles"][0] > frame["makespan"][0]  # 2.4 B/cycle of DRAM
    assert frame["unit_utilisation"][0].startswith("pe=")
    makespan = int(frame["makespan"][0])
    assert _summary_row(summary)[:2] == (makespan, int(frame["makespan_cycles"][0]))  # cycles on eyeriss
    assert main(argv) == 0  # the default, abstract: the same makespan, and as many cycles
    assert _summary_row(capsys.readouterr().out)[:2] == (makespan, makespan)
    assert list(pd.read_csv(out)["architecture"]) == ["abstract"]


def test_explore_refuses_a_broken_architecture_first(capsys, tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: b\nunits: {pe: {count: 0}}\nmemories: {d: {level: offchip}}\n")
    assert main(["explore", "no-such-model", "--arch", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"dcaccel explore: error: architecture {path}: units.pe.count: Input should be greater than 0\n"


def _summary_row(summary: str) -> tuple[int, int]:
    """(makespan, cycles) of the one row of an ``explore`` summary."""
    lines = summary.splitlines()
    header = next(index for index, line in enumerate(lines) if line.startswith("pes "))
    row = dict(zip(lines[header].split(), lines[header + 1].split(), strict=False))
    return int(row["makespan"]), int(row["cycles"])


@pytest.mark.slow
def test_explore_on_several_architectures_and_parameters(capsys, tmp_path):
    """Two --arch and an --arch-param: one summary table per variant, each ranked by its own cycles."""
    out = tmp_path / "points.csv"
    argv = ["explore", "conv-seed", "--impl", "Conv=mv,lmv", "--pes", "16", "--scheduler", "list,heft"]
    argv += ["--arch", "eyeriss", "--arch", "tpu", "--arch-param", "offchip.bandwidth_bytes_per_cycle=8,64"]
    assert main([*argv, "--out", str(out)]) == 0
    summary = capsys.readouterr().out
    frame = pd.read_csv(out)
    labels = [f"{name}[offchip.bandwidth_bytes_per_cycle={value}]" for name in ("eyeriss", "tpu") for value in (8, 64)]
    assert list(dict.fromkeys(frame["architecture"])) == labels
    assert [line for line in summary.splitlines() if line.startswith("on ")] == [f"on {label}:" for label in labels]
    for label, table in zip(labels, summary.split("\non ")[1:], strict=True):
        rows = frame[frame["architecture"] == label]
        lines = [line for line in table.splitlines() if not line.startswith("wrote ")]
        assert lines[0] == f"{label}:"
        header = lines[1].split()
        assert len(lines) == 4  # list on 16 PEs, heft on the design's units
        for line in lines[2:]:
            row = dict(zip(header, line.split(), strict=False))
            mine = rows[(rows["pes"] == int(row["pes"])) & (rows["scheduler"] == row["scheduler"])]
            assert int(row["cycles"]) == mine["makespan_cycles"].min()
            assert row["best"] == mine.sort_values("makespan_cycles").iloc[0]["assignment"]
    assert sorted(set(frame[frame["scheduler"] == "heft"]["pes"])) == [168, 257]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--arch-param", "units.pe.count"],
            "argument --arch-param: architecture parameter 'units.pe.count': expected",
        ),
        (["--arch-param", "units.pe.cnt=3"], "architecture eyeriss: parameter units.pe.cnt: no field 'cnt'"),
        (["--arch-param", "units.px.count=3"], "architecture eyeriss: parameter units.px.count: no unit 'px'"),
        (["--arch-param", "units.pe.count=0"], "eyeriss[units.pe.count=0]: units.pe.count: Input should be greater"),
        (["--arch-param", "offchip.bandwidth_bytes_per_cycle=x"], "bandwidth_bytes_per_cycle: Input should be"),
        (["--pes", "256"], "explore: architecture eyeriss has 168 units, fewer than P = 256"),
        (["--scheduler", "heft,fifo"], "argument --scheduler: unknown scheduler 'fifo'"),
    ],
)
def test_explore_architecture_errors_are_one_line(capsys, argv, message):
    try:
        status = main(["explore", "no-such-model" if "--pes" not in argv else "conv-seed", "--arch", "eyeriss", *argv])
    except SystemExit as exit_info:  # argparse's errors
        status = exit_info.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err
    assert [line for line in err.splitlines() if not line.startswith(("usage:", " "))] == [err.splitlines()[-1]]


def test_schedule_with_heft(capsys):
    from dcaccel.cost.schedule import cost_schedule
    from dcaccel.dag import TaskDAG
    from dcaccel.scheduler import schedule

    result = schedule(TaskDAG.from_json(SEED), 16, "heft", arch="cgra")
    assert main(["schedule", SEED, "--pes", "16", "--scheduler", "heft", "--arch", "cgra", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["scheduler"], summary["pes"]) == ("heft", 65)
    assert summary["makespan"] == result.makespan
    assert summary["architecture"]["makespan_cycles"] == cost_schedule(result, "cgra").makespan_cycles
    assert main(["schedule", SEED, "--pes", "16", "--scheduler", "heft"]) == 2
    assert "--scheduler heft places tasks on an architecture's units: give --arch" in capsys.readouterr().err


BOMB = "name: b\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 20)
)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "name: x\nunits:\n  pe: {count: 16, ops: [Conv]}\n  pe: {count: 4}\nmemories: {d: {level: offchip}}\n",
            "line 4: not valid YAML (key pe appears twice in one mapping)",
        ),
        (
            "name: x\nunits: {pe: {}}\nmemories: {d: {level: offchip, bandwidth_bytes_per_cycle: .inf}}\n",
            "memories.d.bandwidth_bytes_per_cycle: Input should be a finite number",
        ),
        (
            "name: x\nunits: {pe: {}}\nmemories: {d: {level: offchip, bandwidth_bytes_per_cycle: 1e-12}}\n",
            "memories.d.bandwidth_bytes_per_cycle: Input should be greater than or equal to 0.001",
        ),
        (
            "name: x\nunits: {pe: {elements_per_cycle: 1e-300}}\nmemories: {d: {level: offchip}}\n",
            "units.pe.elements_per_cycle: Input should be greater than or equal to 0.000001",
        ),
        (
            "name: x\nclock_mhz: .inf\nunits: {pe: {}}\nmemories: {d: {level: offchip}}\n",
            "clock_mhz: Input should be a finite number",
        ),
        (
            "name: x\nunits: {pe: {}}\nmemories: {d: {level: offchip, read_energy_pj: 1e308}}\n",
            "memories.d.read_energy_pj: Input should be less than or equal to 1000000",
        ),
        (
            "name: x\nunits: {pe: {count: true}}\nmemories: {d: {level: offchip}}\n",
            "units.pe.count: Input should be a valid integer",
        ),
        (BOMB, "line 6: more than 100000 nodes once aliases are expanded"),
        ("name: " + "[" * 20000 + "]" * 20000 + "\n", "line 1: nested deeper than 32 levels"),
    ],
)
def test_check_refuses_what_cannot_be_computed(capsys, tmp_path, content, message):
    """Each of these passed ``arch check`` (or took 46 s, or raised RecursionError) and then failed every
    assignment or gave inf / 0 figures; now one line, exit status 2."""
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    assert main(["arch", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"dcaccel arch: error: architecture {path}: {message}\n"


SIMBA = "name: simba\nunits: {pe: {count: 16}, host: {count: 1, role: host}}\nmemories: {d: {level: offchip}}\n"


def test_p_versus_units_leaves_the_host_out(capsys, tmp_path):
    """16 PEs and a host used to accept P = 17 (and cgra 65): the host takes only the ops no PE runs."""
    path = tmp_path / "simba.yaml"
    path.write_text(SIMBA)
    assert main(["schedule", SEED, "--pes", "17", "--arch", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.endswith("architecture simba has 16 units besides its host, the schedule uses 17 PEs\n")
    assert main(["schedule", SEED, "--pes", "16", "--arch", str(path)]) == 0
    capsys.readouterr()
    assert main(["explore", "conv-seed", "--arch", "cgra", "--pes", "65"]) == 2
    assert capsys.readouterr().err == (
        "dcaccel explore: error: explore: architecture cgra has 64 units besides its host, fewer than P = 65\n"
    )


def test_heft_on_a_huge_count(capsys, tmp_path):
    """``count: 10**12`` under heft used to end in MemoryError: the schedule of as many units as nodes."""
    path = tmp_path / "huge.yaml"
    path.write_text("name: huge\nunits: {pe: {count: 1000000000000}}\nmemories: {d: {level: offchip}}\n")
    assert main(["schedule", SEED, "--pes", "1", "--scheduler", "heft", "--arch", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    path.write_text("name: huge\nunits: {pe: {count: 1000}}\nmemories: {d: {level: offchip}}\n")  # > the nodes
    assert main(["schedule", SEED, "--pes", "1", "--scheduler", "heft", "--arch", str(path), "--json"]) == 0
    enough = json.loads(capsys.readouterr().out)
    assert summary["pes"] == 10**12 and enough["pes"] == 1000
    assert summary["makespan"] == enough["makespan"]
    assert summary["architecture"]["makespan_cycles"] == enough["architecture"]["makespan_cycles"]


@pytest.mark.parametrize(
    ("parameter", "message"),
    [
        ("offchip.bandwidth_bytes_per_cycle=.inf", "memories.dram.bandwidth_bytes_per_cycle: Input should be a finite"),
        ("offchip.bandwidth_bytes_per_cycle=1e-12", "bandwidth_bytes_per_cycle: Input should be greater than or equal"),
        ("units.pe.count=true", "units.pe.count: Input should be a valid integer"),
    ],
)
def test_arch_params_are_validated(capsys, parameter, message):
    assert main(["explore", "no-such-model", "--arch", "eyeriss", "--arch-param", parameter]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
