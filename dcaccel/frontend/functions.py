"""ONNX ops that dcaccel has no canonical implementation of, replaced by their ONNX function bodies at import.

Many ONNX ops are *functions*: their schema defines them by a body of simpler ops (``HannWindow`` by
``Range``, ``Cos`` and arithmetic, ``RMSNormalization`` by ``ReduceMean``, ``Sqrt`` and ``Div``...), either
one body per opset (``has_function``) or one built for the node's attributes and input types
(``has_context_dependent_function``). :func:`with_function_bodies` replaces every node of such an op that
dcaccel does not implement (``dcaccel.expansions.supported_ops()``), and of such an op of another domain ONNX
defines that DaCe's importer has no node for (``ai.onnx.preview``'s ``FlexAttention``), by the body of the op's
schema at the opset the model imports its domain at, as ONNX's own ``_expanded`` backend test cases do (graph
attributes, ``FlexAttention``'s ``score_mod``, are inlined by ONNX's function builder): the body's inputs and
outputs become the node's, its attributes take the node's values (else the schema's defaults), its internal
tensors and nodes are named after the node and op (``<node>/<op>/<tensor>``, ``<node>/<op>/<body op>_<k>``;
``<node>/...`` when the last part of the node's name starts with its op, as PyTorch's ``/norm/RMSNormalization``
does), so a lowered task says which op it came from. Bodies whose ops are functions without an implementation
themselves are expanded in turn. The body's ops then lower canonically like any other; what the body computes
from shapes (``Shape`` → ``Slice`` → ``Range``) is folded by the preparation steps after this one.

A node stays as written (and runs through lowering's host fallback, or is refused at import for a domain DaCe
does not import) when its op has no body at the model's opset, when its body was written for an older opset
under which one of its nodes means something else than under the model's (:func:`_reads_the_same`), or when the
shape inference cannot type the inputs of a body built for them; why is a debug record of the ``dcaccel`` logger.
Every replacement is an info record. :func:`kept_as_written` turns the replacement off.

Only the nodes of the main graph are replaced: a function op in a ``Loop``, ``If`` or ``Scan`` body is replaced
once that body is unrolled into the main graph (``onnx_prepare.normalize`` alternates the two steps).
"""

import contextlib
import contextvars
import logging
from collections import Counter
from collections.abc import Collection

import onnx
from onnx import defs

from dcaccel.frontend.ml_domain import importable_node

#: Rounds of expansion: a body may hold function ops without an implementation (expanded in the next round).
MAX_DEPTH = 4

logger = logging.getLogger(__name__)

_EXPAND: contextvars.ContextVar[bool] = contextvars.ContextVar("expand_functions", default=True)


@contextlib.contextmanager
def kept_as_written():
    """Run the block (an import) with every function op kept as written: :func:`with_function_bodies` replaces
    nothing, and an op without an implementation runs through lowering's host fallback."""
    token = _EXPAND.set(False)
    try:
        yield
    finally:
        _EXPAND.reset(token)


def with_function_bodies(proto: onnx.ModelProto, source: str, implemented: Collection[str]) -> onnx.ModelProto:
    """``proto`` with every node of its graph that :func:`_expandable` names replaced by its op's ONNX function body
    at the opset the model imports the op's domain at (a copy; ``proto`` itself when none applies, or inside
    :func:`kept_as_written`)."""
    opsets = {entry.domain: entry.version for entry in proto.opset_import}
    model = proto
    for _ in range(MAX_DEPTH if _EXPAND.get() else 0):
        expanded = _expanded_once(model, source, opsets, implemented)
        if expanded is model:
            break
        model = expanded
    return model


def _expandable(node: onnx.NodeProto, opsets: dict[str, int], implemented: Collection[str]) -> bool:
    """Whether ``node``'s op has an ONNX function body at the opset ``opsets`` gives its domain and no other way
    through import: a default-domain op not in ``implemented``, or an op of another domain whose nodes DaCe's
    importer cannot build (any but the ``ai.onnx.ml`` ops it has classes for). The model must import the default
    domain, which the bodies are written in."""
    if "" not in opsets or node.domain not in opsets:
        return False
    handled = importable_node(node) if node.domain else node.op_type in implemented
    if handled:
        return False
    schema = _schema(node.op_type, opsets[node.domain], node.domain)
    return schema is not None and (schema.has_function or schema.has_context_dependent_function)


