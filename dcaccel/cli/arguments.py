"""Argument checks every sub-command shares, run before any work: output files and numbers in range.

Each check raises :class:`DcaccelError` with one line naming the flag, so that a sweep never runs
for minutes and then fails on a path or a number it could have refused at the start.
"""

import argparse
import difflib
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dcaccel.errors import DcaccelError
from dcaccel.exploration.store import MAX_INTEGER
from dcaccel.exploration.study import MAX_PES


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


# ---------------------------------------------------------------------- the vocabulary of dcaccel.Study


@dataclass(frozen=True)
class Concept:
    """One concept of the command line: the :class:`~dcaccel.Study` field (named flat, as ``Study.of`` takes
    it) whose name, description, unit, default and validation the flag of every sub-command takes, the flag's
    spelling and how one value is written. ``several``: the field holds several values, written as a comma
    list (``--pes 16,128``) or by repeating the flag; a command that runs once takes one. ``checked``: each
    value is validated by the field's own checks as it is read (an objective is checked by the command: what
    it may minimise depends on the strategy)."""

    field: str
    flag: str
    metavar: str
    parse: Callable[[str], Any] = str
    several: bool = False
    separator: str | None = ","  # None: one value per flag (a file path may hold a comma)
    checked: bool = True
    high: int | None = None  # the largest value the command line takes


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None


def _implementation(text: str) -> tuple[str, tuple[str, ...]]:
    """One ``--impl KEY=NAME[,NAME...]``."""
    key, sep, names = text.partition("=")
    values = tuple(name.strip() for name in names.split(",") if name.strip())
    if not sep or not key.strip() or not values:
        raise argparse.ArgumentTypeError(f"expected KEY=NAME[,NAME...], got {text!r}")
    return key.strip(), values


def _parameter(text: str) -> tuple[str, tuple]:
    """One ``--arch-param PATH=VALUE[,VALUE...]`` (values are YAML scalars)."""
    from dcaccel.architecture import parse_parameter

    try:
        path, values = parse_parameter(text)
    except DcaccelError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return path, tuple(values)


#: The concepts, by Study field. A flag's name is the field's (``--edge-volume``) but where the command line
#: has always said it shorter: ``--impl``, ``--onchip``, ``--policy``, ``--arch-param``.
VOCABULARY = {
    concept.field: concept
    for concept in (
        Concept("implementations", "--impl", "KEY=NAME[,NAME...]", _implementation, True, None),
        Concept("strategy", "--strategy", "NAME"),
        Concept("max_assignments", "--max-assignments", "N", _integer),
        Concept("objective", "--objective", "NAME", checked=False),
        Concept("arch", "--arch", "NAME|FILE", str, True, None),
        Concept("arch_params", "--arch-param", "PATH=VALUE[,VALUE...]", _parameter, True, None),
        Concept("pes", "--pes", "P[,P...]", _integer, True, high=MAX_PES),
        Concept("scheduler", "--scheduler", "NAME[,NAME...]", str, True),
        Concept("onchip_memory", "--onchip", "ELEMENTS[,ELEMENTS...]", _integer, True, high=MAX_INTEGER),
        Concept("partitioning", "--partitioning", "relaxed|strict"),
        Concept("partition_policy", "--policy", "POLICY[,POLICY...]", str, True),
        Concept("min_nodes", "--min-nodes", "N", _integer),
        Concept("min_work_share", "--min-work-share", "SHARE", _number),
        Concept("partition_objective", "--partition-objective", "NAME"),
        Concept("granularity", "--granularity", "task|coarse|tiles=T"),
        Concept("edge_volume", "--edge-volume", "exact|reference"),
        Concept("executor", "--executor", "local|process|dask"),
        Concept("workers", "--workers", "N", _integer),
        Concept("address", "--address", "URL"),
        Concept("results", "--results", "FILE"),
        Concept("cost", "--cost", "analytic|learned:FILE", separator=None),
    )
}

#: The fields written as KEY=VALUE pairs, each flag one pair, repeated flags merged.
PAIRS = ("implementations", "arch_params")

#: The Study fields that are switches: the flag that sets them, and the value it sets.
SWITCHES = {"strict": ("--strict", True), "compose": ("--no-compose", False), "resume": ("--resume", True)}


def study_field(name: str):
    """The pydantic model (the Study or one of its parts) that holds field ``name``, and the field."""
    from dcaccel.exploration.study import PARTS, Study

    for model in (Study, *PARTS.values()):
        if name in model.model_fields and name not in PARTS:
            return model, model.model_fields[name]
    raise KeyError(name)


def study_default(name: str) -> Any:
    """The default of the Study field ``name`` (named flat)."""
    _, info = study_field(name)
    return info.get_default(call_default_factory=True)


def default_text(name: str) -> str:
    """The default of the Study field ``name`` as the command line writes it; for a field left unset by
    default, what unset means where the field says (``json_schema_extra["unset"]``: ``pes``)."""
    _, info = study_field(name)
    value = study_default(name)
    return (info.json_schema_extra or {}).get("unset", "unset") if value is None else shown_default(value)


def shown_default(value: Any) -> str:
    """A default as the command line writes it."""
    if value is None:
        return "unset"
    if isinstance(value, (tuple, list)):
        return ",".join(str(part) for part in value)
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def validated(name: str, value: Any) -> Any:
    """``value`` of the Study field ``name`` as the Study validates it (its own checks: ranges, known
    names); raises :class:`argparse.ArgumentTypeError` in the Study's words."""
    import pydantic

    model, _ = study_field(name)
    try:
        checked = model.__pydantic_validator__.validate_assignment(model.model_construct(), name, value)
    except pydantic.ValidationError as err:
        message = err.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")
        unknown = re.fullmatch(r"unknown [\w ]+ '(.*)' \(expected one of (.*)\)", message)
        if unknown:  # the Study's refusal of a name it does not know: the closest it does
            message += suggest(unknown[1], unknown[2].split(", "))
        raise argparse.ArgumentTypeError(message) from None
    return getattr(checked, name)


