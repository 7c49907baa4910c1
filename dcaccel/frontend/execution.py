"""Compiling and running SDFGs on a workload's inputs and weights.

Compiling costs seconds (code generation, cmake, gcc), so programs are cached by the content of
their SDFG (:meth:`dace.SDFG.hash_sdfg`): an SDFG changed after a run is compiled again, and equal
SDFGs share one program. Builds go to a folder of the user's cache (``$XDG_CACHE_HOME/dcaccel``, else
``~/.cache/dcaccel``), not to ``.dacecache`` in the working directory, unless DaCe's
``default_build_folder`` is set explicitly (configuration or ``DACE_default_build_folder``). Inputs
are copied before a run: DaCe refuses arrays that are views, and a program may write its arguments.
"""

import os
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import dace
import numpy as np
from dace.codegen.compiled_sdfg import CompiledSDFG

from dcaccel.errors import UnsupportedOpError
from dcaccel.frontend.ops import library_nodes, op_type
from dcaccel.frontend.shapes import concrete_shape, dimension_str

if TYPE_CHECKING:
    from dcaccel.frontend.workload import Workload

#: How many compiled programs the cache keeps (the least recently used is dropped first).
CACHED_PROGRAMS = 32

_PROGRAMS: "OrderedDict[str, CompiledSDFG]" = OrderedDict()  # SDFG content hash -> program


def compiled(sdfg: dace.SDFG) -> CompiledSDFG:
    """The compiled program of ``sdfg``: compiled on first use, then cached by the SDFG's content.

    Raises :class:`UnsupportedOpError` for a library node that has no implementation to expand it.
    """
    key = sdfg.hash_sdfg()
    program = _PROGRAMS.get(key)
    if program is None:
        check_implementations(sdfg)
        _use_cache_build_folder()
        with warnings.catch_warnings():
            # Notes from inside DaCe's library-node expansions and code generator; nothing a user can act on.
            warnings.filterwarnings("ignore", message="Using sets for connectors is discouraged")
            warnings.filterwarnings("ignore", message="Variable-length array .* allocated on the heap")
            program = sdfg.compile()
        _PROGRAMS[key] = program
        while len(_PROGRAMS) > CACHED_PROGRAMS:
            _PROGRAMS.popitem(last=False)
    _PROGRAMS.move_to_end(key)
    return program


#: DaCe's own default build folder, relative to the working directory.
DACE_BUILD_FOLDER = ".dacecache"


def _use_cache_build_folder() -> None:
    """Point DaCe's builds to the user's cache folder if nobody chose a build folder."""
    if "DACE_default_build_folder" in os.environ or dace.Config.get("default_build_folder") != DACE_BUILD_FOLDER:
        return
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    dace.Config.set("default_build_folder", value=str(cache / "dcaccel" / "dacecache"))


def check_implementations(sdfg: dace.SDFG) -> None:
    """Raise :class:`UnsupportedOpError` for the first library node of ``sdfg`` without any implementation.

    DaCe's implementations and dcaccel's canonical ones (registered by :mod:`dcaccel.expansions`) count.
    """
    from dcaccel.expansions import register

    register()

    for node, _ in library_nodes(sdfg):
        if not type(node).implementations:
            raise UnsupportedOpError(op_type(node), node.label, "no implementation to expand it")


def run_sdfg(sdfg: dace.SDFG, workload: "Workload", inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``sdfg`` (the workload's own SDFG or a lowered version of it) on ``inputs``.

    Inputs and outputs are keyed by the names of the workload's tensor specs; the weights of the
    workload are passed to every container of the same name. Returns one array per output.
    """
    symbols = workload.bind_symbols(inputs)
    program = compiled(sdfg)
    parameters = program.sdfg.arglist()  # of the compiled (expanded) SDFG, which may need more symbols
    arguments = {spec.container: np.array(inputs[spec.name], dtype=spec.dtype) for spec in workload.inputs}
    arguments.update({name: np.array(value) for name, value in workload.weights.items() if name in parameters})
    for spec in workload.outputs:
        if spec.container not in arguments:
            desc = sdfg.arrays[spec.container]
            shape = concrete_shape(spec.name, [dimension_str(d) for d in desc.shape], symbols)
            arguments[spec.container] = np.zeros(shape, dtype=spec.dtype)
    arguments.update({name: value for name, value in symbols.items() if name in parameters})
    with warnings.catch_warnings():
        # Outputs named ``__return`` are passed in as arrays we allocated, which DaCe reports.
        warnings.filterwarnings("ignore", message="Return value .* is passed as a regular argument")
        program(**arguments)
    return {spec.name: arguments[spec.container].reshape(spec.concrete_shape(symbols)) for spec in workload.outputs}
