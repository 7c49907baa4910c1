"""``dcaccel explore``: the summary, the result files and the plot."""

import json

import pandas as pd
import pytest

from dcaccel.cli import main


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("explore")
    paths = {suffix: folder / f"results{suffix}" for suffix in (".csv", ".json", ".parquet")}
    status = main(
        [
            "explore",
            "conv-seed",
            "--impl",
            "Conv=mv,op,lmv",
            "--pes",
            "16,128",
            "--out",
            str(paths[".csv"]),
            "--plot",
            str(folder / "sweep.png"),
        ]
    )
    return status, folder, paths


@pytest.mark.slow
def test_seed_table_rows_are_written(demo_run):
    status, folder, paths = demo_run
    assert status == 0
    results = pd.read_csv(paths[".csv"])
    assert len(results) == 3 * 2 * 2
    io = results.groupby("assignment")["io_volume"].first().to_dict()
    assert io == {"Conv=lmv": 150_936, "Conv=mv": 129_474, "Conv=op": 222_936}
    assert (folder / "sweep.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_summary_names_the_best_implementation_per_column(capsys):
    assert main(["explore", "conv-seed", "--impl", "Conv=mv,lmv", "--pes", "128", "--scheduler", "streaming"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("128")]
    assert len(lines) == 1 and "streaming" in lines[0] and "Conv=lmv:" in lines[0]


@pytest.mark.parametrize("suffix", [".json", pytest.param(".parquet", marks=pytest.mark.slow)])
def test_other_formats(suffix, tmp_path):
    path = tmp_path / f"r{suffix}"
    assert (
        main(["explore", "conv-seed", "--impl", "Conv=op", "--pes", "4", "--scheduler", "list", "--out", str(path)])
        == 0
    )
    results = pd.DataFrame(json.loads(path.read_text())) if suffix == ".json" else pd.read_parquet(path)
    assert results["io_volume"].tolist() == [222_936]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explore"], "give a MODEL or --demo"),
        (["explore", "conv-seed", "--out", "r.xlsx"], "unknown format"),
        (["explore", "conv-seed", "--impl", "Conv=tiled", "--pes", "2"], "no implementation 'tiled'"),
    ],
)
def test_bad_input_is_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_results_file_resumes_without_recomputing(tmp_path, capsys):
    from dcaccel.exploration.store import read_points

    results = tmp_path / "sweep.sqlite"
    first = ["explore", "conv-seed", "--impl", "Conv=mv,op", "--pes", "4", "--scheduler", "list"]
    assert main([*first, "--results", str(results)]) == 0
    stored = read_points(results)
    assert sorted(stored["assignment"]) == ["Conv=mv", "Conv=op"]
    capsys.readouterr()
    assert main([*first[:3], "Conv=mv,op,lmv", *first[4:], "--results", str(results), "--resume"]) == 0
    assert "3 points" in capsys.readouterr().out
    resumed = read_points(results)
    assert sorted(resumed["assignment"]) == ["Conv=lmv", "Conv=mv", "Conv=op"]
    kept = resumed[resumed["assignment"] != "Conv=lmv"].sort_values("assignment").reset_index(drop=True)
    assert kept.equals(stored.sort_values("assignment").reset_index(drop=True))


@pytest.mark.slow
def test_reusing_a_results_file_needs_resume(tmp_path, capsys):
    results = tmp_path / "sweep.sqlite"
    argv = ["explore", "conv-seed", "--impl", "Conv=op", "--pes", "2", "--scheduler", "list", "--results", str(results)]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 2
    assert "resume" in capsys.readouterr().err


