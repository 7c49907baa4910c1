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


def test_seed_table_rows_are_written(demo_run):
    status, folder, paths = demo_run
    assert status == 0
    results = pd.read_csv(paths[".csv"])
    assert len(results) == 3 * 2 * 2
    io = results.groupby("assignment")["io_volume"].first().to_dict()
    assert io == {"Conv=lmv": 150_936, "Conv=mv": 129_474, "Conv=op": 222_936}
    assert (folder / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_summary_names_the_best_implementation_per_column(capsys):
    assert main(["explore", "conv-seed", "--impl", "Conv=mv,lmv", "--pes", "128", "--scheduler", "streaming"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("128")]
    assert len(lines) == 1 and "streaming" in lines[0] and "Conv=lmv:" in lines[0]


@pytest.mark.parametrize("suffix", [".json", ".parquet"])
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


def test_reusing_a_results_file_needs_resume(tmp_path, capsys):
    results = tmp_path / "sweep.sqlite"
    argv = ["explore", "conv-seed", "--impl", "Conv=op", "--pes", "2", "--scheduler", "list", "--results", str(results)]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 2
    assert "resume" in capsys.readouterr().err
