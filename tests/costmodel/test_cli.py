import re

import pytest

from dcaccel.cli import main
from dcaccel.costmodel.measure import write_rows
from dcaccel.costmodel.models import CostModel

from .rows import RATES, missing, row


@pytest.fixture
def rows_file(tmp_path):
    path = tmp_path / "rows.jsonl"
    rows = [
        row(family, f"{family}{i}", shape, f"t{j}", work, work * 3.0)
        for family in ("p", "q")
        for i in range(2)
        for shape in ("mv", "op")
        for j, work in enumerate((10.0, 80.0))
    ]
    write_rows(rows, path)
    return path


def test_train_then_eval(rows_file, tmp_path, capsys):
    model = tmp_path / "model.json"
    assert main(["costmodel", "train", str(rows_file), "--out", str(model)]) == 0
    assert model.is_file()
    assert main(["costmodel", "eval", str(rows_file), "--model", str(model)]) == 0
    out = capsys.readouterr().out
    analytic = next(line for line in out.splitlines() if line.startswith("analytic"))
    assert analytic.split()[1] == "0.000"  # the times are 3 ns per element exactly


def test_train_prints_the_miss_cost(tmp_path, capsys):
    """Steps measured at known prices per miss: the line gives the saved model's prices, in the levels' order."""
    rows_file, model = tmp_path / "rows.jsonl", tmp_path / "model.json"
    steps = [missing(100.0 * (i + 1), rates, copy=i % 3 == 0, vector=i % 3 == 1) for i, rates in enumerate(RATES)]
    write_rows(steps, rows_file)
    assert main(["costmodel", "train", str(rows_file), "--out", str(model)]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("miss cost (boosted model): ")
    assert re.findall(r"\b(l1|l2|dtlb|stlb) ", line) == ["l1", "l2", "dtlb", "stlb"]
    misses = CostModel.load(model).boosted.misses
    printed = [float(number) for number in re.findall(r"\d+\.\d{3}", line)]
    constants = [misses.map_ns, misses.vector_ns, misses.copy_ns]
    assert printed == pytest.approx([*constants, *misses.per_miss.values()], abs=5e-4)
    assert max(printed[3:]) > 0  # not a line of zeros


def test_folds(rows_file, capsys):
    assert main(["costmodel", "eval", str(rows_file), "--families", "q"]) == 0
    out = capsys.readouterr().out
    assert "held out" in out and "mean over folds" in out
    assert [line.split()[0] for line in out.splitlines()[1:4]] == ["q", "q", "q"]


def test_folds_with_a_remeasurement_score_its_pairs(tmp_path, capsys):
    """op at 4 ns per element, mv at 3: each of q's two workloads has a pair in that order. Measured again
    alike, both pairs are reproduced; measured again with q1's op faster than its mv, only q0's. The scaled
    analytic model puts each pair at one time (a tie counts as wrong): 0 right, over all pairs and over the
    reproduced ones. The columns are shown with ``--again`` only."""

    def steps(slow_mv: str = ""):
        return [
            row(
                family,
                f"{family}{i}",
                shape,
                f"t{j}",
                work,
                work * (4.0 if (shape == "op") != (slow_mv == f"{family}{i}") else 3.0),
            )
            for family in ("p", "q")
            for i in range(2)
            for shape in ("mv", "op")
            for j, work in enumerate((10.0, 80.0))
        ]

    rows_file, alike, reversed_q1 = tmp_path / "rows.jsonl", tmp_path / "alike.jsonl", tmp_path / "q1.jsonl"
    for path, rows in ((rows_file, steps()), (alike, steps()), (reversed_q1, steps("q1"))):
        write_rows(rows, path)
    assert main(["costmodel", "eval", str(rows_file), "--families", "q"]) == 0
    assert "reproduced_" not in capsys.readouterr().out
    for again, reproduced in ((alike, "2"), (reversed_q1, "1")):
        assert main(["costmodel", "eval", str(rows_file), "--families", "q", "--again", str(again)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split()[-4:] == ["reproduced_pair_order", "reproduced_pairs", "tasks", "programs"]
        analytic = lines[1].split()
        assert analytic[:2] == ["q", "analytic"]
        assert analytic[-5:] == [
            "0.000",
            "0.000",
            reproduced,
            "8",
            "4",
        ]  # pair order, reproduced, pairs, steps, programs


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["costmodel", "eval", "missing.jsonl"], "costmodel rows missing.jsonl: no such file"),
        (["costmodel", "train", "missing.jsonl", "--out", "m.txt"], "--out m.txt: unknown format"),
        (["measure", "conv-seed", "--out", "rows.csv"], "--out rows.csv: unknown format"),
    ],
)
def test_refusals_are_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
