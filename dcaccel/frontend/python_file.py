"""Models defined in a Python file, named ``path/to/file.py:attribute``.

The attribute is a model (a ``torch.nn.Module``, a ``@dace.program``, an ``onnx.ModelProto``, an SDFG
or a :class:`~dcaccel.frontend.workload.Workload`) or a factory called with no arguments that returns
one. The file may define, at module level:

- ``example_inputs``: the example inputs (a tensor or array, a sequence, or a mapping by input name),
  or a function with no arguments returning them; required for a ``torch.nn.Module``;
- ``symbols``: a mapping from symbolic sizes to their values (for ``@dace.program`` models).

Arguments given to :func:`dcaccel.load` take precedence over these.
"""

import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Any

from dcaccel.errors import DcaccelError

#: Separates the file from the attribute in a model specification.
SEPARATOR = ":"


@dataclass(frozen=True)
class FileModel:
    """A model object found in a Python file, with the example inputs and symbols the file declares."""

    model: Any
    example_inputs: Any
    symbols: dict[str, int] | None
    name: str


def is_python_spec(spec: str) -> bool:
    """Whether ``spec`` names an attribute of a Python file (``file.py:attribute``)."""
    path, separator, attribute = spec.rpartition(SEPARATOR)
    return bool(separator) and path.endswith(".py") and attribute.isidentifier()


def read_python_model(spec: str) -> FileModel:
    """Execute the file of ``spec`` and return its attribute (a factory is called), example inputs and symbols.

    Raises :class:`DcaccelError` when the file does not exist, fails to import, has no such attribute,
    or its factory or ``example_inputs`` function raises.
    """
    path, _, attribute = spec.rpartition(SEPARATOR)
    if not os.path.isfile(path):
        raise DcaccelError(f"file '{path}' not found")
    module = _execute(path)
    if not hasattr(module, attribute):
        raise DcaccelError(f"'{path}' has no attribute '{attribute}'")
    model = getattr(module, attribute)
    if _is_factory(model):
        model = _call(path, attribute, model)
    example_inputs = getattr(module, "example_inputs", None)
    if callable(example_inputs):
        example_inputs = _call(path, "example_inputs", example_inputs)
    symbols = getattr(module, "symbols", None)
    return FileModel(model=model, example_inputs=example_inputs, symbols=symbols, name=attribute)


def _execute(path: str):
    """Import the file at ``path`` as a fresh module.

    Raises :class:`DcaccelError` naming the file and line for a syntax error, and the exception for
    any other error the file raises while it is imported (the file is the user's code: any error).
    """
    module_name = f"dcaccel_user_model_{abs(hash(os.path.abspath(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        del sys.modules[module_name]
        raise DcaccelError(f"'{path}' line {err.lineno}: SyntaxError: {err.msg}") from err
    except Exception as err:
        del sys.modules[module_name]
        raise DcaccelError(f"'{path}' failed when imported: {_describe(err)}") from err
    return module


def _call(path: str, name: str, function):
    """``function()``, with any error it raises as a :class:`DcaccelError` naming ``name`` in ``path``."""
    try:
        return function()
    except DcaccelError:
        raise
    except Exception as err:
        raise DcaccelError(f"'{path}': {name}() raised {_describe(err)}") from err


def _describe(err: BaseException) -> str:
    """``ValueError: first line of the message`` (the type alone when the message is empty)."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def _is_factory(model) -> bool:
    """Whether ``model`` is a factory to call rather than a model (classes and plain functions are)."""
    import dace
    import onnx
    from dace.frontend.python.parser import DaceProgram

    if isinstance(model, DaceProgram | dace.SDFG | onnx.ModelProto):
        return False
    if "torch" in sys.modules and isinstance(model, sys.modules["torch"].nn.Module):
        return False
    from dcaccel.frontend.workload import Workload

    return callable(model) and not isinstance(model, Workload)
