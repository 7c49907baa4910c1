"""``dcaccel costmodel train|eval|calibrate``: the learned cost model of a step's time on this CPU (docs/costmodel.md).

``train ROWS --out MODEL.json`` fits the scaled analytic baseline and the two learned models (gradient-boosted
trees on hand features, a convolutional encoder of IR tokens) on the rows of ``dcaccel measure``, writes them
as one JSON file and prints the boosted model's miss cost (its prices per unit and per miss). ``eval ROWS
--model MODEL.json`` scores a model on rows; ``eval ROWS`` alone runs the held-out protocol (leave one
workload family out per fold) and prints the fold table and the means. ROWS defaults to the shipped dataset.
``--again A.jsonl ...`` names other measurements of the same programs: pair order is then scored also over
the pairs of assignments they all put in ROWS' order (``reproduced_pair_order``). ``calibrate MODEL.json
ROWS.jsonl --out OUT.json`` fits each model's factor for the machine ROWS were measured on (a few programs
measured there) and prints it with the task MAPE on ROWS before and after.
"""

import argparse
import sys

import pandas as pd

from dcaccel.cli.arguments import check_output
from dcaccel.costmodel.data import SHIPPED_ROWS
from dcaccel.costmodel.evaluate import calibration_table, evaluate, fold_means, fold_table
from dcaccel.costmodel.measure import read_rows
from dcaccel.costmodel.models import CostModel


def register(subparsers) -> None:
    """Add the ``costmodel`` sub-command and its ``train``, ``eval`` and ``calibrate`` actions."""
    parser = subparsers.add_parser(
        "costmodel", help="train, evaluate and calibrate the learned cost model of task times"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    train = actions.add_parser("train", help="fit the models on measured rows")
    train.add_argument("rows", nargs="?", default=str(SHIPPED_ROWS), metavar="ROWS.jsonl")
    train.add_argument("--out", required=True, metavar="MODEL.json")
    train.set_defaults(run=run_train)
    evaluation = actions.add_parser("eval", help="score a model, or run the leave-one-family-out folds")
    evaluation.add_argument("rows", nargs="?", default=str(SHIPPED_ROWS), metavar="ROWS.jsonl")
    evaluation.add_argument("--model", metavar="MODEL.json", help="score this model (default: the folds)")
    evaluation.add_argument("--families", nargs="+", metavar="FAMILY", help="folds of these families only")
    evaluation.add_argument(
        "--again",
        nargs="+",
        default=[],
        metavar="ROWS.jsonl",
        help="other measurements of the same programs: pair order also over the pairs they all order as ROWS does",
    )
    evaluation.set_defaults(run=run_eval)
    calibration = actions.add_parser("calibrate", help="fit each model's factor for the machine rows were measured on")
    calibration.add_argument("model", metavar="MODEL.json")
    calibration.add_argument("rows", metavar="ROWS.jsonl", help="steps measured on this machine (dcaccel measure)")
    calibration.add_argument("--out", required=True, metavar="OUT.json")
    calibration.set_defaults(run=run_calibrate)


def run_train(args: argparse.Namespace) -> int:
    check_output("--out", args.out, (".json",))
    rows = read_rows(args.rows)
    model = CostModel.train(rows)
    model.save(args.out)
    misses = model.boosted.misses
    prices = ", ".join(f"{level.removesuffix('_misses')} {price:.3f}" for level, price in misses.per_miss.items())
    sys.stdout.write(
        f"trained on {len(rows)} rows of {args.rows}: {args.out}\n"
        f"miss cost (boosted model): {misses.map_ns:.3f} ns a unit of a map, {misses.vector_ns:.3f} of a map "
        f"whose loop is vectorised, {misses.copy_ns:.3f} of a copy; "
        f"ns a miss: {prices}; {misses.atomic_ns:.3f} ns an atomic write\n"
    )
    return 0


def run_eval(args: argparse.Namespace) -> int:
    rows = read_rows(args.rows)
    again = [read_rows(path) for path in args.again]
    if args.model is not None:
        sys.stdout.write(scores_text(evaluate(CostModel.load(args.model), rows, again), bool(again)) + "\n")
        return 0
    sys.stdout.write(folds_text(fold_table(rows, args.families, again=again), bool(again)) + "\n")
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    check_output("--out", args.out, (".json",))
    model, rows = CostModel.load(args.model), read_rows(args.rows)
    calibrated = model.calibrated(rows)
    calibrated.save(args.out)
    programs = len({row.run() for row in rows})
    table = scores_text(calibration_table(model, calibrated, rows), reproduced=False)
    sys.stdout.write(
        f"calibrated on {_counted(len(rows), 'row')} ({_counted(programs, 'program')}) of {args.rows}: {args.out}\n"
        f"{table}\n"
        "(task MAPE on the rows the scales were fitted on; score other programs with "
        f"dcaccel costmodel eval ROWS --model {args.out})\n"
    )
    return 0


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def folds_text(table: pd.DataFrame, reproduced: bool) -> str:
    """A fold table (:func:`~dcaccel.costmodel.evaluate.fold_table`) and its means as text (:func:`scores_text`)."""
    means = scores_text(fold_means(table), reproduced)
    return scores_text(table, reproduced) + "\n\nmean over folds (NaN: no pair to order)\n" + means


def scores_text(table: pd.DataFrame, reproduced: bool) -> str:
    """``table`` as text, with the scores of reproduced pairs only if ``reproduced`` (re-measurements given)."""
    columns = [column for column in table.columns if column.startswith("reproduced_")]
    return (table if reproduced else table.drop(columns=columns)).to_string(index=False, float_format="%.3f")
