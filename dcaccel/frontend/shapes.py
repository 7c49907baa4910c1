"""Shapes with symbolic sizes: evaluating them, and binding symbols from the arrays a user passes.

A dimension is an int or a string (a symbol name such as ``"N"``, or an expression such as
``"N + 1"``), as :class:`~dcaccel.frontend.workload.TensorSpec` stores it.
"""

from collections.abc import Iterable, Mapping

import dace
import numpy as np

from dcaccel.errors import DcaccelError, ShapeError, UnboundSymbolError


def dimension_str(dim) -> int | str:
    """A dimension as a TensorSpec stores it: an int when it is constant, else its expression as a string."""
    expr = dace.symbolic.pystr_to_symbolic(str(dim)) if not isinstance(dim, int | np.integer) else int(dim)
    if isinstance(expr, int) or expr.is_Integer:
        return int(expr)
    return str(expr)


def positive_size(what: str, value) -> int:
    """``value`` as an int when it is a positive integer (``bool`` is not); else :class:`DcaccelError`
    naming ``what`` (``"symbol 'batch'"``, ``"workload 'mmm': size 'N'"``)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise DcaccelError(f"{what}: expected a positive integer, got {value!r}")
    return int(value)


def check_symbols(symbols: Mapping[str, int] | None) -> dict[str, int] | None:
    """The values of symbolic sizes as ints (None stays None); raises :class:`DcaccelError` naming the
    first symbol whose value is not a positive integer."""
    if symbols is None:
        return None
    if not isinstance(symbols, Mapping):
        raise DcaccelError(f"symbols: expected a mapping from names to sizes, got a {type(symbols).__name__}")
    return {str(name): positive_size(f"symbol '{name}'", value) for name, value in symbols.items()}


def check_symbol_names(symbols: Mapping[str, int], known: Iterable[str], source: str) -> None:
    """Raise :class:`DcaccelError` naming the first of ``symbols`` that is none of the ``known`` symbolic
    sizes of ``source`` (a value for a size the model does not have is a mistake, not a default)."""
    known = sorted(known)
    unknown = sorted(set(symbols) - set(known))
    if unknown:
        has = f"its symbolic sizes: {', '.join(known)}" if known else "it has none"
        raise DcaccelError(f"symbol '{unknown[0]}': not a symbolic size of {source} ({has})")


def concrete_shape(tensor: str, shape: Iterable[int | str], symbols: Mapping[str, int]) -> tuple[int, ...]:
    """``shape`` with every symbolic size replaced by its value in ``symbols``.

    Raises :class:`DcaccelError` naming the dimension and ``tensor`` when a size has no value.
    """
    return tuple(_evaluate(tensor, dim, symbols) for dim in shape)


def bind_symbols(specs, arrays: Mapping[str, np.ndarray], defaults: Mapping[str, int]) -> dict[str, int]:
    """Symbol values that make the shapes of ``specs`` fit ``arrays``, starting from ``defaults``.

    A dimension that is a single symbol takes its value from the array (the array's shape wins over
    the default); every dimension is then checked. Raises :class:`ShapeError` naming the tensor when
    an array does not fit, and :class:`DcaccelError` when an input is missing or unknown.
    """
    names = {spec.name for spec in specs}
    missing = [name for name in names if name not in arrays]
    unknown = [name for name in arrays if name not in names]
    if missing or unknown:
        detail = f"missing {sorted(missing)}" if missing else f"unknown {sorted(unknown)}"
        raise DcaccelError(f"inputs do not match the workload's inputs {sorted(names)}: {detail}")
    bound: dict[str, int] = {}
    for spec in specs:
        got = np.shape(arrays[spec.name])
        if len(got) != len(spec.shape):
            raise ShapeError(spec.name, spec.shape, got)
        for dim, size in zip(spec.shape, got, strict=True):
            if isinstance(dim, str) and dim.isidentifier():
                bound.setdefault(dim, int(size))
    symbols = {**defaults, **bound}
    for spec in specs:
        got = tuple(np.shape(arrays[spec.name]))
        expected = tuple(_evaluate(spec.name, dim, symbols) for dim in spec.shape)
        if expected != got:
            raise ShapeError(spec.name, _display(spec.shape, symbols), got)
    return symbols


def _evaluate(tensor: str, dim: int | str, symbols: Mapping[str, int]) -> int:
    """The value of one dimension under ``symbols``."""
    if isinstance(dim, int | np.integer):
        return int(dim)
    expr = dace.symbolic.pystr_to_symbolic(dim)
    unbound = sorted(str(s) for s in expr.free_symbols if str(s) not in symbols)
    if unbound:
        raise UnboundSymbolError(tensor, unbound[0])
    return int(expr.subs({s: symbols[str(s)] for s in expr.free_symbols}))


def _display(shape: Iterable[int | str], symbols: Mapping[str, int]) -> tuple[int | str, ...]:
    """A shape for an error message: evaluated where possible, symbolic where not."""
    shown = []
    for dim in shape:
        try:
            shown.append(_evaluate("", dim, symbols))
        except DcaccelError:
            shown.append(dim)
    return tuple(shown)
