"""Import of ONNX models (a file or an ``onnx.ModelProto``) with DaCe's ONNX importer.

The model is prepared first (:mod:`dcaccel.frontend.onnx_prepare`: default domain and opset
normalized, checked, constants folded and shapes inferred with no operator fusion, inference no-ops
removed, batch normalization folded into the convolution before it; or, with ``fold=False``, only the
values that set shapes computed and the graph otherwise kept as written); DaCe's importer
(``dace.ml.ONNXModel``, the merged DaCeML) then builds an SDFG with one ONNX library node per
operator, and initializers become weights. Dynamic input dimensions (``dim_param``)
are fixed before folding, from ``symbols`` or from the shapes of ``example_inputs``, so that every
container of the SDFG has a concrete shape. Everything between reading the model and the SDFG runs in a
scratch directory, so that the files the tools write there never reach the user's working directory.
"""

import contextlib
import copy
import os
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from dace import data as dt
from dace.libraries.onnx.converters import clean_onnx_name, onnx_tensor_type_to_typeclass
from dace.libraries.onnx.nodes.onnx_op_registry import has_onnx_node
from google.protobuf import json_format, text_format
from google.protobuf.message import DecodeError

from dcaccel.errors import DcaccelError, UnsupportedOpError
from dcaccel.frontend import ml_domain
from dcaccel.frontend import onnx_prepare as prepare
from dcaccel.frontend.half_scalars import install_half_scalar_arguments
from dcaccel.frontend.naming import identifier
from dcaccel.frontend.shapes import (
    bind_symbols,
    check_symbol_names,
    concrete_shape,
    dimension_str,
    install_shape_inference,
)
from dcaccel.frontend.workload import Origin, TensorSpec, Workload

#: Domains whose ops DaCe's ONNX importer knows (the default ONNX domain).
_ONNX_DOMAINS = ("", "ai.onnx")


def from_onnx(
    model: str | os.PathLike | onnx.ModelProto,
    example_inputs: Sequence | Mapping | None = None,
    *,
    symbols: Mapping[str, int] | None = None,
    name: str | None = None,
    origin: Origin = Origin.ONNX,
    fold: bool = True,
) -> Workload:
    """Import an ONNX model into a :class:`Workload` whose SDFG holds ONNX library nodes.

    ``example_inputs`` (arrays in graph-input order, or by name) and ``symbols`` give the values of
    dynamic input dimensions. ``fold`` (the default) imports the inference graph as deployed: constants
    folded and batch normalization folded into the convolution before it; ``fold=False`` keeps the graph
    as written (:func:`~dcaccel.frontend.onnx_prepare.simplify_as_written`). Raises
    :class:`DcaccelError` for a missing or invalid file, an unsupported op, a dynamic dimension without
    a value, or a symbol that names none.
    """
    from dace.ml import ONNXModel

    proto, source = _read(model)
    name = name or _default_name(model, proto)
    if not proto.graph.node:
        raise DcaccelError(f"{source} has no operators (its graph has no nodes)")
    install_shape_inference()  # outputs shaped by constant inputs get their sizes, whether or not lowering registered
    with _scratch_directory():
        proto = prepare.normalize(proto, source)  # control flow and function bodies rewritten: then check the ops
        check_ops(proto)
        prepare.check_consistent(proto, source)

        specs = [_value_spec(value) for value in proto.graph.input]  # weights are no longer inputs
        if symbols:
            check_symbol_names(symbols, _dimension_names(proto), source)
        symbols = _bind_dimensions(specs, example_inputs, symbols or {})
        fixed = specialize(proto, symbols)
        if fixed.graph.input != proto.graph.input:
            prepare.check_consistent(fixed, source)  # the values of the dynamic dimensions must fit the model too
        simplified = as_imported(fixed, source, fold)
        try:
            imported = ONNXModel(identifier(name), simplified, onnx_simplify=False)
        except Exception as err:  # DaCe's importer raises assorted types on what it cannot build; none may leak
            raise DcaccelError(f"cannot import {source}: {prepare.first_line(err)}") from err
    sdfg = imported.sdfg

    inputs = [_container_spec(sdfg, value_name, clean_onnx_name(value_name)) for value_name in imported.inputs]
    outputs = [
        _container_spec(sdfg, value.name, container, shape_of=clean_onnx_name(value.name))
        for value, container in zip(proto.graph.output, imported.outputs, strict=True)
    ]
    weights = {
        container: tensor.detach().cpu().numpy().copy()
        for container, tensor in imported.clean_weights.items()
        if container in sdfg.arrays
    }
    weights_as_arguments(imported)
    return Workload(
        name=name,
        origin=origin,
        sdfg=sdfg,
        inputs=inputs,
        outputs=outputs,
        weights=weights,
        onnx_model=fixed,
        symbols=dict(symbols),
    )


