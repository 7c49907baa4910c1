"""Compiling and running SDFGs on a workload's inputs and weights.

Compiling costs seconds (code generation, cmake, gcc), so programs are cached by everything that
changes the generated code (:func:`program_key`): an SDFG changed after a run (its instrumentation
and names included) or compiled under another DaCe configuration is compiled again, and equal SDFGs
share one program. Builds go to a folder of the user's cache (``$XDG_CACHE_HOME/dcaccel``, else
``~/.cache/dcaccel``), not to ``.dacecache`` in the working directory, unless DaCe's
``default_build_folder`` is set explicitly (configuration or ``DACE_default_build_folder``). Inputs
are copied before a run: DaCe refuses arrays that are views, and a program may write its arguments.
"""

import hashlib
import json
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
from dcaccel.transforms.host import host_callbacks, raising_host_failures

if TYPE_CHECKING:
    from dcaccel.frontend.workload import Workload

#: How many compiled programs the cache keeps (the least recently used is dropped first).
CACHED_PROGRAMS = 32

_PROGRAMS: "OrderedDict[str, CompiledSDFG]" = OrderedDict()  # program_key -> program


def compiled(sdfg: dace.SDFG) -> CompiledSDFG:
    """The compiled program of ``sdfg``: compiled on first use, then cached by :func:`program_key`.

    An ONNX node without any implementation runs on the host through onnxruntime (it is compiled as its host
    task, :func:`dcaccel.transforms.opaque.with_host_tasks`); raises :class:`UnsupportedOpError` for another
    library node that has no implementation to expand it.
    """
    _use_cache_build_folder()
    key = program_key(sdfg)
    program = _PROGRAMS.get(key)
    if program is None:
        from dcaccel.transforms.opaque import with_host_tasks  # (it imports dcaccel.frontend)

        sdfg = with_host_tasks(sdfg)
        check_implementations(sdfg)
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


def program_fingerprint(sdfg: dace.SDFG) -> str:
    """What a program's numbers depend on, in 16 hex digits: the SHA-256 DaCe's ``hash_sdfg`` computes over
    the SDFG (operators, shapes, attributes; not names or identities), without the paths of the source files
    a ``@dace.program`` was parsed from (where the package happens to be installed)."""
    return sdfg.hash_sdfg(_without_source_files(sdfg.to_json()))[:16]


def _without_source_files(value):
    """``value`` (an SDFG's JSON) without its SDFGs' ``source_files``."""
    if isinstance(value, dict):
        return {key: _without_source_files(item) for key, item in value.items() if key != "source_files"}
    if isinstance(value, list):
        return [_without_source_files(item) for item in value]
    return value


def program_key(sdfg: dace.SDFG) -> str:
    """What the compile cache keys ``sdfg``'s program on: the SHA-256 of its JSON without the identities
    of its objects (their ``guid``, new for every node built) and of DaCe's configuration (compiler and
    flags, instrumentation settings, default library implementations; values YAML cannot hold as JSON
    by their text).

    Not :meth:`dace.SDFG.hash_sdfg`: it leaves out every ``name`` attribute (the program's: the name of
    the library and its functions; a library node's: the names its expansion gives) and every
    ``instrument`` (timers and data instrumentation of the SDFG, its states and nodes), so a program
    compiled with timers would be served the build without them, and a renamed program another
    program's build.
    """
    digest = hashlib.sha256(json.dumps(_without_identities(sdfg.to_json())).encode())
    digest.update(json.dumps(dace.Config.get(), sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _without_identities(json_obj):
    """The JSON of an SDFG without the ``guid`` in the attributes of its objects."""
    if isinstance(json_obj, dict):
        return {
            key: _without_identities(
                {name: value for name, value in item.items() if name != "guid"}
                if key == "attributes" and isinstance(item, dict)
                else item
            )
            for key, item in json_obj.items()
        }
    if isinstance(json_obj, list):
        return [_without_identities(item) for item in json_obj]
    return json_obj


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
    workload are passed to every container of the same name. Returns one array per output; raises
    :class:`UnsupportedOpError` naming op and node when a host task's onnxruntime call failed.
    """
    symbols = workload.bind_symbols(inputs)
    program = compiled(sdfg)
    arguments = program_arguments(program, workload, inputs)
    with warnings.catch_warnings():
        # Outputs named ``__return`` are passed in as arrays we allocated, which DaCe reports.
        warnings.filterwarnings("ignore", message="Return value .* is passed as a regular argument")
        with raising_host_failures():  # a host task's onnxruntime call that failed, named (transforms.host)
            program(**arguments)
    return {spec.name: arguments[spec.container].reshape(spec.concrete_shape(symbols)) for spec in workload.outputs}


def program_arguments(
    program: CompiledSDFG, workload: "Workload", inputs: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray | int]:
    """The keyword arguments of ``program`` (compiled from the workload's SDFG or a lowered version) for a
    run on ``inputs``: copies of the inputs, the weights it takes, zeroed outputs and the symbol values."""
    symbols = workload.bind_symbols(inputs)
    parameters = program.sdfg.arglist()  # of the compiled (expanded) SDFG, which may need more symbols
    arguments = {spec.container: np.array(inputs[spec.name], dtype=spec.dtype) for spec in workload.inputs}
    arguments.update({name: np.array(value) for name, value in workload.weights.items() if name in parameters})
    for spec in workload.outputs:
        if spec.container not in arguments:
            desc = program.sdfg.arrays[spec.container]
            shape = concrete_shape(spec.name, [dimension_str(d) for d in desc.shape], symbols)
            arguments[spec.container] = np.zeros(shape, dtype=spec.dtype)
    arguments.update({name: value for name, value in symbols.items() if name in parameters})
    arguments.update(host_callbacks(parameters))  # the onnxruntime calls of host tasks (dcaccel.transforms.host)
    return arguments
