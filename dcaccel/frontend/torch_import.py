"""Import of PyTorch modules: export to ONNX in memory, then import the ONNX model.

The module is exported with the TorchScript exporter (``torch.onnx.export(..., dynamo=False)``) in
inference mode, at the example inputs' shapes. The exporter writes the operators as the module does:
batch normalization stays a ``BatchNormalization`` node (with its running statistics) and weights
keep their parameter names; folding (constants, batch normalization into the convolution before it)
is left to the ONNX import (see :func:`dcaccel.frontend.onnx_import.from_onnx` and its ``fold``). Its input
names are the parameter names of ``forward``; its outputs are ``output`` (or ``output_0``, ...).
"""

import inspect
import io
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import torch

from dcaccel.errors import DcaccelError
from dcaccel.frontend.onnx_import import from_onnx
from dcaccel.frontend.workload import Origin, Workload

#: ONNX opset of the export (LayerNormalization needs 17 or later).
OPSET = 18


def from_torch(
    module: torch.nn.Module,
    example_inputs: torch.Tensor | np.ndarray | Sequence | Mapping | None,
    *,
    name: str | None = None,
    fold: bool = True,
) -> Workload:
    """Export ``module`` on ``example_inputs`` to ONNX and import it (see :func:`from_onnx`, which ``fold`` goes to).

    ``example_inputs`` is one tensor or array, a sequence in ``forward``'s parameter order, or a
    mapping from parameter names. Raises :class:`DcaccelError` if there are none or ``forward``
    fails on them.
    """
    name = name or type(module).__name__
    if example_inputs is None:
        raise DcaccelError(f"torch model '{name}' needs example inputs to be exported")
    input_names, args = _arguments(module, example_inputs)
    training = module.training
    module.eval()
    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings():
            # The TorchScript exporter is chosen on purpose (the dynamo exporter needs onnxscript).
            warnings.filterwarnings(
                "ignore", message=".*legacy TorchScript-based ONNX export", category=DeprecationWarning
            )
            torch.onnx.export(
                module,
                args,
                buffer,
                dynamo=False,
                opset_version=OPSET,
                training=torch.onnx.TrainingMode.PRESERVE,
                do_constant_folding=False,
                input_names=input_names,
            )
    except (RuntimeError, ValueError, TypeError, IndexError) as err:
        shapes = ", ".join(f"{n}{tuple(a.shape)}" for n, a in zip(input_names, args, strict=True))
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DcaccelError(f"torch model '{name}' fails on the example inputs {shapes}: {message}") from err
    finally:
        module.train(training)
    proto = onnx.load_from_string(buffer.getvalue())
    proto.graph.name = name
    _name_outputs(proto)
    return from_onnx(proto, name=name, origin=Origin.TORCH, fold=fold)


def _name_outputs(proto: onnx.ModelProto) -> None:
    """Rename the graph outputs to ``output`` (or ``output_0``, ``output_1``, ...) throughout the graph."""
    outputs = proto.graph.output
    names = ["output"] if len(outputs) == 1 else [f"output_{i}" for i in range(len(outputs))]
    renamed = {value.name: new for value, new in zip(outputs, names, strict=True)}
    for value in outputs:
        value.name = renamed[value.name]
    for node in proto.graph.node:
        node.input[:] = [renamed.get(n, n) for n in node.input]
        node.output[:] = [renamed.get(n, n) for n in node.output]


def _arguments(module: torch.nn.Module, example_inputs) -> tuple[list[str], tuple[torch.Tensor, ...]]:
    """The input names (``forward``'s parameters) and the example inputs as a tuple of tensors."""
    parameters = [
        p.name
        for p in inspect.signature(module.forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if isinstance(example_inputs, Mapping):
        unknown = sorted(set(example_inputs) - set(parameters))
        if unknown:
            raise DcaccelError(f"example inputs {unknown} are not parameters of {type(module).__name__}.forward")
        names = [p for p in parameters if p in example_inputs]
        values = [example_inputs[p] for p in names]
    else:
        values = list(example_inputs) if isinstance(example_inputs, list | tuple) else [example_inputs]
        names = parameters[: len(values)]
        if len(names) < len(values):
            raise DcaccelError(f"{len(values)} example inputs for {type(module).__name__}.forward{tuple(parameters)}")
    return names, tuple(_tensor(v) for v in values)


def _tensor(value) -> torch.Tensor:
    """An example input as a CPU tensor (arrays are copied)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    return torch.from_numpy(np.array(value))