def weights_as_arguments(imported) -> None:
    """Make every weight of the DaCe ONNX model ``imported`` a program argument: DaCe's importer leaves a weight
    that is also a graph output (a ``Constant`` output) transient, so the program never took its value. DaCe's
    call then passes float16 scalar ones too (:func:`~dcaccel.frontend.half_scalars.install_half_scalar_arguments`)."""
    install_half_scalar_arguments()
    for container in imported.clean_weights:
        if container in imported.sdfg.arrays:
            imported.sdfg.arrays[container].transient = False


def as_imported(proto: onnx.ModelProto, source: str, fold: bool = True) -> onnx.ModelProto:
    """The graph DaCe's importer gets from ``proto`` (normalized, every dimension a value): constants folded
    (``fold``) or the graph as written, inference no-ops removed, batch normalization folded (``fold``), nodes
    named readably; raises :class:`DcaccelError` for an op DaCe cannot import or a tensor without a shape."""
    simplified = prepare.without_inference_noops(
        prepare.simplify(proto, source) if fold else prepare.simplify_as_written(proto, source), source
    )
    if fold:
        simplified = prepare.fold_batch_norms(simplified, source)
    simplified = readable_node_names(simplified)
    check_ops(simplified)
    prepare.check_shapes(simplified, source)
    return simplified


def check_ops(proto: onnx.ModelProto) -> None:
    """Raise :class:`UnsupportedOpError` for the first node whose op DaCe's ONNX importer has no node class for."""
    for index, node in enumerate(proto.graph.node):
        known = node.domain in _ONNX_DOMAINS and has_onnx_node(node.op_type)
        if not known and not ml_domain.importable_node(node):
            op = node.op_type if node.domain in _ONNX_DOMAINS else f"{node.domain}.{node.op_type}"
            raise UnsupportedOpError(op, node.name or f"#{index}", "DaCe's ONNX importer has no node for it")


