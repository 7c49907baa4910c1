"""Argument checks every sub-command shares, run before any work: output files and numbers in range.

Each check raises :class:`DcaccelError` with one line naming the flag, so that a sweep never runs
for minutes and then fails on a path or a number it could have refused at the start.
"""

import argparse
import difflib
import os
from collections.abc import Iterable
from pathlib import Path

from dcaccel.errors import DcaccelError


def check_output(flag: str, path: str | os.PathLike | None, suffixes: Iterable[str]) -> None:
    """Refuse an output ``path`` of ``flag`` whose suffix is not one of ``suffixes`` or whose folder
    does not exist or is not writable (None: the flag was not given)."""
    if path is None:
        return
    folder_text = os.fspath(path).endswith(("/", os.sep))  # Path() drops the separator, open() refuses the path
    path = Path(path)
    suffixes = tuple(suffixes)
    if path.suffix.lower() not in suffixes:
        raise DcaccelError(f"{flag} {path}: unknown format '{path.suffix}' (use one of {', '.join(suffixes)})")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise DcaccelError(f"{flag} {path}: no such folder '{folder}'")
    if path.is_dir() or folder_text:
        raise DcaccelError(f"{flag} {path}: is a folder")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise DcaccelError(f"{flag} {path}: not writable")


def bounded_int(low: int, high: int | None = None):
    """An argparse ``type`` for one integer in ``[low, high]`` (no upper bound when ``high`` is None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None
        if value < low or (high is not None and value > high):
            upper = "" if high is None else f" and at most {high}"
            raise argparse.ArgumentTypeError(f"expected an integer of at least {low}{upper}, got {value}")
        return value

    return parse


def bounded_ints(low: int, high: int | None = None):
    """An argparse ``type`` for a non-empty comma-separated list of integers in ``[low, high]``."""
    one = bounded_int(low, high)

    def parse(text: str) -> list[int]:
        values = [one(part.strip()) for part in text.split(",") if part.strip()]
        if not values:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'")
        return values

    return parse


def non_negative_float(text: str) -> float:
    """An argparse ``type`` for a finite float ≥ 0 (tolerances)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number of at least 0, got {text}")
    return value


def suggest(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` for the closest of ``known`` to ``name`` (case-insensitive), else ``""``."""
    by_folded = {candidate.casefold(): candidate for candidate in known}
    close = difflib.get_close_matches(name.casefold(), by_folded, n=1, cutoff=0.6)
    return f" (did you mean '{by_folded[close[0]]}'?)" if close else ""
