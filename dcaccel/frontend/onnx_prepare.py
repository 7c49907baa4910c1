"""What happens to an ONNX model before DaCe's importer sees it (``docs/import.md`` says why).

Models exported for the public model zoos (old opsets, weights listed as graph inputs, weights computed
at run time, ``Dropout`` and ``Identity`` left in) fail in DaCe's importer as they are. The steps, in
the order :func:`dcaccel.frontend.onnx_import.from_onnx` runs them:

1. :func:`normalize`: the default domain spelled ``ai.onnx`` is written ``""`` (DaCe's importer looks
   the opset up under ``""`` only), graph inputs that are also initializers become weights only, and
   a model whose opset is older than :data:`MIN_OPSET` (or an opset-9 model with an ``Upsample``) is
   converted with ``onnx.version_converter``;
2. :func:`check_consistent`: the ONNX checker with strict shape and type inference;
3. :func:`simplify`: onnx-simplifier folds every value computable from initializers and constants
   (``ConstantOfShape``, ``Shape`` → ``Gather`` → ``Concat`` → ``Reshape`` chains, ``Cast`` of
   constants...) and infers shapes, with its graph optimizations (fusions) off; onnx-ir's pass makes
   the folded ``Constant`` nodes initializers. What its C++ core prints on standard error (a node it
   could not fold) is a debug record of the ``dcaccel`` logger;
4. :func:`without_inference_noops`: inference no-ops removed (``Dropout`` becomes ``Identity``, and
   ``Identity`` nodes are eliminated by onnx-ir's pass), then what nothing uses. After folding, so
   that a weight an exporter wrote as ``Identity`` of an equal weight (PyTorch's exporter shares
   equal initializers that way) stays a weight of its own, under its own name;
5. :func:`check_shapes`: the shape inference DaCe's importer runs gives every tensor a type and shape.

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

import onnx
import onnx.version_converter
import onnx_ir as ir
from onnx_ir.passes.common import IdentityEliminationPass, LiftConstantsToInitializersPass, RemoveUnusedNodesPass

from dcaccel.errors import DcaccelError

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

#: Detail of the preparation: what onnx-simplifier and onnxruntime printed while folding constants.
logger = logging.getLogger(__name__)


def normalize(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """A copy of ``proto`` with the default domain written ``""``, graph inputs that are also initializers
    made weights only, its opset at least :data:`MIN_OPSET`, and an opset-9 ``Upsample`` made a ``Resize``
    (the model converted to :data:`RESIZE_OPSET`).

    Old exporters listed every weight as a graph input too; ONNX lets a caller override such an input
    with a value of its own, dcaccel never does, so it is a weight (and constant folding may go through
    it). From IR version 4 on, initializers need not be inputs.
    """
    model = onnx.ModelProto()
    model.CopyFrom(proto)
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


def simplify(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """``proto`` with constants folded and shapes inferred by onnx-simplifier, operators otherwise as written.

    Constant folding computes every value computable from initializers and constants; onnx-ir's pass
    then makes every ``Constant`` node an initializer (a weight of the workload). onnx-simplifier's
    graph optimizations are off: they would fuse operators (MatMul and Add into Gemm, attention
    subgraphs into an ``Attention`` op DaCe does not know, batch norm into Conv), and the operators of
    the model are what dcaccel explores implementations for.
    """
    import onnxsim

    try:
        with _native_stderr_logged(f"onnx-simplifier on {source}"):
            simplified, _ = onnxsim.simplify(proto, skip_fuse_bn=True, perform_optimization=False)
    except Exception as err:  # onnxsim runs onnxruntime and its C++ core, which raise assorted types
        raise DcaccelError(f"cannot simplify {source}: {first_line(err)}") from err
    constants_lifted = LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)
    return _run_passes(simplified, source, constants_lifted)


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
