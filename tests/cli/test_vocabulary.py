"""One vocabulary: every flag that names a field of ``dcaccel.Study`` is made from that field by ``add_concept``
(same name, meaning, unit, default and checks in every sub-command), docs/cli.md tabulates them as the parser
has them, the former spellings still read with one warning, and the defaults taken from the design."""

import argparse
from dataclasses import asdict
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

import dcaccel.exploration.sweep
import dcaccel.mapping
from dcaccel.cli import build_parser, main
from dcaccel.cli.arguments import SWITCHES, VOCABULARY, concept_help, generated, study_field, vocabulary
from dcaccel.exploration.grid import architectures
from dcaccel.exploration.study import DEFAULT_PES
from tests.markdown import table

matplotlib.use("Agg")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
FLAGS = {**{name: concept.flag for name, concept in VOCABULARY.items()}, **{n: f for n, (f, _) in SWITCHES.items()}}


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_the_docs_table_is_the_parsers():
    documented = [
        {key: cell.strip("`") for key, cell in row.items()} for row in table(DOCS.read_text(), "## The flags")
    ]
    assert documented == [asdict(row) for row in vocabulary(build_parser())]


@pytest.mark.parametrize("name", list(FLAGS))
def test_every_command_takes_the_concept_from_the_study(name):
    """A command with the flag has it from add_concept; its help is the field's description first, whatever
    the command."""
    flag = FLAGS[name]
    _, info = study_field(name)
    taking = 0
    for command, parser in commands().items():
        action = parser._option_string_actions.get(flag)
        if action is None or action.option_strings[0] != flag:
            continue
        assert generated(parser, flag) == name, f"dcaccel {command} {flag} is not made by add_concept"
        assert info.description in action.help
        taking += 1
    assert taking >= 1


def test_help_says_the_unit_and_the_default():
    assert concept_help("onchip_memory") == (
        "on-chip memory per block (0: the architecture's on-chip capacity); unit: elements; repeatable, or a comma "
        "list (default: 0)"
    )
    assert concept_help("pes", "16", one=True).endswith("unit: PEs (default: 16)")


@pytest.mark.parametrize(
    ("command", "old", "new", "value", "field", "read"),
    [
        (["explore", "m"], "--partition-policy", "--policy", "none,greedy", "partition_policy", ["none", "greedy"]),
        (["map", "m"], "--capacity", "--onchip", "64", "onchip_memory", 64),
        (
            ["partition", "m", "--arch", "cgra"],
            "--objective",
            "--partition-objective",
            "energy",
            "partition_objective",
            "energy",
        ),
    ],
)
def test_former_spellings_are_read_with_one_warning(capsys, command, old, new, value, field, read):
    assert getattr(build_parser().parse_args([*command, old, value]), field) == read
    assert capsys.readouterr().err == f"dcaccel {command[0]}: warning: {old} is deprecated, use {new}\n"
    assert getattr(build_parser().parse_args([*command, new, value]), field) == read
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "command", [["verify"], ["dag"], ["partition", "--arch", "cgra"], ["explore"], ["measure", "--out", "r.jsonl"]]
)
def test_impl_has_one_syntax_everywhere(capsys, command):
    args = build_parser().parse_args([command[0], "m", *command[1:], "--impl", "Conv=mv", "--impl", "conv1=lmv,op"])
    assert args.implementations == [("Conv", ("mv",)), ("conv1", ("lmv", "op"))]
    with pytest.raises(SystemExit):
        build_parser().parse_args([command[0], "m", *command[1:], "--impl", "Conv=op", "conv2=lmv"])  # gone
    assert "unrecognized arguments: conv2=lmv" in capsys.readouterr().err


class Captured(Exception):
    """Raised by a stand-in for the search or the sweep with what it was given."""


@pytest.fixture
def captured(monkeypatch):
    """Stand-ins for dcaccel.map and dcaccel.explore that raise :class:`Captured` with their arguments."""

    def explore(workload, study):
        raise Captured(study)

    def map_workload(workload, architecture, objective, **options):
        raise Captured((objective, options["pes"]))

    monkeypatch.setattr(dcaccel.exploration.sweep, "explore", explore)
    monkeypatch.setattr(dcaccel.mapping, "map_workload", map_workload)
    monkeypatch.setattr("dcaccel.cli.map.resolve_model", lambda *args: None)
    monkeypatch.setattr("dcaccel.cli.map._check_supported", lambda *args: None)

    def run(*argv):
        with pytest.raises(Captured) as caught:
            main(list(argv))
        return caught.value.args[0]

    return run


