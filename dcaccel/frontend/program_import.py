"""Import of DaCe-native programs: a ``@dace.program`` (kept as the reference) or an existing SDFG.

A program's inputs are its parameters that the SDFG reads; its outputs are its returned values
(containers ``__return``, ``__return_0``, ...) followed by the parameters it writes. Symbolic sizes
stay symbolic in the SDFG; ``symbols`` (or the shapes of ``example_inputs``) give their default values.
"""

import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

import dace
import numpy as np
from dace import data as dt
from dace.frontend.python.parser import DaceProgram

from dcaccel.errors import DcaccelError
from dcaccel.frontend.shapes import bind_symbols, check_symbol_names, dimension_str
from dcaccel.frontend.workload import Origin, TensorSpec, Workload

_RETURN = re.compile(r"__return(_(\d+))?$")


def from_program(
    program: DaceProgram,
    example_inputs: Sequence | Mapping | None = None,
    *,
    symbols: Mapping[str, int] | None = None,
    name: str | None = None,
) -> Workload:
    """Parse ``program`` into an SDFG; its Python function becomes the workload's reference.

    A program whose parameters are all annotated (``A: dace.float64[N, K]``) is parsed symbolically;
    otherwise ``example_inputs`` (in parameter order, or by name) give the argument types and shapes.
    Example inputs also bind symbol values; one that does not fit its annotation raises
    :class:`~dcaccel.errors.ShapeError`.
    """
    title = program.f.__name__
    parameters = inspect.signature(program.f).parameters
    examples = _by_parameter(program, example_inputs)
    annotated = all(p.annotation is not inspect.Parameter.empty for p in parameters.values())
    if not annotated and examples is None:
        missing = [p for p, v in parameters.items() if v.annotation is inspect.Parameter.empty]
        raise DcaccelError(f"program '{title}': parameter '{missing[0]}' has no type; give example inputs")
    try:
        sdfg = program.to_sdfg() if annotated else program.to_sdfg(**examples)
    except (SyntaxError, TypeError, ValueError, NotImplementedError) as err:
        raise DcaccelError(f"program '{title}' cannot be parsed: {str(err).strip().splitlines()[0]}") from err
    workload = from_sdfg(sdfg, symbols=symbols, name=name or title, parameters=list(parameters))
    if examples is not None:
        symbols = bind_symbols(workload.inputs, examples, workload.symbols)
    return replace(workload, origin=Origin.DACE_PROGRAM, reference=program.f, symbols=dict(symbols or {}))


def from_sdfg(
    sdfg: dace.SDFG,
    *,
    symbols: Mapping[str, int] | None = None,
    name: str | None = None,
    parameters: Sequence[str] | None = None,
) -> Workload:
    """Wrap an existing SDFG: its non-transient containers become inputs and outputs.

    ``parameters`` orders the inputs (default: the SDFG's ``arg_names``, then the other containers by name).
    """
    if symbols:
        check_symbol_names(symbols, sdfg.free_symbols, f"SDFG '{sdfg.name}'")
    read, written = sdfg.read_and_write_sets()
    containers = [k for k, desc in sdfg.arrays.items() if not desc.transient]
    names = list(parameters or sdfg.arg_names)
    order = names + sorted(k for k in containers if k not in names)
    arguments = [k for k in order if k in containers and not _RETURN.match(k)]
    returns = sorted((k for k in containers if _RETURN.match(k)), key=lambda k: int(_RETURN.match(k).group(2) or 0))
    inputs = [_spec(sdfg, k) for k in arguments if k in read or k not in written]
    outputs = [_spec(sdfg, k) for k in returns] + [_spec(sdfg, k) for k in arguments if k in written]
    return Workload(
        name=name or sdfg.name,
        origin=Origin.SDFG,
        sdfg=sdfg,
        inputs=inputs,
        outputs=outputs,
        symbols=dict(symbols or {}),
    )


def _spec(sdfg: dace.SDFG, container: str) -> TensorSpec:
    """The spec of a non-transient container (symbolic sizes as strings)."""
    desc = sdfg.arrays[container]
    shape = () if isinstance(desc, dt.Scalar) else tuple(dimension_str(d) for d in desc.shape)
    return TensorSpec(container, shape, desc.dtype.as_numpy_dtype())


def _by_parameter(program: DaceProgram, example_inputs) -> dict[str, np.ndarray] | None:
    """Example inputs keyed by parameter name, as owned numpy arrays (DaCe refuses views)."""
    if example_inputs is None:
        return None
    names = list(inspect.signature(program.f).parameters)
    if isinstance(example_inputs, Mapping):
        pairs = dict(example_inputs)
    else:
        values = list(example_inputs) if isinstance(example_inputs, list | tuple) else [example_inputs]
        if len(values) != len(names):
            raise DcaccelError(f"{len(values)} example inputs for program '{program.f.__name__}{tuple(names)}'")
        pairs = dict(zip(names, values, strict=True))
    unknown = sorted(set(pairs) - set(names))
    if unknown:
        raise DcaccelError(f"example inputs {unknown} are not parameters of program '{program.f.__name__}'")
    return {key: np.array(_numpy(value)) for key, value in pairs.items()}


def _numpy(value):
    """A tensor or array-like as something numpy can copy."""
    return value.detach().cpu().numpy() if hasattr(value, "detach") else value
