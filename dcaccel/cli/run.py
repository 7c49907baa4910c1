"""``dcaccel run STUDY.yaml``: run a study (``docs/study.md``); ``--resume`` continues its result file, as in
every command (the switch ``store.resume``), and ``dcaccel run --resume FILE.sqlite`` continues the study a
result file recorded.

The summary and ``--out`` are those of ``dcaccel explore``: the best assignment per (P, scheduler), one
table per architecture and partition policy (the mapping strategy's rows per layer), every point written
to a CSV, Parquet or JSON file. A study with a result file (``store.results``) records itself in it, so
``dcaccel run --resume FILE`` needs nothing else: the assignments whose points are stored are skipped. When
assignments fail, the others' summary is printed, the failures are listed on stderr and the exit status is 1.
"""

import argparse
import sys
from pathlib import Path

from dcaccel.cli.arguments import add_concept, check_output
from dcaccel.cli.explore import WRITERS, failure_lines, mapping_summary, summary, write_results
from dcaccel.errors import DcaccelError
from dcaccel.exploration.store import SUFFIXES as RESULT_SUFFIXES


def register(subparsers) -> None:
    """Add the ``run`` sub-command."""
    parser = subparsers.add_parser("run", help="run a study file (docs/study.md), or resume one from its results")
    parser.add_argument(
        "study",
        nargs="?",
        type=Path,
        metavar="STUDY",
        help=f"the study's YAML file, or with --resume a result file ({', '.join(RESULT_SUFFIXES)}) that recorded it",
    )
    add_concept(parser, "resume")
    parser.add_argument("--out", type=Path, metavar="FILE", help=f"write every point to a {', '.join(WRITERS)} file")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read the study (from its file or the result file to resume), check the outputs, run it, print the
    summary and write ``--out``."""
    from dcaccel.exploration.run import SweepError, run_study
    from dcaccel.exploration.store import read_study
    from dcaccel.exploration.study import MAPPING, Study

    if args.study is None:
        raise DcaccelError("give a STUDY file (or --resume and the result file that recorded it)")
    check_output("--out", args.out, WRITERS)
    if args.study.suffix.lower() in RESULT_SUFFIXES:
        if not args.resume:
            raise DcaccelError(f"{args.study}: a result file's study is continued with --resume")
        study = Study.from_yaml(read_study(args.study), f"recorded in {args.study}")
        study = study.replace(results=str(args.study), resume=True)
    else:
        study = Study.load(args.study)
        check_output("store.results", study.store.results, RESULT_SUFFIXES)
        if args.resume:
            if study.store.results is None:
                raise DcaccelError(f"--resume: study {args.study} has no result file (store.results)")
            study = study.replace(resume=True)
    status = 0
    try:
        results = run_study(study)
    except SweepError as err:
        results, status = err.results, 1
        sys.stderr.write("".join(f"{line}\n" for line in [str(err), *failure_lines(err.failures)]))
    table = mapping_summary(results) if study.strategy == MAPPING else summary(results)
    sys.stdout.write(f"{', '.join(study.models)}: {len(results)} points\n{table}\n")
    if args.out is not None and not results.empty:
        write_results(results, args.out)
        sys.stdout.write(f"wrote {args.out}\n")
    return status
