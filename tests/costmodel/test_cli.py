import re
from dataclasses import replace

import numpy as np
import pytest

from dcaccel.cli import main
from dcaccel.costmodel.measure import read_rows, write_rows
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
    steps = [
        missing(100.0 * (i + 1), rates, copy=i % 3 == 0, vector=i % 3 == 1, atomic=float(i in (2, 14)))
        for i, rates in enumerate(RATES)
    ]
    write_rows(steps, rows_file)
    assert main(["costmodel", "train", str(rows_file), "--out", str(model)]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("miss cost (boosted model): ")
    assert re.findall(r"\b(l1|l2|dtlb|stlb) ", line) == ["l1", "l2", "dtlb", "stlb"]
    misses = CostModel.load(model).boosted.misses
    printed = [float(number) for number in re.findall(r"\d+\.\d{3}", line)]
    constants = [misses.map_ns, misses.vector_ns, misses.copy_ns]
    assert printed == pytest.approx([*constants, *misses.per_miss.values(), misses.atomic_ns], abs=5e-4)
    assert max(printed[3:7]) > 0 and printed[7] > 0  # not a line of zeros


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


def test_calibrate_fits_the_clock_of_another_machine(rows_file, tmp_path, capsys):
    """The rows measured again on a machine 0.8 times as fast: the analytic model (3 ns per element exactly)
    is scaled by 0.8 and then predicts them exactly; the file keeps the scales and where they were fitted."""
    model, calibrated, faster = tmp_path / "model.json", tmp_path / "here.json", tmp_path / "faster.jsonl"
    assert main(["costmodel", "train", str(rows_file), "--out", str(model)]) == 0
    rows = read_rows(rows_file)
    write_rows([replace(r, timing=replace(r.timing, median_ns=0.8 * r.timing.median_ns)) for r in rows], faster)
    capsys.readouterr()
    assert main(["costmodel", "calibrate", str(model), str(faster), "--out", str(calibrated)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"calibrated on 16 rows (8 programs) of {faster}: {calibrated}"
    assert lines[1].split() == ["model", "scale", "task_mape_before", "task_mape_after"]
    assert lines[2].split() == ["analytic", "0.800", "0.250", "0.000"]  # 3 ns predicted, 2.4 measured
    assert [line.split()[0] for line in lines[3:5]] == ["boosted", "sequence"]
    for line in lines[2:5]:  # each scale is the least task MAPE's on these rows: never worse than none
        before, after = map(float, line.split()[2:4])
        assert after <= before
    loaded = CostModel.load(calibrated)
    assert loaded.scales["analytic"] == pytest.approx(0.8)
    assert loaded.calibrated_on == {"p": 8, "q": 8}
    unscaled = CostModel.load(model).predict(rows, "boosted")
    np.testing.assert_allclose(loaded.predict(rows, "boosted"), loaded.scales["boosted"] * unscaled)


def test_calibrate_on_no_rows_is_refused_in_one_line(rows_file, tmp_path, capsys):
    model, empty = tmp_path / "model.json", tmp_path / "empty.jsonl"
    assert main(["costmodel", "train", str(rows_file), "--out", str(model)]) == 0
    empty.write_text("")
    capsys.readouterr()
    assert main(["costmodel", "calibrate", str(model), str(empty), "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert "no rows to calibrate on" in err and err.count("\n") == 1
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["costmodel", "calibrate", "m.json", "missing.jsonl", "--out", "c.txt"], "--out c.txt: unknown format"),
        (["costmodel", "eval", "missing.jsonl"], "costmodel rows missing.jsonl: no such file"),
        (["costmodel", "train", "missing.jsonl", "--out", "m.txt"], "--out m.txt: unknown format"),
        (["measure", "conv-seed", "--out", "rows.csv"], "--out rows.csv: unknown format"),
    ],
)
def test_refusals_are_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
