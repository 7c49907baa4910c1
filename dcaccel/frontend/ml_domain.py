"""Models with ``ai.onnx.ml`` nodes through DaCe's ONNX importer.

DaCe builds node classes for every schema onnx ships, ``ai.onnx.ml``'s included (``has_onnx_node("Binarizer")``),
but its importer cannot build them from a model: it looks every node's schema up in the default domain
(``onnx.defs.get_schema(op, default opset)``, a ``SchemaError`` for an ``ai.onnx.ml`` op), and a model that imports
no default-domain opset (ONNX's ``test_ai_onnx_ml_*`` cases) fails before that, in the shape inference it runs
(onnxruntime's returns None for such a model, then ``TypeError: infer_shapes only accepts ModelProto or bytes``).
:func:`make_importable` fixes both for a model with such nodes.
"""

import functools

import onnx
from dace.libraries.onnx.nodes.onnx_op_registry import has_onnx_node

ML_DOMAIN = "ai.onnx.ml"


def has_ml_nodes(proto: onnx.ModelProto) -> bool:
    """Whether ``proto``'s graph has a node of the ``ai.onnx.ml`` domain."""
    return any(node.domain == ML_DOMAIN for node in proto.graph.node)


def importable_node(node: onnx.NodeProto) -> bool:
    """Whether ``node`` is of the ``ai.onnx.ml`` domain and DaCe has a node class for its op."""
    return node.domain == ML_DOMAIN and has_onnx_node(node.op_type)


def make_importable(model: onnx.ModelProto, default_opset: int) -> None:
    """Prepare ``model`` (changed in place) for DaCe's importer if it has ``ai.onnx.ml`` nodes: it imports the
    default domain (at ``default_opset`` if it did not: its nodes then use none of its ops), and the importer's
    schema lookup finds ``ai.onnx.ml`` ops (:func:`install_ml_schema_lookup`)."""
    if not has_ml_nodes(model):
        return
    if not any(entry.domain in ("", "ai.onnx") for entry in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid("", default_opset))
    install_ml_schema_lookup()


@functools.cache
def install_ml_schema_lookup() -> None:
    """Make the schema lookup of DaCe's ONNX importer (``onnx.defs.get_schema`` as its module sees it; onnx itself
    is left alone) fall back to ``ai.onnx.ml`` for an op the default domain does not define, at the newest version
    not above the one asked for (an op defined in both domains keeps the default one); once."""
    from dace.frontend.ml.onnx import importer

    def get_schema(op_type: str, max_inclusive_version: int, domain: str = ""):
        try:
            return onnx.defs.get_schema(op_type, max_inclusive_version, domain)
        except onnx.defs.SchemaError:
            if domain:
                raise
            return onnx.defs.get_schema(op_type, max_inclusive_version, ML_DOMAIN)

    importer.onnx = _Delegate(onnx, defs=_Delegate(onnx.defs, get_schema=get_schema))


class _Delegate:
    """``target`` with the attributes ``overrides`` replaced (every other attribute read from ``target``)."""

    def __init__(self, target, **overrides):
        self._target = target
        vars(self).update(overrides)

    def __getattr__(self, name: str):
        return getattr(self._target, name)
