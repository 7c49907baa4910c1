"""What happens to an ONNX model before DaCe's importer sees it (``docs/import.md`` says why).

Models exported for the public model zoos (old opsets, weights listed as graph inputs, weights computed
at run time, ``Dropout`` and ``Identity`` left in) fail in DaCe's importer as they are. The steps, in
the order :func:`dcaccel.frontend.onnx_import.from_onnx` runs them:

1. :func:`normalize`: the default domain spelled ``ai.onnx`` is written ``""`` (DaCe's importer looks
   the opset up under ``""`` only), graph inputs that are also initializers become weights only, and
   a model whose opset is older than :data:`MIN_OPSET` (or an opset-9 model with an ``Upsample``) is
   converted with ``onnx.version_converter``; an op dcaccel has no canonical implementation of but ONNX
   defines by a function body is replaced by that body (:mod:`dcaccel.frontend.functions`) and control flow
   (``If``, ``Loop``, ``Scan``) by the straight-line graph it denotes
   (:func:`dcaccel.frontend.control_flow.straight_line`), in turn until neither applies (a function op in a
   ``Loop`` body is replaced once the loop is unrolled); scalar ``Constant`` nodes (``value_float``...)
   are written with a ``value`` tensor, the one form DaCe's importer reads (:func:`tensor_constants`), and
   the attributes ONNX's shape inference misreads when absent with their defaults (:func:`explicit_defaults`);
2. :func:`check_consistent`: the ONNX checker with strict shape and type inference;
3. :func:`simplify`: onnx-simplifier folds every value computable from initializers and constants
   (``ConstantOfShape``, ``Shape`` → ``Gather`` → ``Concat`` → ``Reshape`` chains, ``Cast`` of
   constants, the position tables of rotary embeddings...) and infers shapes, with its graph
   optimizations (fusions) off; onnx-ir's pass makes the folded ``Constant`` nodes initializers. What
   its C++ core prints on standard error (a node it could not fold) is a debug record of the
   ``dcaccel`` logger. With the graph kept as written, :func:`simplify_as_written` instead computes
   only the :data:`SHAPE_OPERANDS` (the values that set a shape), and the rest stays as written;
4. :func:`without_inference_noops`: inference no-ops removed (``Dropout`` becomes ``Identity``, and
   ``Identity`` nodes are eliminated by onnx-ir's pass), then what nothing uses. After folding, so
   that a weight an exporter wrote as ``Identity`` of an equal weight (PyTorch's exporter shares
   equal initializers that way) stays a weight of its own, under its own name;
5. :func:`fold_batch_norms` (unless the graph is kept as written): an inference ``BatchNormalization``
   whose input is a ``Conv`` output read by nothing else becomes part of the Conv's weights and bias;
6. :func:`check_shapes`: the shape inference DaCe's importer runs gives every tensor a type and shape.

Every failure is a :class:`~dcaccel.errors.DcaccelError` of one line naming the model, and the node,
op and tensor where the tool at fault says which. The libraries may write files into the working
directory (onnxruntime's symbolic shape inference saves ``sym_shape_infer_temp.onnx`` when it fails,
tools save large models with external ``<uuid>.data`` files): the caller runs these steps in a
scratch directory.
"""

import contextlib
import logging
import os
import re
import sys
import tempfile
from collections import Counter

import numpy as np
import onnx
import onnx.version_converter
import onnx_ir as ir
from onnx_ir.passes.common import IdentityEliminationPass, LiftConstantsToInitializersPass, RemoveUnusedNodesPass

from dcaccel.errors import DcaccelError, UnsupportedOpError
from dcaccel.frontend import control_flow, functions, ml_domain
from dcaccel.frontend.shapes import AXES_INPUT_REDUCTIONS

MIN_OPSET = 7
"""The oldest default-domain opset DaCe's importer takes: the symbolic shape inference of onnxruntime it
runs refuses older models (and DaCe's importer then fails with a ``TypeError``)."""

UPSAMPLE_SCALES_OPSET = 9
"""The opset whose ``Upsample`` takes its scales as an input: the shape inference DaCe's importer runs
leaves its output shape symbolic, so a model of this opset with an ``Upsample`` is converted to
:data:`RESIZE_OPSET`, where the version converter makes it a ``Resize`` (same modes and coordinates)."""

