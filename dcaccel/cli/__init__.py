"""The ``dcaccel`` command line: one module per sub-command, each exposing ``register(subparsers)``.

A sub-command module adds its parser with ``set_defaults(run=callable)``; the callable takes the
parsed arguments and returns the exit status. Errors a user can act on (:class:`DcaccelError`)
are printed as one line and exit with status 2; Ctrl-C (or SIGTERM) prints one line and exits with status 130
(a sweep with ``--results`` has already stored every finished point).
"""

import argparse
import importlib
import signal
import sys
import threading
import typing

from dcaccel.errors import DcaccelError

#: Sub-command modules, in the order ``dcaccel --help`` lists them.
COMMANDS = ("info", "verify", "dag", "schedule", "explore", "arch", "map", "partition")


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``dcaccel CMD: error: ...``, exit status 2)
    instead of argparse's usage block; ``--help`` still shows the usage."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def one_line(message: str) -> str:
    """``message`` on one line: line breaks and other control characters (which a user's argument or
    file may carry into a message) are shown escaped."""
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in " ".join(message.splitlines()))


def _terminated(signum, frame) -> typing.NoReturn:
    raise KeyboardInterrupt


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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
    main_thread = threading.current_thread() is threading.main_thread()
    # a terminated command stops like an interrupted one: one line, stored sweep points kept
    previous = signal.signal(signal.SIGTERM, _terminated) if main_thread else None
    try:
        return int(args.run(args) or 0)
    except DcaccelError as err:
        sys.stderr.write(f"dcaccel {args.command}: error: {one_line(str(err))}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(f"dcaccel {args.command}: interrupted\n")
        return 130
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