@pytest.mark.parametrize(
    ("arch", "pes"),
    [
        ([], DEFAULT_PES),
        (["--arch", "abstract"], DEFAULT_PES),
        (["--arch", "eyeriss"], (168,)),
        (["--arch", "eyeriss", "--arch", "cgra"], (64, 168)),
        (["--arch", "abstract", "--arch", "eyeriss"], DEFAULT_PES),
    ],
)
def test_p_is_the_designs_units_unless_given(captured, arch, pes):
    study = captured("explore", "conv-seed", *arch)
    assert study.pes is None and study.pe_counts(architectures(study.arch)) == pes
    assert captured("explore", "conv-seed", *arch, "--pes", "4").pes == (4,)


@pytest.mark.parametrize("arch", [["--arch", "eyeriss"], ["--arch", "tpu"], ["--arch", "abstract", "--onchip", "4096"]])
def test_map_and_the_mapping_strategy_share_their_defaults(captured, arch):
    study = captured("explore", "lenet", "--strategy", "mapping", *arch)
    objective, pes = captured("map", "lenet", *arch)
    assert (objective, pes) == (study.objective, study.pes) == ("makespan", None)  # both: the designs' units


def test_the_plot_draws_the_cycles_on_the_architecture():
    from dcaccel.exploration.plots import plot_makespan

    rows = [
        {
            "workload": "w",
            "assignment": a,
            "scheduler": "list",
            "pes": p,
            "onchip_memory": 0,
            "architecture": arch,
            "makespan": 100 * p,
            "makespan_cycles": 7 * p + (arch == "tpu"),
        }
        for a in ("Conv=mv", "Conv=lmv")
        for p in (16, 128)
        for arch in ("eyeriss", "tpu")
    ]
    results = pd.DataFrame(rows)
    figure = plot_makespan(results, cycles=True)
    (axes,) = figure.axes
    lines = {line.get_label(): list(line.get_ydata()) for line in axes.get_lines()}
    assert lines == {
        "Conv=mv on eyeriss": [112, 896],
        "Conv=mv on tpu": [113, 897],
        "Conv=lmv on eyeriss": [112, 896],
        "Conv=lmv on tpu": [113, 897],
    }
    assert axes.get_ylabel() == "makespan on eyeriss, tpu (cycles)"
    (abstract,) = plot_makespan(results[results["architecture"] == "eyeriss"]).axes
    assert [list(line.get_ydata()) for line in abstract.get_lines()] == [[1600, 12800]] * 2


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arch", "objective", "chosen"),
    [
        ("abstract", "makespan", "mv"),
        ("eyeriss", "makespan", "lmv"),
        ("eyeriss", "energy", "lmv"),
        ("eyeriss", "makespan_cycles", "lmv"),
    ],
)
def test_greedy_minimises_the_objective_on_the_architecture(monkeypatch, capsys, arch, objective, chosen):
    """conv-seed at P = 16, streaming: mv has the least abstract makespan (26,738 against lmv's 35,735), lmv
    the fewest cycles on eyeriss (65,261 against mv's 168,215) and the least energy."""
    import dcaccel.exploration.run

    choices = []
    greedy = dcaccel.exploration.run.greedy
    monkeypatch.setattr(dcaccel.exploration.run, "greedy", lambda *args: choices.append(greedy(*args)) or choices[-1])
    argv = ["explore", "conv-seed", "--strategy", "greedy", "--impl", "Conv=mv,op,lmv", "--pes", "16"]
    assert main([*argv, "--scheduler", "streaming", "--arch", arch, "--objective", objective]) == 0
    assert [str(choice) for choice in choices] == [f"Conv_0={chosen}"]


def test_the_python_partition_takes_a_model_path(npu_chain):
    """What ``dcaccel partition MODEL.onnx`` takes, ``dcaccel.partition`` takes: the same report."""
    from dcaccel.frontend.load import resolve
    from dcaccel.partitioning import partition

    model, design = npu_chain
    by_path = partition(model, design, "greedy").summary()
    assert by_path == partition(resolve(model), design, "greedy").summary()
    assert by_path["transfer_volume"] == 1024 + 4096


@pytest.mark.slow
def test_the_python_verify_takes_a_model_path(npu_chain):
    from dcaccel.verification import verify

    report = verify(npu_chain[0])
    assert report.passed and report.workload == "chain"
