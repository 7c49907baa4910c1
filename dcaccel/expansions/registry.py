"""The one registration of dcaccel's canonical implementations, on DaCe's public API.

Every op module of :mod:`dcaccel.expansions` lists what it implements in ``IMPLEMENTATIONS`` (a
tuple of :class:`~dcaccel.expansions.implementation.Implementation`); importing a module registers
nothing. :func:`register` (called by ``lower()`` and by whatever lists implementations) imports the op
modules and registers each implementation once:

- an ONNX op's implementation (a :class:`~dcaccel.expansions.node.CanonicalForward`) with
  ``op_implementation`` in DaCe's ONNX implementation registry, and on every version of the op's
  node class (``get_onnx_node``, which makes DaCe build its node classes first if it has not yet) with
  ``register_implementation``, so every node class expands with the same expansion whenever DaCe
  built it;
- a DaCe library node's implementation (an ``ExpandTransformation``) with the node class's
  ``register_implementation``.

:func:`register` also makes :func:`dcaccel.frontend.shapes.infer_onnx_shapes` the shape inference of DaCe's
ONNX importer, which then gives the outputs of ops shaped by constant inputs (OneHot's ``depth``...) their sizes.

Every implementation has a static ``check(node, state, sdfg)`` raising
:class:`~dcaccel.errors.UnsupportedOpError` when it does not apply, called before it touches the
graph (see :func:`implementation_of`).
"""

import functools
import importlib

from dcaccel.expansions.implementation import Implementation

MODULES = (
    "conv",
    "elementwise",
    "gather",
    "gemm",
    "indexing",
    "linalg",
    "ml",
    "normalization",
    "padding",
    "pooling",
    "quantized",
    "reduce",
    "recurrent",
    "resize",
    "sampling",
    "scan",
    "shape_ops",
    "signal",
    "softmax",
)
"""The op modules of :mod:`dcaccel.expansions` (each with an ``IMPLEMENTATIONS`` table)."""


@functools.cache
def all_implementations() -> tuple[Implementation, ...]:
    """Every canonical implementation of dcaccel, module by module (imports the op modules)."""
    from dcaccel.expansions.mmm import IMPLEMENTATIONS as MMM_IMPLEMENTATIONS

    found = list(MMM_IMPLEMENTATIONS)
    for module in MODULES:
        found.extend(importlib.import_module(f"dcaccel.expansions.{module}").IMPLEMENTATIONS)
    return tuple(found)


@functools.cache
def register() -> None:
    """Register every canonical implementation on DaCe's ONNX ops and library nodes (once; idempotent)."""
    from dace.libraries.onnx.forward_implementation_abc import ONNXForward
    from dace.libraries.onnx.op_implementations.utils import op_implementation

    from dcaccel.frontend.shapes import install_shape_inference

    install_shape_inference()  # DaCe's importer then shapes the outputs of ops shaped by constant inputs
    classes = _onnx_node_classes()  # before op_implementation: DaCe then never wraps dcaccel's forwards itself
    for implementation in all_implementations():
        if implementation.node_class is not None:
            _register_on(implementation.node_class, implementation.name, implementation.expansion)
            continue
        registered = ONNXForward.registered_implementations(implementation.op)
        if (implementation.name, implementation.expansion) not in registered:
            op_implementation(op=implementation.op, name=implementation.name)(implementation.expansion)
        for node_class in classes.get(implementation.op, ()):
            _register_on(node_class, implementation.name, _forward_expansion(implementation.expansion, node_class))


def _register_on(node_class: type, name: str, expansion: type) -> None:
    if name not in node_class.implementations:
        node_class.register_implementation(name, expansion)


def _onnx_node_classes() -> dict[str, set[type]]:
    """Per ONNX op, the node classes DaCe builds for its versions (built now if they were not yet)."""
    import onnx
    from dace.libraries.onnx.nodes import get_onnx_node, has_onnx_node

    ops = {i.op for i in all_implementations() if i.node_class is None}
    classes: dict[str, set[type]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.name not in ops or not has_onnx_node(schema.name):
            continue
        try:
            classes.setdefault(schema.name, set()).add(get_onnx_node(schema.name, schema.since_version))
        except ValueError:  # a version older than every one DaCe could build
            continue
    return classes


@functools.cache
def _forward_expansion(forward: type, node_class: type) -> type:
    """The ``ExpandTransformation`` that expands nodes of ``node_class`` with ``forward`` (DaCe ties an
    expansion class to one node class)."""
    from dace.transformation.transformation import ExpandTransformation

    class Expansion(ExpandTransformation):
        environments = []
        forward_impl = forward

        @classmethod
        def expansion(cls, node, state, sdfg, **kwargs):
            node.validate(sdfg, state)
            cls.forward_impl.check(node, state, sdfg)
            return cls.forward_impl.forward(node, state, sdfg, **kwargs)

    Expansion.__name__ = Expansion.__qualname__ = f"{node_class.__name__}_Expansion_{forward.__name__}"
    return Expansion


def implementation_of(node, name: str) -> Implementation | None:
    """dcaccel's implementation ``name`` of the library ``node`` (None if dcaccel has none of that name)."""
    from dace.libraries.onnx.nodes.onnx_op import ONNXOp

    register()
    for implementation in all_implementations():
        if implementation.name != name:
            continue
        if isinstance(node, ONNXOp) and implementation.node_class is None and implementation.op == node.schema.name:
            return implementation
        if implementation.node_class is not None and isinstance(node, implementation.node_class):
            return implementation
    return None


def node_implementations(node) -> list[str]:
    """Names of dcaccel's implementations of the library ``node``."""
    from dace.libraries.onnx.nodes.onnx_op import ONNXOp

    if isinstance(node, ONNXOp):
        return implementations(node.schema.name)
    return sorted(i.name for i in all_implementations() if i.node_class is not None and isinstance(node, i.node_class))


def implementations(op_type: str) -> list[str]:
    """Names of dcaccel's canonical implementations of the ONNX op ``op_type``."""
    return sorted(i.name for i in all_implementations() if i.node_class is None and i.op == op_type)


def supported_ops() -> list[str]:
    """ONNX op types that have at least one canonical implementation in dcaccel."""
    return sorted({i.op for i in all_implementations() if i.node_class is None})
