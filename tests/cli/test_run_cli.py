"""``dcaccel run STUDY.yaml``: the rows of the equivalent ``dcaccel explore``; ``--resume FILE`` continues the
study a result file recorded; every bad study or argument is one line before anything runs."""

import pandas as pd
import pytest

from dcaccel.cli import main
from dcaccel.exploration.points import columns
from tests.exploration.test_sweep import SEED_MAKESPAN

TIMING = [name for name in columns() if name.endswith("_seconds")]

SEED_STUDY = """\
models: [conv-seed]
implementations: {Conv: [mv, op, lmv]}
pes: [16, 128]
scheduler: [streaming]
dag: {edge_volume: reference}
store: {results: seed.sqlite}
"""
SEED_EXPLORE = ["explore", "conv-seed", "--impl", "Conv=mv,op,lmv", "--pes", "16,128", "--scheduler", "streaming"]
SEED_EXPLORE += ["--edge-volume", "reference"]


def _rows(path) -> pd.DataFrame:
    return pd.read_csv(path).drop(columns=TIMING)


@pytest.fixture(scope="module")
def seed_runs(tmp_path_factory):
    """The seed study run from its file, the equivalent explore, and the study resumed from its result file."""
    folder = tmp_path_factory.mktemp("run")
    study = folder / "seed.yaml"
    study.write_text(SEED_STUDY.replace("seed.sqlite", str(folder / "seed.sqlite")))
    statuses = [
        main(["run", str(study), "--out", str(folder / "run.csv")]),
        main([*SEED_EXPLORE, "--out", str(folder / "explore.csv")]),
        main(["run", "--resume", str(folder / "seed.sqlite"), "--out", str(folder / "resumed.csv")]),
    ]
    return statuses, folder


@pytest.mark.slow
def test_run_gives_the_rows_of_the_equivalent_explore(seed_runs):
    statuses, folder = seed_runs
    assert statuses == [0, 0, 0]
    run, explored = _rows(folder / "run.csv"), _rows(folder / "explore.csv")
    assert run.equals(explored)
    assert run.set_index(["assignment", "pes"])["makespan"].to_dict() == SEED_MAKESPAN


@pytest.mark.slow
def test_resume_continues_the_recorded_study_without_evaluating(seed_runs, monkeypatch, tmp_path):
    statuses, folder = seed_runs
    assert _rows(folder / "resumed.csv").equals(_rows(folder / "run.csv"))
    from dcaccel.exploration import run

    monkeypatch.setattr(run, "make_executor", lambda *args: pytest.fail("an assignment was evaluated"))
    assert main(["run", "--resume", str(folder / "seed.sqlite"), "--out", str(tmp_path / "again.csv")]) == 0
    assert _rows(tmp_path / "again.csv").equals(_rows(folder / "run.csv"))
    assert main(["run", str(folder / "seed.yaml"), "--resume", "--out", str(tmp_path / "its.csv")]) == 0
    assert _rows(tmp_path / "its.csv").equals(_rows(folder / "run.csv"))


@pytest.mark.parametrize(
    ("study", "argv", "message"),
    [
        (None, [], "give a STUDY file (or --resume and the result file that recorded it)"),
        (None, ["--resume"], "give a STUDY file (or --resume and the result file that recorded it)"),
        ("models: [conv-seed]\n", ["--resume"], "--resume: study s.yaml has no result file (store.results)"),
        (None, ["--resume", "missing.sqlite"], "results file missing.sqlite: no such file"),
        (None, ["missing.sqlite"], "missing.sqlite: a result file's study is continued with --resume"),
        (SEED_STUDY, ["--out", "x.txt"], "--out x.txt: unknown format '.txt' (use one of .csv, .parquet, .json)"),
        (
            SEED_STUDY.replace("seed.sqlite", "seed.txt"),
            [],
            "store.results seed.txt: unknown format '.txt' (use one of .sqlite, .sqlite3, .db)",
        ),
        ("models: [conv-seed]\nexecutor: process\n", [], "study s.yaml: executor: not a field of the study"),
        ("models: [conv-seed]\npes: [16, -1]\n", [], "study s.yaml: pes must be integers of at least 1, got -1"),
    ],
)
def test_a_bad_run_is_one_line_before_anything_runs(study, argv, message, capsys, monkeypatch, tmp_path):
    from dcaccel.exploration import run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run, "run_study", lambda *args: pytest.fail("the study ran"))
    if study is not None:
        (tmp_path / "s.yaml").write_text(study)
    status = main(["run", *(["s.yaml"] if study is not None else []), *argv])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err == f"dcaccel run: error: {message}\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == (["s.yaml"] if study is not None else [])
