"""``dcaccel verify MODEL``: run the model's SDFG and compare its outputs with the reference.

Prints the maximum absolute and relative error per output and exits with status 1 on a mismatch.
With ``--impl`` (or ``--lowered``) the model is first lowered with those implementation choices and
the lowered SDFG is checked; an op with no canonical implementation is then DaCe's own expansion kept
as one opaque task, or refused with ``--strict``. With ``--arch`` the model is partitioned between that
design's accelerator and its host (``--policy``, :mod:`dcaccel.partitioning`) and the partitioned
program is checked: host operators on DaCe's expansions, offloaded ones on their canonical implementations.
"""

import argparse
import sys

from dcaccel.cli.arguments import add_concept, non_negative_float
from dcaccel.cli.models import (
    add_impl_argument,
    add_model_argument,
    add_seed_argument,
    add_strict_argument,
    lower_workload,
    model_with_choices,
)
from dcaccel.cli.partition import DEFAULT_POLICY
from dcaccel.cli.table import format_table
from dcaccel.errors import DcaccelError
from dcaccel.partitioning import partition
from dcaccel.transforms.offload import POLICIES
from dcaccel.verification import VerifyReport, verify


def register(subparsers) -> None:
    """Add the ``verify`` sub-command."""
    parser = subparsers.add_parser("verify", help="check a model's SDFG against onnxruntime or its Python function")
    add_model_argument(parser)
    parser.add_argument(
        "--rtol", type=non_negative_float, default=1e-4, help="relative tolerance (default: %(default)g)"
    )
    parser.add_argument(
        "--atol", type=non_negative_float, default=1e-5, help="absolute tolerance (default: %(default)g)"
    )
    add_seed_argument(parser)
    add_impl_argument(parser)
    parser.add_argument("--lowered", action="store_true", help="lower the model fully before checking it")
    add_strict_argument(parser)
    add_concept(parser, "arch", one=True, default="none: the program is not partitioned")
    add_concept(parser, "partition_policy", one=True, choices=POLICIES, default=f"{DEFAULT_POLICY} with --arch")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Verify the model; 0 when every output matches, 1 otherwise."""
    workload, choices = model_with_choices(args)
    lowered = None
    if args.arch is not None:
        if args.strict:
            raise DcaccelError("--strict and --arch: a partition runs what dcaccel cannot lower on the host")
        lowered = partition(workload, args.arch, args.partition_policy or DEFAULT_POLICY, choices=choices).lowered
    elif args.implementations or args.lowered or args.strict:
        lowered = lower_workload(workload, choices, args.strict)
    report = verify(workload, lowered, rtol=args.rtol, atol=args.atol, seed=args.seed)
    sys.stdout.write(format_report(report) + "\n")
    return 0 if report.passed else 1


def format_report(report: VerifyReport) -> str:
    """The per-output errors and a closing verdict line."""
    verdict = "PASS" if report.passed else "FAIL"
    return (
        f"{format_table(list(report.outputs))}\n"
        f"{verdict}: {report.workload} ({report.program} SDFG) against {report.reference}, "
        f"rtol={report.rtol:g} atol={report.atol:g} seed={report.seed}"
    )
