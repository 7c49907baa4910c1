"""The ``dcaccel`` command line: one module per sub-command, each exposing ``register(subparsers)``.

A sub-command module adds its parser with ``set_defaults(run=callable)``; the callable takes the
parsed arguments and returns the exit status. Errors a user can act on (:class:`DcaccelError`)
are printed as one line and exit with status 2; Ctrl-C (or SIGTERM) prints one line and exits with status 130
(a sweep with ``--results`` has already stored every finished point).

dcaccel's own warnings are printed as one line each (``dcaccel CMD: warning: ...``, no source line);
the libraries' warnings (PyTorch's exporter, DaCe) and dcaccel's detail (the ``dcaccel`` logger:
buffer nodes extraction inserted, constants onnx-simplifier could not fold) are shown only with
``--verbose`` (``-v``, before or after the sub-command).
"""

import argparse
import contextlib
import importlib
import logging
import signal
import sys
import threading
import typing
import warnings
from pathlib import Path

from dcaccel.errors import DcaccelError

#: The logger whose records ``--verbose`` shows (every module of dcaccel logs below it).
LOGGER = logging.getLogger("dcaccel")
#: The folder of the dcaccel package: a warning attributed to a file in it is dcaccel's own.
PACKAGE = Path(__file__).resolve().parents[1]
_VERBOSE_HELP = "show the libraries' warnings and dcaccel's detail (the dcaccel logger) on stderr"

#: Sub-command modules, in the order ``dcaccel --help`` lists them.
COMMANDS = ("info", "verify", "dag", "schedule", "explore", "run", "arch", "map", "partition", "measure", "costmodel")


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
    parser.add_argument("-v", "--verbose", action="store_true", help=_VERBOSE_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"dcaccel.cli.{name}").register(subparsers)
    for command in subparsers.choices.values():  # given after the sub-command, it must not undo one before it
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE_HELP)
    return parser


@contextlib.contextmanager
def reporting(command: str, verbose: bool):
    """While a sub-command runs: dcaccel's warnings print as one line naming the command, without the
    source line; the other libraries' warnings go to the ``dcaccel`` logger; with ``verbose`` that
    logger's records (debug level and up) print on stderr."""
    previous_format, previous_level = warnings.formatwarning, LOGGER.level
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"dcaccel {command}: %(message)s"))

    def one_line_warning(message, category, filename, lineno, line=None) -> str:
        text = one_line(str(message))
        if Path(filename).resolve().is_relative_to(PACKAGE):
            return f"dcaccel {command}: warning: {text}\n"
        LOGGER.debug("%s from %s:%s: %s", category.__name__, filename, lineno, text)
        return ""

    warnings.formatwarning = one_line_warning
    if verbose:
        LOGGER.addHandler(handler)
        LOGGER.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        warnings.formatwarning = previous_format
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(previous_level)


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
        with reporting(args.command, args.verbose):
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
