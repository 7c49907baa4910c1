"""The single entry point of the frontend: :func:`load` any supported model into a Workload.

A model from ONNX or PyTorch is imported as deployment compilers see it by default: constants folded and
batch normalization folded into the convolution before it. ``fold=False`` keeps the graph as written
(batch normalization stays, computed position subgraphs such as rotary ``Sin``/``Cos`` tables or T5's
relative buckets stay operators; only the values that set shapes are computed). ``docs/import.md`` says
which graph ``verify`` compares with (the model as written, always).
"""

import contextlib
import contextvars
import os
import sys
from collections.abc import Mapping

import dace
import onnx
from dace.frontend.python.parser import DaceProgram

from dcaccel.errors import DcaccelError
from dcaccel.frontend.onnx_import import from_onnx
from dcaccel.frontend.program_import import from_program, from_sdfg
from dcaccel.frontend.python_file import is_python_spec, read_python_model
from dcaccel.frontend.shapes import check_symbols
from dcaccel.frontend.workload import Workload

#: Whether the ONNX and PyTorch imports of the current context fold (set by :func:`resolve` around a
#: built-in workload, whose module calls :func:`load` itself).
_FOLD: contextvars.ContextVar[bool] = contextvars.ContextVar("fold", default=True)


def load(
    model,
    example_inputs=None,
    *,
    symbols: Mapping[str, int] | None = None,
    name: str | None = None,
    fold: bool | None = None,
) -> Workload:
    """Import ``model`` into a :class:`Workload`.

    ``model`` is one of: a ``torch.nn.Module`` (with ``example_inputs``), an ONNX file path or
    ``onnx.ModelProto``, a ``@dace.program`` (annotated, or with ``example_inputs``), a ``dace.SDFG``,
    a ``"path/to/file.py:attribute"`` string (see :mod:`dcaccel.frontend.python_file`), or a Workload
    (returned as is). ``symbols`` gives values of symbolic sizes (positive integers); ``name`` names
    the workload. ``fold`` (ONNX and PyTorch models): True folds constants and batch normalization as
    deployed, False keeps the graph as written; None (the default) is True unless :func:`resolve` was
    given ``fold=False``.
    """
    if isinstance(model, Workload):
        return model
    fold = _FOLD.get() if fold is None else fold
    symbols = check_symbols(symbols)
    if isinstance(model, str | os.PathLike) and is_python_spec(os.fspath(model)):
        found = read_python_model(os.fspath(model))
        return load(
            found.model,
            found.example_inputs if example_inputs is None else example_inputs,
            symbols=found.symbols if symbols is None else symbols,
            name=name or found.name,
            fold=fold,
        )
    if isinstance(model, str | os.PathLike | onnx.ModelProto):
        return from_onnx(model, example_inputs, symbols=symbols, name=name, fold=fold)
    if isinstance(model, DaceProgram):
        return from_program(model, example_inputs, symbols=symbols, name=name)
    if isinstance(model, dace.SDFG):
        return from_sdfg(model, symbols=symbols, name=name)
    # A torch module can only exist if torch was imported; checking so keeps torch's import off other paths.
    if "torch" in sys.modules and isinstance(model, sys.modules["torch"].nn.Module):
        from dcaccel.frontend.torch_import import from_torch

        return from_torch(model, example_inputs, name=name, fold=fold)
    raise DcaccelError(
        f"cannot load a {type(model).__name__}: expected a torch.nn.Module, an ONNX model or file, "
        "a @dace.program, an SDFG or 'file.py:attribute'"
    )


def resolve(model, *, symbols: Mapping[str, int] | None = None, fold: bool = True) -> Workload:
    """The workload a user names: a built-in workload's name (``"lenet"``), an ONNX file, a
    ``"path/to/file.py:attribute"`` spec, or anything :func:`load` takes.

    ``symbols`` gives values of symbolic sizes as :func:`load` takes them; for a built-in workload they
    are its size options (:func:`dcaccel.workloads.get`). ``fold`` is :func:`load`'s, for a built-in
    workload too (``fold=False`` keeps ResNet-18's batch normalization as written). Raises
    :class:`DcaccelError` for a name that is none of these (listing the built-in names), a missing
    file, a file that is not a model, or a symbol the model has no size of that name for.
    """
    if not isinstance(model, str):
        return load(model, symbols=symbols, fold=fold)
    from dcaccel import workloads

    if model in workloads.names():
        with _folding(fold):
            return workloads.get(model, **(check_symbols(symbols) or {}))
    if is_python_spec(model) or model.endswith(".onnx") or os.path.exists(model):
        return load(model, symbols=symbols, fold=fold)
    raise DcaccelError(
        f"unknown model '{model}': not a built-in workload ({', '.join(workloads.names())}), "
        "an .onnx file or path/to/file.py:attribute"
    )


@contextlib.contextmanager
def _folding(fold: bool):
    """Run the block with :func:`load`'s default ``fold`` set to ``fold``."""
    token = _FOLD.set(fold)
    try:
        yield
    finally:
        _FOLD.reset(token)
