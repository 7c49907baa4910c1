"""The ``dcaccel`` command line: one module per sub-command, each exposing ``register(subparsers)``.

A sub-command module adds its parser with ``set_defaults(run=callable)``; the callable takes the
parsed arguments and returns the exit status. Errors a user can act on (:class:`DcaccelError`)
are printed as one line and exit with status 2; Ctrl-C prints one line and exits with status 130
(a sweep with ``--results`` has already stored every finished point).
"""

import argparse
import importlib
import sys

from dcaccel.errors import DcaccelError

#: Sub-command modules, in the order ``dcaccel --help`` lists them.
COMMANDS = ("info", "verify", "dag", "schedule", "explore")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dcaccel",
        description="Data-centric application-space exploration of spatial DNN accelerators.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"dcaccel.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 0
    try:
        return int(args.run(args) or 0)
    except DcaccelError as err:
        sys.stderr.write(f"dcaccel {args.command}: error: {err}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(f"dcaccel {args.command}: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