def concept_help(name: str, default: str | None = None, one: bool = False) -> str:
    """The help text of the flag of Study field ``name``: the field's description, its unit, its default
    (``default`` replaces the Study's where the command takes it from elsewhere, e.g. the design)."""
    _, info = study_field(name)
    extra = info.json_schema_extra or {}
    text = info.description
    if "unit" in extra:
        text += f"; unit: {extra['unit']}"
    concept = VOCABULARY.get(name)
    if concept is not None and concept.several and not one:
        text += "; repeatable" + (", or a comma list" if concept.separator else "")
    if default is None and study_default(name) is None and "unset" not in extra:  # the description says
        return text
    return f"{text} (default: {default if default is not None else default_text(name)})"


class _Deprecated(argparse.Action):
    """Stores through the concept's own action after one line saying which flag replaces the old one."""

    def __init__(self, option_strings, dest, inner: argparse.Action, new: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.inner, self.new = inner, new

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string != self.new:
            sys.stderr.write(f"{parser.prog}: warning: {option_string} is deprecated, use {self.new}\n")
        self.inner(parser, namespace, values, option_string)


def add_concept(
    parser: argparse.ArgumentParser,
    name: str,
    *,
    one: bool = False,
    default: str | None = None,
    old: str | None = None,
    **options,
) -> argparse.Action:
    """Add the flag of Study field ``name`` (:data:`VOCABULARY`, :data:`SWITCHES`) to ``parser``: its name,
    help (description, unit, default), metavar and type from the Study, every value validated by the
    Study's own checks while the arguments are read. ``args.<name>`` is None when the flag is not given
    (the Study's default, or ``default``, the text that says what the command takes instead). ``one``: the
    command takes one value of a field that holds several (``--impl`` and ``--arch-param`` are always
    repeatable: a command that lowers once refuses a key with several names). ``old``: the command's former
    spelling of the flag, still read with a one-line deprecation warning. ``options`` go to ``add_argument``
    (``choices``, ``required``)."""
    if name in SWITCHES:
        flag, value = SWITCHES[name]
        _, info = study_field(name)
        action = parser.add_argument(
            flag,
            dest=name,
            action="store_const",
            const=value,
            default=not value,
            help=info.description if value else f"off (default: on): {info.description}",
            **options,
        )
        action.study_field = name
        return action
    concept = VOCABULARY[name]
    several = concept.several and (not one or name in PAIRS)

    def parse(text: str):
        parts = text.split(concept.separator) if concept.separator else [text]
        values = [concept.parse(part.strip()) for part in parts if part.strip()]
        if not values:
            raise argparse.ArgumentTypeError(f"expected {concept.metavar}, got {text!r}")
        if name in PAIRS:
            validated(name, dict(values))
            return values
        for value in values:
            if concept.high is not None and value > concept.high:
                raise argparse.ArgumentTypeError(f"{concept.flag} {value}: at most {concept.high}")
        if not several and len(values) > 1:
            raise argparse.ArgumentTypeError(f"expected one {metavar}, got {text!r}")
        if concept.checked:
            values = list(validated(name, tuple(values))) if concept.several else [validated(name, values[0])]
        return values if several else values[0]

    metavar = concept.metavar if several else concept.metavar.split("[")[0]
    inner = argparse._ExtendAction if several else argparse._StoreAction
    deprecated = {} if old is None else {"action": _Deprecated, "inner": inner([concept.flag, old], name)}
    action = parser.add_argument(
        concept.flag,
        *([old] if old else []),
        dest=name,
        type=parse,
        default=None,
        metavar=metavar,
        help=concept_help(name, default, one and not several),
        action=deprecated.pop("action", inner),
        **({**deprecated, "new": concept.flag} if old else {}),
        **options,
    )
    action.study_field = name  # what vocabulary() and its test read
    return action


def generated(parser: argparse.ArgumentParser, flag: str) -> str | None:
    """The Study field whose flag :func:`add_concept` added to ``parser`` as ``flag`` (None: ``parser`` has no
    such flag, or it is its own, or a former spelling)."""
    action = parser._option_string_actions.get(flag)
    return getattr(action, "study_field", None) if action is not None and action.option_strings[0] == flag else None


@dataclass(frozen=True)
class VocabularyRow:
    """One flag of the vocabulary as ``docs/cli.md`` tabulates it."""

    flag: str
    field: str  # the Study field, its part named (partition.partition_policy)
    meaning: str
    unit: str
    default: str  # the Study's
    commands: str  # the sub-commands that take it


def vocabulary(parser: argparse.ArgumentParser) -> list[VocabularyRow]:
    """The flags of :data:`VOCABULARY` and :data:`SWITCHES` with the sub-commands of ``parser`` (``dcaccel``'s)
    that take each (by :func:`add_concept`), in vocabulary order."""
    from dcaccel.exploration.study import PARTS, Study

    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction)).choices
    flags = {**{name: concept.flag for name, concept in VOCABULARY.items()}, **{n: f for n, (f, _) in SWITCHES.items()}}
    rows = []
    for name, flag in flags.items():
        model, info = study_field(name)
        part = next((part for part, kind in PARTS.items() if kind is model and model is not Study), None)
        taking = [command for command, sub in commands.items() if generated(sub, flag) == name]
        rows.append(
            VocabularyRow(
                flag,
                f"{part}.{name}" if part else name,
                info.description,
                (info.json_schema_extra or {}).get("unit", "-"),
                default_text(name),
                ", ".join(taking),
            )
        )
    return rows
