"""``dcaccel measure MODEL``: time every task and copy of the lowered model on this machine (docs/costmodel.md).

Lowers the model with the ``--impl`` choices, compiles it with a nanosecond timer on every top-level map
and copy, calls the compiled program ``--repeat`` times (after one warm-up call; in each of ``--processes``
fresh processes when more than one, their samples pooled) and appends one row per
map and copy to ``--out`` (JSON lines: features, IR tokens, median, p10, p90 and minimum of the time,
provenance). The times are this CPU running DaCe's generated code, not the modelled accelerator; run with
``OMP_NUM_THREADS=1`` on a shared machine (the threads are recorded in each row).
"""

import argparse
import sys

from tqdm import tqdm

from dcaccel.cli.arguments import bounded_int, check_output
from dcaccel.cli.models import (
    add_impl_argument,
    add_model_argument,
    add_seed_argument,
    lower_workload,
    model_with_choices,
)
from dcaccel.costmodel.measure import MAX_PROCESSES, MAX_REPEAT, WARMUP, measure, write_rows


def register(subparsers) -> None:
    """Add the ``measure`` sub-command."""
    parser = subparsers.add_parser("measure", help="time every task and copy of a lowered model on this CPU")
    add_model_argument(parser)
    add_impl_argument(parser)
    parser.add_argument(
        "--repeat", type=bounded_int(1, MAX_REPEAT), default=20, help="timed calls (default: %(default)d)"
    )
    parser.add_argument(
        "--processes",
        type=bounded_int(1, MAX_PROCESSES),
        default=1,
        help="fresh processes that each make the timed calls, their samples pooled (default: %(default)d)",
    )
    add_seed_argument(parser)
    parser.add_argument("--family", help="workload family of the rows (default: the model's name)")
    parser.add_argument("--out", required=True, metavar="ROWS.jsonl", help="rows file to append to")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    check_output("--out", args.out, (".jsonl",))
    workload, choices = model_with_choices(args)
    lowered = lower_workload(workload, choices, False)
    calls = (WARMUP + args.repeat) * args.processes
    with tqdm(total=calls, desc=f"measure {workload.name}", unit="call", file=sys.stderr) as bar:
        rows = measure(
            lowered,
            family=args.family or workload.name,
            repeat=args.repeat,
            processes=args.processes,
            seed=args.seed,
            progress=bar.update,
        )
    write_rows(rows, args.out)
    total = sum(row.timing.median_ns for row in rows)
    sys.stdout.write(f"{len(rows)} rows appended to {args.out}: {workload.name}, median total {total / 1e3:.1f} µs\n")
    return 0