def _run(argv, capsys) -> tuple[int, str, str]:
    """``dcaccel`` on ``argv``: the exit status (argparse's SystemExit included), stdout and stderr."""
    try:
        status = main(argv)
    except SystemExit as exit_info:
        status = exit_info.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def no_sweep(monkeypatch):
    """Fails the test if a sweep evaluates an assignment."""
    from dcaccel.exploration.run import Run

    def evaluate(self, batch):
        raise AssertionError("the sweep ran")

    monkeypatch.setattr(Run, "evaluate", evaluate)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--out", "/nonexistent/dir/x.csv"], "--out /nonexistent/dir/x.csv: no such folder '/nonexistent/dir'"),
        (["--plot", "x.jpg2"], "--plot x.jpg2: unknown format '.jpg2' (use one of .png, .svg)"),
        (["--results", "r.txt"], "--results r.txt: unknown format '.txt'"),
        (["--pes", ""], "argument --pes: expected P[,P...], got ''"),
        (["--pes", "4,0"], "argument --pes: pes must be integers of at least 1, got 0"),
        (["--pes", "1048577"], "argument --pes: --pes 1048577: at most 1048576"),
        (["--pes", "four"], "argument --pes: expected an integer, got 'four'"),
        (["--onchip", "-5"], "argument --onchip: onchip_memory must be integers of at least 0, got -5"),
        (["--onchip", str(2**63)], "argument --onchip: --onchip 9223372036854775808: at most 9223372036854775807"),
        (["--granularity", "tiles=abc"], "argument --granularity: extract: granularity must be"),
        (["--granularity", "tiles=0"], "argument --granularity: extract: granularity must be"),
        (["--workers", "0"], "argument --workers: workers must be positive, got 0"),
        (["--strategy", "random"], "argument --strategy: unknown strategy 'random'"),
        (["--scheduler", "fifo"], "argument --scheduler: unknown scheduler 'fifo'"),
        (["--scheduler", "Streaming"], "(did you mean 'streaming'?)"),
        (["--scheduler", ","], "argument --scheduler: expected NAME[,NAME...], got ','"),
        (["--objective", "speed"], "objective 'speed' is neither makespan, energy nor a numeric column"),
        (["--objective", "edp", "--strategy", "greedy"], "objective 'edp' is neither makespan, energy nor"),
        (["--impl", "Conv="], "argument --impl: expected KEY=NAME[,NAME...], got 'Conv='"),
        (["--impl", "conv=mv,op,lmv"], "--impl conv: no node or op type 'conv' in conv-seed (did you mean 'Conv'?)"),
        (["--impl", "Conv=tiled"], "no implementation 'tiled'"),
        (["--address", "tcp://127.0.0.1:1"], "address 'tcp://127.0.0.1:1' needs executor 'dask'"),
        (["--resume"], "--resume needs --results FILE"),
        (["--policy", "fastest"], "unknown partition policy 'fastest' (expected one of none, greedy, min-region"),
        (["--policy", "Greedy"], "(did you mean 'greedy'?)"),
        (["--policy", ","], "argument --policy/--partition-policy: expected POLICY[,POLICY...], got ','"),
        (
            ["--policy", "greedy", "--scheduler", "heft,list"],
            "explore: scheduler list gives no points under partition policy greedy (a partition is scheduled with "
            "heft): add partition policy none for the plain pipeline's points",
        ),
        (["--policy", "cost", "--scheduler", "list"], "only the heft scheduler honours"),
        (["--policy", "min-region", "--min-work-share", "1.5"], "min_work_share must be between 0 and 1"),
        (["--min-nodes", "-1"], "argument --min-nodes: min_nodes must be an integer of at least 0, got -1"),
        (["--strategy", "mapping", "--plot", "x.png"], "--strategy mapping: no --plot or --policy"),
    ],
)
def test_every_argument_is_checked_before_the_sweep(argv, message, capsys, no_sweep, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    status, out, err = _run(["explore", "conv-seed", *argv], capsys)
    errors = [line for line in err.splitlines() if not line.startswith(("usage:", " "))]
    assert status == 2 and out == ""
    assert len(errors) == 1 and errors[0].startswith("dcaccel explore: error: ") and message in errors[0]
    assert list(tmp_path.iterdir()) == []


def test_onchip_help_names_its_unit(capsys):
    status, out, _ = _run(["explore", "--help"], capsys)
    assert status == 0 and "--onchip ELEMENTS[,ELEMENTS...]" in out


@pytest.mark.slow
def test_repeated_impl_merges_and_node_names_work_per_node(capsys):
    argv = ["explore", "conv-seed", "--pes", "16", "--scheduler", "list"]
    status, out, _ = _run([*argv, "--impl", "Conv=mv", "--impl", "Conv=lmv,mv"], capsys)
    assert status == 0 and "2 points" in out and "Conv=lmv" in out and "Conv=mv" in out
    status, out, _ = _run([*argv, "--strategy", "per-node", "--impl", "Conv_0=mv,lmv"], capsys)
    assert status == 0 and "2 points" in out and "Conv_0=lmv" in out and "Conv_0=mv" in out


@pytest.mark.parametrize("failing", [{"op"}, pytest.param({"mv", "op"}, marks=pytest.mark.slow)])
def test_failed_assignments_exit_1_and_are_listed(failing, capsys, monkeypatch, tmp_path):
    from dcaccel.exploration.evaluation import Sweep

    original = Sweep.points

    def points(self, workload, assignment):
        if assignment.as_dict()["Conv"] in failing:
            raise ValueError("no such shape")
        return original(self, workload, assignment)

    monkeypatch.setattr(Sweep, "points", points)
    out_file = tmp_path / "r.csv"
    argv = ["explore", "conv-seed", "--impl", f"Conv={','.join(sorted(failing))}", "--pes", "4", "--out", str(out_file)]
    status, out, err = _run([*argv, "--scheduler", "list"], capsys)
    assert status == 1
    assert f"{len(failing)} of {len(failing)} assignments failed" in err
    assert [line.strip() for line in err.splitlines() if line.startswith("  ")] == [
        f"Conv={name}: ValueError: no such shape" for name in sorted(failing)
    ]
    assert "0 points" in out and not out_file.exists() and "nothing written" in err


@pytest.mark.slow
def test_some_failed_assignments_exit_1_with_the_others_written(capsys, monkeypatch, tmp_path):
    from dcaccel.exploration.evaluation import Sweep

    original = Sweep.points

    def points(self, workload, assignment):
        if assignment.as_dict()["Conv"] == "op":
            raise ValueError("no such shape")
        return original(self, workload, assignment)

    monkeypatch.setattr(Sweep, "points", points)
    out_file = tmp_path / "r.csv"
    argv = ["explore", "conv-seed", "--impl", "Conv=mv,op", "--pes", "4", "--scheduler", "list", "--out", str(out_file)]
    status, out, err = _run(argv, capsys)
    assert status == 1 and "1 of 2 assignments failed" in err and "  Conv=op: ValueError: no such shape" in err
    assert pd.read_csv(out_file)["assignment"].tolist() == ["Conv=mv"]


def _matmul_model(path, rows: int) -> None:
    """An ONNX model Y = X @ W with X of ``rows`` × 6 and a 6 × 4 weight."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((6, 4), dtype=np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul")],
        "matmul",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [rows, 6])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [rows, 4])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


@pytest.mark.slow
def test_resume_refuses_an_edited_model(capsys, tmp_path):
    model, results = tmp_path / "model.onnx", tmp_path / "r.sqlite"
    argv = [
        "explore",
        str(model),
        "--impl",
        "MatMul=mv",
        "--pes",
        "2",
        "--scheduler",
        "list",
        "--results",
        str(results),
    ]
    _matmul_model(model, 8)
    assert _run(argv, capsys)[0] == 0
    _matmul_model(model, 8 * 128)
    status, out, err = _run([*argv, "--resume"], capsys)
    assert status == 2 and out == ""
    assert err.startswith(f"dcaccel explore: error: results file {results} was written with program of ")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("count", "others"), [(1, ""), (4, "a1: 101, a2: 102, a3: 103"), (250, "a1: 101, a2: 102, a3: 103, +246 more")]
)
def test_summary_names_at_most_three_others(count, others):
    from dcaccel.cli.explore import best_per_column

    rows = [
        {"assignment": f"a{i}", "pes": 4, "scheduler": "list", "onchip_memory": 0, "makespan": 100 + i}
        | {"lower_bound": 50, "utilisation": 0.5, "io_volume": 7}
        for i in range(count)
    ]
    (best,) = best_per_column(pd.DataFrame(rows))
    assert (best.best, best.makespan, best.others) == ("a0", 100, others)


@pytest.fixture(scope="module")
def opaque_onnx(tmp_path_factory):
    """An ONNX file of tests/dag/test_opaque.py's model (RandomUniformLike has no implementation: a host task)."""
    import onnx

    from tests.dag.test_opaque import opaque_model

    path = tmp_path_factory.mktemp("opaque") / "opaque.onnx"
    onnx.save(opaque_model(), path)
    return str(path)


@pytest.mark.slow
def test_an_opaque_op_is_swept_as_one_task_with_one_warning(opaque_onnx, tmp_path, capsys):
    import warnings

    from dcaccel.transforms.lower import OpaqueOpWarning
    from tests.dag.test_opaque import ELEMENTS

    out = tmp_path / "opaque.csv"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status = main(["explore", opaque_onnx, "--impl", "MatMul=mv,lmv", "--pes", "1,4", "--out", str(out)])
    assert status == 0
    assert len([w for w in caught if issubclass(w.category, OpaqueOpWarning)]) == 1
    results = pd.read_csv(out)
    assert len(results) == 8 and (results["opaque_tasks"] == 1).all()
    assert results["opaque_work_share"].tolist() == pytest.approx((ELEMENTS / results["work"]).tolist())


def test_strict_refuses_an_opaque_op_in_one_line_before_the_sweep(opaque_onnx, tmp_path, capsys):
    out = tmp_path / "opaque.csv"
    assert main(["explore", opaque_onnx, "--pes", "1", "--strict", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        err == "dcaccel explore: error: unsupported op RandomUniformLike (node 'randomuniformlike'): "
        "no dcaccel implementation\n"
    )
    assert not out.exists()


def test_summary_ranks_by_the_architecture_cycles():
    """On a concrete architecture the winner is the one with the fewest cycles there, not in the abstract model."""
    from dcaccel.cli.explore import best_per_column

    common = {"pes": 16, "scheduler": "streaming", "onchip_memory": 0, "lower_bound": 1, "utilisation": 0.5}
    rows = [
        common | {"assignment": "Conv=mv", "makespan": 100, "makespan_cycles": 900, "io_volume": 7},
        common | {"assignment": "Conv=lmv", "makespan": 200, "makespan_cycles": 300, "io_volume": 9},
    ]
    (best,) = best_per_column(pd.DataFrame(rows))
    assert (best.best, best.makespan, best.cycles, best.others) == ("Conv=lmv", 200, 300, "Conv=mv: 900")


@pytest.mark.slow
def test_partition_policies_default_to_heft_with_one_table_each(capsys):
    """Two policies on cgra: HEFT without --scheduler, one summary table per policy; the Conv kept on the
    host by min-region (1 operator < --min-nodes 2) is labelled with the implementation it was asked."""
    argv = ["explore", "conv-seed", "--impl", "Conv=mv", "--pes", "16", "--arch", "cgra"]
    status, out, _ = _run([*argv, "--policy", "greedy", "--policy", "min-region"], capsys)
    lines = out.splitlines()
    assert status == 0 and lines[0] == "conv-seed: 2 points"
    assert [line for line in lines if line.startswith("partition")] == ["partition greedy:", "partition min-region:"]
    assert all(" heft " in line for line in lines if line.startswith("66 "))
    assert "Conv=mv@host" in out


@pytest.mark.slow
def test_mapping_strategy_prints_each_layer_and_the_network(capsys):
    status, out, _ = _run(["explore", "conv-seed", "--strategy", "mapping", "--arch", "tpu", "--pes", "16"], capsys)
    lines = out.splitlines()
    assert status == 0 and lines[0] == "conv-seed: 2 points"
    assert lines[1].split() == ["architecture", "layer", "cycles", "energy_pj", "mapping"]
    layer, network = lines[2].split(), lines[3].split()
    assert layer[:2] == ["tpu", "Conv_0"] and "Spatial(16," in lines[2]
    assert network[:2] == ["tpu", "network"] and network[2:4] == layer[2:4]


@pytest.mark.slow
def test_partition_policy_none_alone_is_the_plain_pipeline_with_its_schedulers(capsys):
    status, out, _ = _run(["explore", "conv-seed", "--impl", "Conv=mv", "--pes", "4", "--policy", "none"], capsys)
    rows = [line.split()[:2] for line in out.splitlines()[2:]]
    assert status == 0 and rows == [["4", "list"], ["4", "streaming"]]


@pytest.fixture(scope="module")
def unrunnable_onnx(tmp_path_factory):
    from tests.mapping.test_search import export_unrunnable_op

    path = tmp_path_factory.mktemp("unrunnable") / "unrunnable.onnx"
    export_unrunnable_op(path)
    return str(path)


@pytest.mark.slow
def test_an_op_nothing_can_run_is_refused_before_the_sweep_as_dag_refuses_it(unrunnable_onnx, capsys, no_sweep):
    """The RandomUniformLike (opset 22) has no canonical implementation, DaCe none that applies, and onnxruntime no
    kernel for it: no opaque-task warning, no sweep."""
    from tests.mapping.test_search import UNRUNNABLE_REFUSAL

    assert _run(["dag", unrunnable_onnx], capsys) == (2, "", f"dcaccel dag: error: {UNRUNNABLE_REFUSAL}\n")
    assert _run(["explore", unrunnable_onnx, "--pes", "1"], capsys) == (
        2,
        "",
        f"dcaccel explore: error: {UNRUNNABLE_REFUSAL}\n",
    )


def test_a_design_that_runs_no_conv_is_refused_before_the_sweep(tmp_path, capsys, no_sweep):
    design = tmp_path / "gemm-only.yaml"
    design.write_text(
        "name: gemm-only\nelement_bytes: 4\nclock_mhz: 1000\n"
        "units: {pe: {ops: [Gemm], elements_per_cycle: 1}}\nmemories: {offchip: {level: offchip}}\n"
    )
    status, out, err = _run(["explore", "conv-seed", "--pes", "4", "--arch", str(design)], capsys)
    assert (status, out, err) == (2, "", "dcaccel explore: error: architecture gemm-only: no unit runs op 'Conv'\n")


def _design_points(count: int) -> pd.DataFrame:
    """Two schedulers' points on ``count`` architectures: design d takes 1000 - d cycles (list) and 2000 (streaming)."""
    common = {"pes": 4, "onchip_memory": 0, "lower_bound": 1, "utilisation": 0.5, "io_volume": 7}
    rows = []
    for design in range(count):
        for scheduler, cycles in (("list", 1000 - design), ("streaming", 2000)):
            rows.append(
                common
                | {"assignment": "Conv=mv", "scheduler": scheduler, "makespan": 10, "makespan_cycles": cycles}
                | {"architecture": f"abstract[x={design}]", "partition_policy": "none", "energy_pj": 5.0}
            )
    return pd.DataFrame(rows)


@pytest.mark.slow
def test_many_architectures_are_ranked_in_one_table():
    """400 variants: one heading, the header, the 10 with the fewest cycles and how many more (not 1,602 lines)."""
    from dcaccel.cli.explore import summary

    lines = summary(_design_points(400)).splitlines()
    assert len(lines) == 13
    assert lines[0] == "the best point of each of 400 architectures, fewest cycles first:"
    assert lines[1].split() == ["architecture", "partition_policy", "pes", "scheduler", "best", "cycles", "energy_pj"]
    assert lines[2].split() == ["abstract[x=399]", "none", "4", "list", "Conv=mv", "601", "5"]
    assert [line.split()[0] for line in lines[3:12]] == [f"abstract[x={d}]" for d in range(398, 389, -1)]
    assert lines[12] == "+390 more (--out writes every point)"


def test_a_few_architectures_keep_a_table_each():
    from dcaccel.cli.explore import summary

    lines = summary(_design_points(8)).splitlines()
    assert [line for line in lines if line.startswith("on ")] == [f"on abstract[x={d}]:" for d in range(8)]


@pytest.mark.slow
def test_architecture_variants_are_summarised_from_the_command_line(capsys):
    values = ",".join(str(v) for v in range(1, 13))
    argv = ["explore", "conv-seed", "--impl", "Conv=mv", "--pes", "4", "--scheduler", "list"]
    status, out, _ = _run([*argv, "--arch-param", f"units.pe.elements_per_cycle={values}"], capsys)
    lines = out.splitlines()
    assert status == 0 and lines[:2] == [
        "conv-seed: 12 points",
        "the best point of each of 12 architectures, fewest cycles first:",
    ]
    assert (
        lines[3].startswith("abstract[units.pe.elements_per_cycle=12] ")
        and lines[-1] == "+2 more (--out writes every point)"
    )


@pytest.mark.slow
def test_the_mapping_strategy_stores_its_rows_and_resumes(tmp_path, capsys):
    """--strategy mapping takes --results like every strategy: the rerun with --resume searches nothing again
    and prints the same table."""
    results = tmp_path / "mapping.sqlite"
    argv = [
        "explore",
        "conv-seed",
        "--strategy",
        "mapping",
        "--arch",
        "eyeriss",
        "--pes",
        "4",
        "--results",
        str(results),
    ]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main([*argv, "--resume"]) == 0
    assert capsys.readouterr().out == first and "Conv_0" in first and "network" in first