def _schema(op_type: str, opset: int, domain: str = "") -> defs.OpSchema | None:
    try:
        return defs.get_schema(op_type, opset, domain)
    except defs.SchemaError:
        return None


def _expanded_once(
    proto: onnx.ModelProto, source: str, opsets: dict[str, int], implemented: Collection[str]
) -> onnx.ModelProto:
    """``proto`` with every function node replaced by its body (one level; ``proto`` itself when none applies)."""
    if not any(_expandable(node, opsets, implemented) for node in proto.graph.node):
        return proto
    types = _value_types(proto)
    taken = _names(proto.graph)
    nodes, replaced = [], Counter()
    for index, node in enumerate(proto.graph.node):
        body = None
        if _expandable(node, opsets, implemented):
            body = _body(node, index, opsets, types, taken, source)
        if body is None:
            nodes.append(node)
        else:
            nodes.extend(body)
            replaced[node.domain, node.op_type] += 1
    if not replaced:
        return proto
    for (domain, op), count in replaced.items():
        qualified = f"{domain}.{op}" if domain else op
        logger.info(
            "%s: %d %s node(s) replaced by the ONNX function body of %s-%d",
            source,
            count,
            op,
            qualified,
            opsets[domain],
        )
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def _body(
    node: onnx.NodeProto, index: int, opsets: dict[str, int], types: dict, taken: set[str], source: str
) -> list[onnx.NodeProto] | None:
    """The nodes of ``node``'s function body, renamed into the graph (their names added to ``taken``), or None
    when the body does not apply (why is a debug record)."""
    label = node.name or f"{node.op_type}_{index}"
    version = opsets[node.domain]
    schema = _schema(node.op_type, version, node.domain)
    function, reason = _function(node, schema, version, opsets[""], types)
    if function is None:
        logger.debug("%s: node '%s' (%s) stays as written: %s", source, label, node.op_type, reason)
        return None
    attributes = {a.name: a.default_value for a in schema.attributes.values() if a.default_value.type}
    attributes.update({a.name: a for a in node.attribute})
    renamed = {name: node.input[i] if i < len(node.input) else "" for i, name in enumerate(function.input)}
    renamed.update({name: node.output[i] for i, name in enumerate(function.output) if i < len(node.output)})
    renamed = {name: value for name, value in renamed.items() if name not in function.output or value}
    # PyTorch names a node by its module path and op ("/norm/RMSNormalization"): the op is not repeated
    prefix = label if label.rpartition("/")[2].startswith(node.op_type) else f"{label}/{node.op_type}"

    def rename(name: str) -> str:
        if name and name not in renamed:
            renamed[name] = _unique(f"{prefix}/{name}", taken)
        return renamed.get(name, "")

    return [
        _renamed(inner, f"{prefix}/{inner.op_type}_{k}", rename, attributes, taken)
        for k, inner in enumerate(function.node)
    ]


def _renamed(inner: onnx.NodeProto, name: str, rename, attributes: dict, taken: set[str]) -> onnx.NodeProto:
    """A copy of the body node ``inner`` named ``name`` (made unique), its tensors renamed by ``rename``, its
    attribute references given the node's values (an attribute referring to none is left out), the graphs
    of its attributes (an ``If``'s branches) renamed the same, node by node."""
    copy = onnx.NodeProto()
    copy.CopyFrom(inner)
    copy.name = _unique(name, taken)
    copy.input[:] = [rename(tensor) for tensor in inner.input]
    copy.output[:] = [rename(tensor) for tensor in inner.output]
    del copy.attribute[:]
    for attribute in inner.attribute:
        value = attributes.get(attribute.ref_attr_name) if attribute.ref_attr_name else attribute
        if value is None:
            continue
        copy.attribute.append(value)
        written = copy.attribute[-1]
        written.name = attribute.name
        for graph in [written.g] if written.HasField("g") else written.graphs:
            for value_info in [*graph.input, *graph.output, *graph.value_info]:
                value_info.name = rename(value_info.name)
            for initializer in graph.initializer:
                initializer.name = rename(initializer.name)
            nodes = [_renamed(node, f"{copy.name}_{node.op_type}", rename, attributes, taken) for node in graph.node]
            del graph.node[:]
            graph.node.extend(nodes)
    return copy