RESIZE_OPSET = 10

_DEFAULT_DOMAIN_ALIAS = "ai.onnx"

#: The source location and condition the version converter's failed assertions start with.
_ASSERTION = re.compile(r"^\S+:\d+: \w+: Assertion `.*` failed: ")

#: The IR version from which initializers need not be graph inputs.
_INITIALIZERS_NOT_INPUTS_IR = 4

#: The inputs of an operator that set the shape of its output (a new shape, axes, sizes, counts, an index
#: range), by their position. The importer needs their values (every container has a concrete shape), so
#: they are computed at import even when the graph is kept as written (:func:`simplify_as_written`).
SHAPE_OPERANDS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,),
    "Expand": (1,),
    "ConstantOfShape": (0,),
    "Tile": (1,),
    "Slice": (1, 2, 3, 4),
    "Squeeze": (1,),
    "Unsqueeze": (1,),
    "Range": (0, 1, 2),
    "Resize": (1, 2, 3),
    "Upsample": (1,),
    "Pad": (1, 3),
    "Split": (1,),
    "TopK": (1,),
    "OneHot": (1,),
    "CumSum": (1,),
    "CumProd": (1,),
    "Trilu": (1,),
    **dict.fromkeys(AXES_INPUT_REDUCTIONS, (1,)),
}

#: Detail of the preparation: what onnx-simplifier and onnxruntime printed while folding constants.
logger = logging.getLogger(__name__)


