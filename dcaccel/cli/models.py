"""What a sub-command needs to build the workload it works on: the MODEL argument, ``--symbols``, ``--no-fold``
and ``--impl`` choices.

MODEL is a built-in workload name (see :mod:`dcaccel.workloads`), an ONNX file, or
``path/to/file.py:attribute`` (see :mod:`dcaccel.frontend.python_file`).
"""

import argparse
from collections.abc import Callable, Iterable
from typing import Any

from dcaccel import workloads
from dcaccel.cli.arguments import bounded_int, suggest
from dcaccel.errors import DcaccelError, UnboundSymbolError
from dcaccel.frontend import Workload
from dcaccel.frontend.load import resolve
from dcaccel.frontend.shapes import positive_size

MODEL_HELP = "a built-in workload ({}), an .onnx file, or path/to/file.py:attribute"
#: The longest size written on the command line (19 digits: below 2**63; Python refuses 4,300).
MAX_SIZE_DIGITS = 19


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    """Add the positional MODEL argument, ``--symbols`` and ``--no-fold``."""
    parser.add_argument("model", metavar="MODEL", help=MODEL_HELP.format(", ".join(workloads.names())))
    add_symbols_argument(parser)
    add_fold_argument(parser)


def add_symbols_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--symbols NAME=VALUE[,NAME=VALUE...]`` (repeatable): the values of the model's symbolic sizes."""
    parser.add_argument(
        "--symbols",
        metavar="NAME=VALUE[,...]",
        action="extend",
        type=_symbols,
        default=[],
        help="values of the model's symbolic sizes, e.g. batch=2 (a built-in workload: its size options)",
    )


def add_fold_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--no-fold`` (``args.fold`` False): import the model's graph as written instead of as deployed."""
    parser.add_argument(
        "--no-fold",
        dest="fold",
        action="store_false",
        help="keep the graph as written: no BatchNormalization folded into the Conv before it, computed "
        "subgraphs (rotary Sin/Cos tables, relative-position buckets, masks) kept as operators; only the "
        "values that set shapes are computed (default: fold as deployment compilers do)",
    )


def resolve_model(spec: str, symbols: Iterable[tuple[str, int]] = (), fold: bool = True) -> Workload:
    """The workload MODEL names (:func:`dcaccel.frontend.load.resolve`, which ``fold`` goes to), its symbolic
    sizes given by the ``--symbols`` pairs; a dimension left without a value is named with the flag that
    gives it."""
    values = symbol_values(symbols)
    try:
        return resolve(spec, symbols=values or None, fold=fold)
    except UnboundSymbolError as err:
        raise UnboundSymbolError(err.tensor, err.symbol, f"--symbols {err.symbol}=VALUE") from err


def symbol_values(pairs: Iterable[tuple[str, int]]) -> dict[str, int]:
    """The ``--symbols`` pairs as a mapping; raises :class:`DcaccelError` for a name given two values."""
    return _one_value_each(pairs, "--symbols", str)


def _one_value_each(pairs: Iterable[tuple[str, Any]], flag: str, shown: Callable[[Any], str]) -> dict[str, Any]:
    """The ``flag`` pairs as a mapping; raises :class:`DcaccelError` for a key given two different values
    (each written by ``shown``)."""
    values: dict[str, Any] = {}
    for key, value in pairs:
        if values.get(key, value) != value:
            raise DcaccelError(f"{flag} {key}: given twice, as {shown(values[key])} and {shown(value)} (choose one)")
        values[key] = value
    return values


def add_impl_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--impl KEY=NAME`` (repeatable): the implementation of an op type or a node, the program lowered
    once with them (:func:`implementation_choices` refuses a key with several names)."""
    from dcaccel.cli.arguments import add_concept

    add_concept(parser, "implementations", one=True, default="every node's first implementation")


def add_strict_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--strict``: refuse an op without a canonical implementation instead of an opaque task."""
    from dcaccel.cli.arguments import add_concept

    add_concept(parser, "strict")


def lower_workload(workload: Workload, choices: dict[str, str], strict: bool):
    """``workload`` lowered with ``choices``; with ``strict``, a node without a canonical implementation is
    refused first (one-line :class:`UnsupportedOpError`, nothing lowered) instead of kept as an opaque task."""
    if strict:
        from dcaccel.transforms.lower import refuse_opaque

        refuse_opaque(workload.sdfg, choices)
    return workload.lower(choices)


def implementation_choices(pairs: Iterable[tuple[str, tuple[str, ...]]] | None) -> dict[str, str]:
    """The ``--impl`` pairs as the ``choices`` mapping of ``Workload.lower`` (one implementation per key).

    Raises :class:`DcaccelError` when a key is given several implementations (here the program is lowered
    once), in one ``--impl`` or in two.
    """
    one = []
    for key, names in pairs or ():
        if len(names) > 1:
            raise DcaccelError(
                f"--impl {key}={','.join(names)}: this command lowers the model once: one implementation per key"
            )
        one.append((key, names[0]))
    return _one_value_each(one, "--impl", lambda value: f"'{value}'")


def check_choice_keys(workload: Workload, keys: Iterable[str]) -> None:
    """Refuse ``--impl`` keys that name neither a library node nor an op type of ``workload``'s SDFG.

    Node names and op types are those of :func:`dcaccel.frontend.ops.choice_keys`;
    the error names the first unknown key and suggests the closest known name.
    """
    from dcaccel.frontend.ops import choice_keys

    known = choice_keys(workload.sdfg)
    for key in keys:
        if key not in known:
            raise DcaccelError(f"--impl {key}: no node or op type '{key}' in {workload.name}{suggest(key, known)}")


def model_with_choices(args: argparse.Namespace) -> tuple[Workload, dict[str, str]]:
    """The workload of the MODEL argument (with ``--symbols``, ``--no-fold``) and the ``--impl`` choices for it,
    refused in one line before it loads when a key has several implementations, after when it names nothing
    of the workload."""
    choices = implementation_choices(args.implementations)
    workload = resolve_model(args.model, args.symbols, args.fold)
    check_choice_keys(workload, choices)
    return workload, choices


def add_seed_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--seed N`` (default 0): the seed of the random inputs a model is run on."""
    parser.add_argument(
        "--seed", type=bounded_int(0), default=0, help="seed of the random inputs (default: %(default)d)"
    )


def _symbols(text: str) -> list[tuple[str, int]]:
    """Parse ``NAME=VALUE[,NAME=VALUE...]``: names are identifiers, values positive integers (read as
    digits, never evaluated)."""
    pairs = []
    for entry in (part.strip() for part in text.split(",")):
        name, separator, value = entry.partition("=")
        if not separator or not name:
            raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got '{entry}'")
        if not name.isidentifier():
            raise argparse.ArgumentTypeError(f"{entry}: a name must be an identifier")
        if len(value) > MAX_SIZE_DIGITS:
            raise argparse.ArgumentTypeError(f"{name}: a size of {len(value)} characters (at most {MAX_SIZE_DIGITS})")
        try:
            pairs.append((name, positive_size(entry, int(value) if value.isascii() and value.isdigit() else value)))
        except DcaccelError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    return pairs