def _function(
    node: onnx.NodeProto, schema: defs.OpSchema, version: int, opset: int, types: dict
) -> tuple[onnx.FunctionProto | None, str]:
    """``node``'s function body from ``schema`` (its op's at ``version``, the model's opset of its domain): the
    newest written for a version not above ``version``, if its nodes mean at the model's default-domain
    ``opset`` what they were written for; or None and why not."""
    versions = [v for v in schema.function_opset_versions if v <= version]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= version]
    function = onnx.FunctionProto()
    if dependent and (not versions or max(dependent) >= max(versions)):
        missing = [name for name in node.input if name and name not in types]
        if missing:
            return None, f"the type of its input '{missing[0]}' is not known"
        inputs = [types[name].SerializeToString() if name else b"" for name in node.input]
        try:
            text = schema.get_context_dependent_function_with_opset_version(
                max(dependent), node.SerializeToString(), inputs
            )
        except Exception as err:  # onnx's C++ function builders raise assorted types
            return None, f"its function body cannot be built: {err}"
        function.ParseFromString(text)
    elif versions:
        function.ParseFromString(schema.get_function_with_opset_version(max(versions)))
    else:
        return None, f"its schema has no function body for opset {version}"
    if not function.node:
        return None, "its function body is empty"
    return _check_versions(function, opset)


def _check_versions(function: onnx.FunctionProto, opset: int) -> tuple[onnx.FunctionProto | None, str]:
    """``function`` if every node of its body means at ``opset`` what it meant at the opset the body was written
    for (:func:`_reads_the_same`), else None and the first op that does not."""
    written = {entry.domain: entry.version for entry in function.opset_import}.get("", opset)
    for inner in function.node:
        if inner.domain:
            return None, f"its body uses the domain '{inner.domain}'"
        then, now = _schema(inner.op_type, written), _schema(inner.op_type, opset)
        if then is None or now is None or not _reads_the_same(inner, then, now):
            return None, f"its body's {inner.op_type} (opset {written}) was redefined by opset {opset}"
    return function, ""


def _reads_the_same(node: onnx.NodeProto, then: defs.OpSchema, now: defs.OpSchema) -> bool:
    """Whether ``now`` (a later definition of an op) computes ``node``, written for ``then``, the same way, as far
    as the signatures tell: the same inputs (optional ones added after them) and outputs, every attribute the
    node sets still there, every one it leaves out with the same default (or, gone, with none: an optional
    attribute become an optional input, absent either way), no new required one. A change of the types only
    (``Cast``, ``Shape``) keeps a body valid; ``ReduceMean``'s ``axes`` become an input at opset 18 does not
    where the body sets it."""
    if then.since_version == now.since_version:
        return True
    inputs = [parameter.name for parameter in then.inputs]
    added = now.inputs[len(inputs) :]
    if [parameter.name for parameter in now.inputs[: len(inputs)]] != inputs or any(
        parameter.option != defs.OpSchema.FormalParameterOption.Optional for parameter in added
    ):
        return False
    if [parameter.name for parameter in then.outputs] != [parameter.name for parameter in now.outputs]:
        return False
    written = {attribute.name for attribute in node.attribute}
    if not written <= set(now.attributes):
        return False
    for name, attribute in then.attributes.items():
        if name in written:
            continue
        default = now.attributes[name].default_value if name in now.attributes else onnx.AttributeProto()
        if default != attribute.default_value:
            return False
    return not any(attribute.required for name, attribute in now.attributes.items() if name not in then.attributes)


def _value_types(proto: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """The type of every tensor of ``proto`` that shape inference gives (initializers included), by name."""
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception:  # noqa: BLE001 - untyped inputs keep their nodes as written (see _function)
        inferred = proto
    graph = inferred.graph
    types = {value.name: value.type for value in [*graph.input, *graph.value_info, *graph.output]}
    for init in graph.initializer:
        types[init.name] = onnx.helper.make_tensor_type_proto(init.data_type, list(init.dims))
    return types


def _names(graph: onnx.GraphProto) -> set[str]:
    """Every tensor and node name of ``graph``."""
    names = {name for node in graph.node for name in [node.name, *node.input, *node.output]}
    names |= {value.name for value in [*graph.input, *graph.output, *graph.initializer]}
    return names


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name_<k>`` for the first ``k`` that is not in ``taken``; added to ``taken``."""
    unique, suffix = name, 1
    while unique in taken:
        unique, suffix = f"{name}_{suffix}", suffix + 1
    taken.add(unique)
    return unique