def readable_node_names(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with every node named after the module that produced it, as a C identifier.

    PyTorch names a node by its module path and op (``/layer1/layer1.0/conv1/Conv``). The new name is
    the module's qualified name (``layer1.0.conv1``, written ``layer1_0_conv1``); the op is kept when
    the module produced several nodes or contains other modules (``layer1_0_Add``), and is the whole
    name for ops called at the top level (``Relu_0``, ``Relu_1``). Unnamed nodes become ``<op>_<index>``.
    Duplicates get a numeric suffix. These are the names implementation choices refer to.
    """
    paths = [_module_path(node.name) for node in proto.graph.node]
    uses = Counter(".".join(path) for path, _ in paths)
    containers = {".".join(path[:i]) for path, _ in paths for i in range(1, len(path))}
    renamed = onnx.ModelProto()
    renamed.CopyFrom(proto)
    taken: set[str] = set()
    for index, (node, (path, op)) in enumerate(zip(renamed.graph.node, paths, strict=True)):
        module = ".".join(path)
        if not op:
            op = f"{node.op_type}_{index}"
        parts = path if module and uses[module] == 1 and module not in containers else [*path, op]
        if parts == [node.op_type]:
            parts = [f"{op}_0"]  # a node name never equals an op type, so a choice key means one or the other
        name = base = identifier("_".join(parts))
        suffix = 1
        while name in taken:
            name, suffix = f"{base}_{suffix}", suffix + 1
        taken.add(name)
        node.name = name
    return renamed


def _module_path(name: str) -> tuple[list[str], str]:
    """Split a PyTorch node name into its module path (outer modules folded into the dotted names of
    inner ones, ``layer1/layer1.0`` → ``layer1.0``) and its last component (the op)."""
    parts = [part for part in name.split("/") if part]
    if not parts:
        return [], ""
    *path, op = parts
    folded = [part for i, part in enumerate(path) if not path[i + 1 :] or not path[i + 1].startswith(f"{part}.")]
    return folded, op


def specialize(proto: onnx.ModelProto, symbols: Mapping[str, int]) -> onnx.ModelProto:
    """A copy of ``proto`` whose dynamic input and output dimensions take their values from ``symbols``.

    Intermediate shape annotations are dropped so that shape inference recomputes them concretely;
    an output dimension whose parameter has no value is cleared for the same reason.
    """
    fixed = copy.deepcopy(proto)
    initializers = {init.name for init in fixed.graph.initializer}
    for value in fixed.graph.input:
        if value.name in initializers:
            continue
        for index, dim in enumerate(value.type.tensor_type.shape.dim):
            if not dim.HasField("dim_value"):
                dim.dim_value = symbols[_dimension_name(value.name, index, dim)]
    for value in fixed.graph.output:
        for index, dim in enumerate(value.type.tensor_type.shape.dim):
            if not dim.HasField("dim_value"):
                parameter = _dimension_name(value.name, index, dim)
                if parameter in symbols:
                    dim.dim_value = symbols[parameter]
                else:
                    dim.Clear()
    del fixed.graph.value_info[:]
    return fixed


@contextlib.contextmanager
def _scratch_directory():
    """Run the body in a new temporary working directory, removed afterwards with what the tools wrote there
    (onnxruntime's shape inference saves ``sym_shape_infer_temp.onnx`` into the working directory when it
    fails, and large models are saved with external ``<uuid>.data`` files beside them)."""
    with tempfile.TemporaryDirectory(prefix="dcaccel-onnx-") as scratch, contextlib.chdir(scratch):
        yield


def _read(model: str | os.PathLike | onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """The model proto, and how to name its source in a message; raises :class:`DcaccelError` for a
    missing file, or one that does not hold a model with a graph."""
    if isinstance(model, onnx.ModelProto):
        proto, source = model, f"ONNX model '{model.graph.name}'"
    else:
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise DcaccelError(f"file '{path}' not found")
        try:
            proto, source = onnx.load(path), f"'{path}'"
        except (DecodeError, json_format.ParseError, text_format.ParseError, ValueError, RuntimeError) as err:
            raise DcaccelError(f"'{path}' is not an ONNX model: {prepare.first_line(err)}") from err
    if not proto.HasField("graph"):
        raise DcaccelError(f"{source} is not an ONNX model: it has no graph")
    return proto, source


def _default_name(model, proto: onnx.ModelProto) -> str:
    """A workload name: the file's stem, else the graph's name."""
    if isinstance(model, str | os.PathLike):
        return os.path.splitext(os.path.basename(os.fspath(model)))[0]
    return proto.graph.name or "model"


def _dimension_name(tensor: str, index: int, dim: onnx.TensorShapeProto.Dimension) -> str:
    """The symbol of a dynamic dimension: its ``dim_param``, or ``<tensor>_dim<index>`` when it has none."""
    return dim.dim_param if dim.HasField("dim_param") else f"{clean_onnx_name(tensor)}_dim{index}"


def _dimension_names(proto: onnx.ModelProto) -> set[str]:
    """The symbols of the dynamic dimensions of the graph inputs and outputs of ``proto``."""
    return {
        _dimension_name(value.name, index, dim)
        for value in [*proto.graph.input, *proto.graph.output]
        for index, dim in enumerate(value.type.tensor_type.shape.dim)
        if not dim.HasField("dim_value")
    }


def _value_spec(value: onnx.ValueInfoProto) -> TensorSpec:
    """The spec of a graph input as declared in the model (dynamic dimensions by their symbol)."""
    tensor_type = value.type.tensor_type
    shape = tuple(
        dim.dim_value if dim.HasField("dim_value") else _dimension_name(value.name, index, dim)
        for index, dim in enumerate(tensor_type.shape.dim)
    )
    try:
        dtype = onnx_tensor_type_to_typeclass(tensor_type.elem_type).as_numpy_dtype()
    except ValueError as err:
        element = onnx.TensorProto.DataType.Name(tensor_type.elem_type)
        raise DcaccelError(f"tensor '{value.name}': element type {element} is not supported") from err
    return TensorSpec(value.name, shape, dtype, container=clean_onnx_name(value.name))


def _bind_dimensions(specs: list[TensorSpec], example_inputs, symbols: Mapping[str, int]) -> dict[str, int]:
    """Values of the dynamic input dimensions, from ``symbols`` and the shapes of ``example_inputs``."""
    if example_inputs is not None:
        arrays = _by_name(specs, example_inputs)
        return bind_symbols(specs, {key: np.asarray(arrays[key]) for key in arrays}, symbols)
    bound = dict(symbols)
    for spec in specs:
        concrete_shape(spec.name, spec.shape, bound)
    return bound


def _by_name(specs: list[TensorSpec], example_inputs) -> dict:
    """Example inputs keyed by input name (a mapping is taken as is; a sequence follows the input order)."""
    if isinstance(example_inputs, Mapping):
        return dict(example_inputs)
    if not isinstance(example_inputs, list | tuple):
        example_inputs = (example_inputs,)
    if len(example_inputs) != len(specs):
        raise DcaccelError(f"{len(example_inputs)} example inputs for the {len(specs)} inputs of the model")
    return {spec.name: value for spec, value in zip(specs, example_inputs, strict=True)}


def _container_spec(sdfg, name: str, container: str, shape_of: str | None = None) -> TensorSpec:
    """The spec of an SDFG container, named ``name``; its shape is read from ``shape_of`` if given."""
    desc = sdfg.arrays[shape_of or container]
    shape = () if isinstance(desc, dt.Scalar) else tuple(dimension_str(d) for d in desc.shape)
    return TensorSpec(name, shape, desc.dtype.as_numpy_dtype(), container=container)