def normalize(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """A copy of ``proto`` with the default domain written ``""``, graph inputs that are also initializers
    made weights only, the ops dcaccel has no canonical implementation of but ONNX defines by a function body
    replaced by that body and its control flow unrolled (:func:`_straight_line_with_function_bodies`), scalar
    ``Constant`` nodes written as tensors (:func:`tensor_constants`), the defaults ONNX's shape inference misreads
    written out (:func:`explicit_defaults`), its opset at least :data:`MIN_OPSET`, and an opset-9 ``Upsample`` made
    a ``Resize`` (the model converted to :data:`RESIZE_OPSET`).

    Old exporters listed every weight as a graph input too; ONNX lets a caller override such an input
    with a value of its own, dcaccel never does, so it is a weight (and constant folding may go through
    it). From IR version 4 on, initializers need not be inputs.
    """
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    ml_domain.make_importable(model, MIN_OPSET)  # ai.onnx.ml nodes: the default domain and DaCe's schema lookup
    versions = {entry.domain: entry.version for entry in model.opset_import}
    if _DEFAULT_DOMAIN_ALIAS in versions:
        versions[""] = max(versions.pop(_DEFAULT_DOMAIN_ALIAS), versions.get("", 0))
        del model.opset_import[:]
        model.opset_import.extend(onnx.helper.make_opsetid(domain, v) for domain, v in versions.items())
    for node in model.graph.node:
        if node.domain == _DEFAULT_DOMAIN_ALIAS:
            node.domain = ""
    initializers = {init.name for init in model.graph.initializer}
    if any(value.name in initializers for value in model.graph.input):
        inputs = [value for value in model.graph.input if value.name not in initializers]
        del model.graph.input[:]
        model.graph.input.extend(inputs)
        model.ir_version = max(model.ir_version, _INITIALIZERS_NOT_INPUTS_IR)
    model = explicit_defaults(tensor_constants(_straight_line_with_function_bodies(model, source)))
    opset = versions.get("")
    if opset is None:
        raise DcaccelError(f"{source} does not import the default ONNX domain (its opset_import names no version)")
    if opset < MIN_OPSET:
        return upgraded(model, source, opset)
    upsample = any(node.op_type == "Upsample" and not node.domain for node in model.graph.node)
    return upgraded(model, source, opset, RESIZE_OPSET) if opset == UPSAMPLE_SCALES_OPSET and upsample else model


def upgraded(proto: onnx.ModelProto, source: str, opset: int, target: int = MIN_OPSET) -> onnx.ModelProto:
    """``proto`` (default-domain opset ``opset``) converted to opset ``target`` by onnx's version converter."""
    try:
        converted = onnx.version_converter.convert_version(proto, target)
    except Exception as err:  # the converter's C++ core raises assorted types; none may leak a traceback
        detail = _ASSERTION.sub("", first_line(err))
        raise DcaccelError(f"cannot convert {source} from opset {opset} to {target}: {detail}") from err
    names = {tuple(node.output): node.name for node in proto.graph.node if node.name}
    for node in converted.graph.node:  # a node the converter replaced (an Upsample by a Resize) keeps its name
        node.name = node.name or names.get(tuple(node.output), "")
    return converted


def check_consistent(proto: onnx.ModelProto, source: str) -> None:
    """Raise :class:`DcaccelError` unless ``proto`` passes the ONNX checker with strict shape and type inference.

    Catches malformed graphs (dangling names, missing inputs, unknown attributes) and inconsistent
    ones (an input whose shape or type does not fit its operator, a declared output shape that differs
    from the inferred one); the message names the node and op where the checker does.
    """
    try:
        onnx.checker.check_model(proto, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise DcaccelError(f"{source} is not a valid ONNX model: {_checker_message(err)}") from err


def without_inference_noops(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """``proto`` without the operators that are no-ops at inference.

    A ``Dropout`` is the identity at inference (before opset 12 always; from opset 12 when its
    ``training_mode`` input is absent or a constant false): it becomes ``Identity`` unless its mask
    output is used. onnx-ir's passes then remove the ``Identity`` nodes (a graph output keeps its name)
    and the nodes and initializers nothing uses (a Dropout's ``ratio``).
    """
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    constants = _constant_values(model.graph)
    opset = next(entry.version for entry in model.opset_import if entry.domain == "")
    used = {name for node in model.graph.node for name in node.input} | {v.name for v in model.graph.output}
    for node in model.graph.node:
        if node.op_type == "Dropout" and node.domain == "" and _inference_dropout(node, opset, constants, used):
            node.op_type = "Identity"
            del node.attribute[:]
            del node.input[1:]
            del node.output[1:]
    return _run_passes(model, source, IdentityEliminationPass(), RemoveUnusedNodesPass())


def _run_passes(proto: onnx.ModelProto, source: str, *passes: ir.passes.PassBase) -> onnx.ModelProto:
    """``proto`` after onnx-ir's ``passes``, in order."""
    try:
        model = ir.from_proto(proto)
        for cleanup in passes:
            cleanup(model)
        return ir.to_proto(model)
    except Exception as err:  # onnx-ir's passes raise assorted types on graphs they cannot rewrite
        raise DcaccelError(f"cannot prepare {source}: {first_line(err)}") from err


def _inference_dropout(node: onnx.NodeProto, opset: int, constants: dict, used: set[str]) -> bool:
    """Whether ``node`` (a Dropout) is the identity at inference and its mask output is unused."""
    if len(node.output) > 1 and node.output[1] in used:
        return False
    if opset < 12 or len(node.input) < 3 or not node.input[2]:
        return True
    training = constants.get(node.input[2])
    return training is not None and not training.any()


def _constant_values(graph: onnx.GraphProto) -> dict:
    """The values of the graph's initializers and ``Constant`` nodes (with a ``value`` tensor), by name."""
    values = {init.name: onnx.numpy_helper.to_array(init) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain == "":
            for attribute in node.attribute:
                if attribute.name == "value":
                    values[node.output[0]] = onnx.numpy_helper.to_array(attribute.t)
    return values


def tensor_constants(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with every ``Constant`` node of a scalar or list attribute (``value_float``, ``value_int``,
    ``value_floats``, ``value_ints``) written with a ``value`` tensor of the same value (float32 or int64, a
    scalar or a vector); ``proto`` itself when it has none.

    DaCe's importer reads only ``value`` (on the others it fails with ``'float' object has no attribute
    'dtype'``); exporters and ONNX's function bodies write the other forms too.
    """
    if not any(_scalar_constant(node) for node in proto.graph.node):
        return proto
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    for node in model.graph.node:
        attribute = _scalar_constant(node)
        if attribute is not None:
            dtype = np.float32 if attribute.name.startswith("value_float") else np.int64
            value = np.asarray(onnx.helper.get_attribute_value(attribute), dtype=dtype)
            del node.attribute[:]
            node.attribute.append(onnx.helper.make_attribute("value", onnx.numpy_helper.from_array(value)))
    return model


def _scalar_constant(node: onnx.NodeProto) -> onnx.AttributeProto | None:
    """The scalar or list attribute of ``node`` if it is a default-domain ``Constant`` written with one."""
    if node.op_type != "Constant" or node.domain or len(node.attribute) != 1:
        return None
    attribute = node.attribute[0]
    return attribute if attribute.name in _SCALAR_CONSTANT_ATTRIBUTES else None


_SCALAR_CONSTANT_ATTRIBUTES = ("value_float", "value_int", "value_floats", "value_ints")


MISREAD_DEFAULTS: dict[str, tuple[str, ...]] = {"STFT": ("onesided",)}
"""Attributes whose absence ONNX's shape inference reads otherwise than their schema's default, by op: STFT's
``onesided`` as 0, its default being 1 (ONNX 1.23; onnx/onnx#7731 fixes it), so that a model leaving it out was given
``frame_length`` bins and the checker refused its declared output shape (ONNX's ``test_stft`` cases).
:func:`explicit_defaults` writes them out."""


def explicit_defaults(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with every attribute of :data:`MISREAD_DEFAULTS` that a default-domain node leaves out written with
    its schema's default at the model's opset (a copy computing the same; ``proto`` itself when no node leaves one
    out)."""
    opset = next((entry.version for entry in proto.opset_import if entry.domain == ""), None)
    if opset is None or not any(_left_out_defaults(node) for node in proto.graph.node):
        return proto
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    for node in model.graph.node:
        names = _left_out_defaults(node)
        if names:
            schema = onnx.defs.get_schema(node.op_type, opset)
            node.attribute.extend(schema.attributes[name].default_value for name in names)
    return model


def _left_out_defaults(node: onnx.NodeProto) -> list[str]:
    """The attributes of :data:`MISREAD_DEFAULTS` that ``node`` leaves out."""
    if node.domain:
        return []
    written = {attribute.name for attribute in node.attribute}
    return [name for name in MISREAD_DEFAULTS.get(node.op_type, ()) if name not in written]


def _with_function_bodies(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """``proto`` with its ops that dcaccel has no canonical implementation of replaced by their ONNX function
    bodies (:func:`dcaccel.frontend.functions.with_function_bodies`)."""
    from dcaccel.expansions import supported_ops

    return functions.with_function_bodies(proto, source, set(supported_ops()))


def _straight_line_with_function_bodies(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """``proto`` with its function ops replaced by their bodies (:func:`_with_function_bodies`) and its control flow
    unrolled (:func:`dcaccel.frontend.control_flow.straight_line`), one after the other until neither changes the
    graph: a function body may hold control flow (unrolled next), and an unrolled ``Loop``, ``If`` or ``Scan`` body
    function ops (replaced next)."""
    model = proto
    for _ in range(functions.MAX_DEPTH):
        rewritten = control_flow.straight_line(_with_function_bodies(model, source), source)
        if rewritten is model:
            break
        model = rewritten
    return model


def simplify(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """``proto`` with constants folded and shapes inferred by onnx-simplifier, operators otherwise as written.

    Constant folding computes every value computable from initializers and constants; onnx-ir's pass
    then makes every ``Constant`` node an initializer (a weight of the workload). onnx-simplifier's
    graph optimizations are off: they would fuse operators (MatMul and Add into Gemm, attention
    subgraphs into an ``Attention`` op DaCe does not know), and the operators of the model are what
    dcaccel explores implementations for; batch normalization is folded by :func:`fold_batch_norms`.
    """
    return _lifted(_simplified(proto, source), source)


def simplify_as_written(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """``proto`` with only its shape operands folded (the inputs :data:`SHAPE_OPERANDS` names, when their
    value does not depend on the data) and shapes inferred; every other computed subgraph stays as written.

    The position arithmetic of a model (the ``Sin``/``Cos`` tables of rotary embeddings, the
    ``Abs``/``Log``/``Less`` relative-position buckets of T5, ``Range``/``And`` masks) computes on
    values fixed by the shapes, which :func:`simplify` would fold into weights; here it stays operators
    to lower. Their shape operands are computed by onnx-simplifier on a copy of the model in which they
    are graph outputs (so that folding keeps each under its name), then become initializers of ``proto``
    and what computed them alone is removed.
    """
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception as err:  # onnx's C++ shape inference raises assorted types; none may leak a traceback
        raise DcaccelError(f"cannot infer the shapes of {source}: {_checker_message(err)}") from err
    typed = {value.name: value for value in inferred.graph.value_info if value.type.tensor_type.HasField("shape")}
    operands = [name for name in _shape_operands(proto.graph) if name in typed]
    probe = onnx.ModelProto()
    probe.CopyFrom(proto)
    probe.graph.output.extend(typed[name] for name in operands)
    constants = _constant_values(_simplified(probe, source).graph)
    folded = {name: constants[name] for name in operands if name in constants}
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    for node in model.graph.node:
        node.output[:] = ["" if name in folded else name for name in node.output]
    model.graph.initializer.extend(onnx.numpy_helper.from_array(value, name) for name, value in folded.items())
    _scalar_range_operands(model.graph, folded)
    logger.debug("%s kept as written: %d shape operands folded", source, len(folded))
    pruned = _run_passes(model, source, RemoveUnusedNodesPass())
    return _lifted(_simplified(pruned, source, skip_constant_folding=True), source)


def _scalar_range_operands(graph: onnx.GraphProto, folded: dict[str, np.ndarray]) -> None:
    """Make every ``Range`` of ``graph`` that reads a folded operand of one element but not a scalar (``AffineGrid``'s
    body reads the sizes it splits from its ``size`` input, of shape ``[1]``) read a scalar initializer of that
    value instead: onnxruntime takes either, the shape inference only a scalar (else the output has no shape)."""
    scalars: dict[str, str] = {}
    for node in graph.node:
        if node.op_type != "Range" or node.domain:
            continue
        for position, name in enumerate(node.input):
            value = folded.get(name)
            if value is None or not value.ndim or value.size != 1:
                continue
            if name not in scalars:
                scalars[name] = f"{name}_scalar"
                graph.initializer.append(onnx.numpy_helper.from_array(value.reshape(()), scalars[name]))
            node.input[position] = scalars[name]


def _shape_operands(graph: onnx.GraphProto) -> list[str]:
    """The computed tensors the nodes of ``graph`` read as shape operands (:data:`SHAPE_OPERANDS`), in order
    (not the graph's outputs, which stay computed)."""
    constant = {init.name for init in graph.initializer} | {value.name for value in graph.output}
    operands = [
        node.input[position]
        for node in graph.node
        if not node.domain
        for position in SHAPE_OPERANDS.get(node.op_type, ())
        if position < len(node.input) and node.input[position]
    ]
    return [name for name in dict.fromkeys(operands) if name not in constant]


def _simplified(proto: onnx.ModelProto, source: str, **options) -> onnx.ModelProto:
    """onnx-simplifier's model of ``proto``: shapes inferred, graph optimizations off, ``options`` its own."""
    import onnxsim

    try:
        with _native_stderr_logged(f"onnx-simplifier on {source}"):
            simplified, _ = onnxsim.simplify(proto, skip_fuse_bn=True, perform_optimization=False, **options)
    except Exception as err:  # onnxsim runs onnxruntime and its C++ core, which raise assorted types
        raise DcaccelError(f"cannot simplify {source}: {first_line(err)}") from err
    return simplified


def _lifted(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """``proto`` with every ``Constant`` node made an initializer (onnx-ir's pass)."""
    return _run_passes(proto, source, LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0))


def fold_batch_norms(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """``proto`` with every foldable ``BatchNormalization`` folded into the ``Conv`` before it, as deployment
    compilers do at inference.

    With ``s = scale / sqrt(var + epsilon)`` per output channel, the Conv's weight becomes ``W * s`` and
    its bias ``(b - mean) * s + B`` (``b`` is 0 when the Conv has none), computed in float64 and stored
    in the weight's type; the Conv then writes the BatchNormalization's output. A BatchNormalization is
    foldable when its input is written by a Conv and read by nothing else, it computes at inference
    (no ``training_mode``, no ``spatial=0``, only its first output read), and its four parameters and
    the Conv's weight and bias are floating-point initializers of one value per output channel; any
    other stays as written (why is a debug record of the ``dcaccel`` logger). The folded weight keeps
    the Conv weight's name, the folded bias that of the Conv's bias or else the BatchNormalization's
    ``B``, unless another node reads them too. The parameters nothing reads any more are removed.
    """
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    writers = {name: node for node in graph.node for name in node.output}
    reads = Counter(name for node in graph.node for name in node.input if name)
    reads.update(value.name for value in graph.output)
    folded = []
    for index, norm in enumerate(graph.node):
        if norm.op_type != "BatchNormalization" or norm.domain:
            continue
        conv = writers.get(norm.input[0])
        reason = _unfoldable(norm, conv, initializers, reads)
        if reason:
            logger.debug("%s: BatchNormalization '%s' stays as written: %s", source, norm.name or f"#{index}", reason)
            continue
        weight, bias = _folded_parameters(norm, conv, initializers)
        weight_name = _own_name([conv.input[1]], reads, initializers)
        bias_name = _own_name([name for name in [*conv.input[2:3], norm.input[2]] if name], reads, initializers)
        for name, value in ((weight_name, weight), (bias_name, bias)):
            if name in initializers:
                initializers[name].CopyFrom(onnx.numpy_helper.from_array(value, name))
            else:
                initializers[name] = onnx.numpy_helper.from_array(value, name)
                graph.initializer.append(initializers[name])
        reads.subtract([*norm.input, *conv.input[1:]])
        conv.input[:] = [conv.input[0], weight_name, bias_name]
        reads.update(conv.input[1:])
        conv.output[0] = norm.output[0]
        folded.append(norm)
    for norm in folded:
        graph.node.remove(norm)
    return _run_passes(model, source, RemoveUnusedNodesPass()) if folded else model


def _unfoldable(norm: onnx.NodeProto, conv: onnx.NodeProto | None, initializers: dict, reads: Counter) -> str | None:
    """Why the BatchNormalization ``norm`` cannot be folded into ``conv`` (the writer of its input), or None."""
    if conv is None or conv.op_type != "Conv" or conv.domain:
        return "its input is not written by a Conv"
    if reads[norm.input[0]] > 1:
        return f"the output '{norm.input[0]}' of Conv '{conv.name}' is read by another node too"
    attributes = {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in norm.attribute}
    if attributes.get("training_mode", 0) or not attributes.get("spatial", 1):
        return "it is in training mode or not spatial"
    if any(reads[name] for name in norm.output[1:] if name):
        return "its running statistics are read"
    parameters = [name for name in [*conv.input[1:], *norm.input[1:]] if name]  # a Conv's bias is optional
    missing = [name for name in parameters if name not in initializers]
    if missing:
        return f"'{missing[0]}' is not a constant"
    arrays = [onnx.numpy_helper.to_array(initializers[name]) for name in parameters]
    if any(not np.issubdtype(array.dtype, np.floating) for array in arrays):
        return "a parameter is not floating-point"
    channels = arrays[0].shape[0]
    if any(array.shape != (channels,) for array in arrays[1:]):
        return f"its parameters are not one value per output channel of the Conv ({channels})"
    return None


def _folded_parameters(norm: onnx.NodeProto, conv: onnx.NodeProto, initializers: dict) -> tuple[np.ndarray, np.ndarray]:
    """The weight and bias of ``conv`` with the BatchNormalization ``norm`` folded in, in the weight's type."""
    weight = onnx.numpy_helper.to_array(initializers[conv.input[1]])
    scale, offset, mean, variance = (
        onnx.numpy_helper.to_array(initializers[name]).astype(np.float64) for name in norm.input[1:5]
    )
    bias = onnx.numpy_helper.to_array(initializers[conv.input[2]]) if len(conv.input) > 2 and conv.input[2] else 0.0
    epsilon = next((attribute.f for attribute in norm.attribute if attribute.name == "epsilon"), 1e-5)
    factor = scale / np.sqrt(variance + epsilon)
    folded_weight = weight.astype(np.float64) * factor.reshape(-1, *[1] * (weight.ndim - 1))
    folded_bias = (np.asarray(bias, dtype=np.float64) - mean) * factor + offset
    return folded_weight.astype(weight.dtype), folded_bias.astype(weight.dtype)


def _own_name(candidates: list[str], reads: Counter, initializers: dict) -> str:
    """The first of ``candidates`` (initializer names) that one node alone reads, else a new name after the first."""
    for name in candidates:
        if reads[name] == 1:
            return name
    base = candidates[0]
    name, suffix = f"{base}_folded", 1
    while name in initializers or name in reads:
        name, suffix = f"{base}_folded_{suffix}", suffix + 1
    return name


@contextlib.contextmanager
def _native_stderr_logged(what: str):
    """Run the block with the process's standard error (file descriptor 2, where C++ libraries write: a
    constant onnx-simplifier could not fold, ``WARNING: failed to run "Where" op ...``, is left to be
    computed at run time) going to a temporary file, then log what was written there at debug level."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace").strip()
            if text:
                logger.debug("%s: %s", what, text)


def check_shapes(proto: onnx.ModelProto, source: str) -> None:
    """Raise :class:`DcaccelError` unless the shape inference DaCe's importer runs gives every tensor a node
    reads or writes an element type and a shape (DaCe's importer creates a container per tensor from them)."""
    from dace.frontend.ml.onnx.importer import infer_shapes_onnx_model

    try:
        inferred = infer_shapes_onnx_model(proto)
    except UnsupportedOpError:  # dcaccel's inference (frontend.shapes) refusing an op in one line
        raise
    except Exception as err:  # onnxruntime's, then onnx's, shape inference: assorted types
        raise DcaccelError(f"cannot infer the shapes of {source}: {first_line(err)}") from err
    graph = inferred.graph
    known = {value.name: value for value in [*graph.input, *graph.output, *graph.value_info]}
    constant = {init.name for init in graph.initializer}
    constant |= {node.output[0] for node in graph.node if node.op_type == "Constant"}
    for index, node in enumerate(graph.node):
        for name in [*node.input, *node.output]:
            if not name or name in constant or _has_shape(known.get(name)):
                continue
            raise DcaccelError(
                f"{source}: node '{node.name or f'#{index}'}' ({node.op_type}): "
                f"the element type or shape of tensor '{name}' cannot be inferred"
            )


def _has_shape(value: onnx.ValueInfoProto | None) -> bool:
    """Whether ``value`` has an element type and a shape whose every dimension is a value or a parameter."""
    if value is None or not value.type.HasField("tensor_type"):
        return False
    tensor_type = value.type.tensor_type
    if not tensor_type.elem_type or not tensor_type.HasField("shape"):
        return False
    return all(dim.HasField("dim_value") or dim.HasField("dim_param") for dim in tensor_type.shape.dim)


#: Where the ONNX checker names the node at fault: shape inference, and node validation.
_INFERENCE_NODE = re.compile(r"\(op_type:(?P<op>[^,]*), node name: (?P<node>[^)]*)\): (?P<detail>.*)")
_VALIDATION_NODE = re.compile(r"==> Context: Bad node spec for node\. Name: (?P<node>.*) OpType: (?P<op>\S+)")
_ERROR_KIND = re.compile(r"\[\w+Error\] ")


def _checker_message(err: BaseException) -> str:
    """One line from an ONNX checker or shape-inference error: ``node 'fc' (Gemm): what is wrong``."""
    text = _ERROR_KIND.sub("", str(err)).strip()
    inference = _INFERENCE_NODE.search(text)
    if inference:
        detail = inference["detail"].splitlines()[0].strip()
        return f"node '{inference['node']}' ({inference['op']}): {detail}"
    validation = _VALIDATION_NODE.search(text)
    if validation:
        return f"node '{validation['node']}' ({validation['op']}): {' '.join(text[: validation.start()].split())}"
    return " ".join(text.split()) or type(err).__name__


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (its type when the message is empty)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
