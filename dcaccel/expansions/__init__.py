"""Canonical implementations of operators.

Importing this package imports every module in it, which registers each implementation on its
ONNX op through DaCe's ONNX implementation registry (``@op_implementation``). The canonical
matrix-multiply node and its shapes live in :mod:`dcaccel.expansions.mmm`.
"""

import importlib
import pkgutil

from dace.libraries.onnx.forward_implementation_abc import ONNXForward

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def implementations(op_type: str) -> list[str]:
    """Names of dcaccel's canonical implementations registered for the ONNX op ``op_type``."""
    return sorted(
        info["name"]
        for cls, info in ONNXForward.extensions().items()
        if info["op"] == op_type and cls.__module__.startswith("dcaccel.")
    )


def supported_ops() -> list[str]:
    """ONNX op types that have at least one canonical implementation in dcaccel."""
    return sorted(
        {info["op"] for cls, info in ONNXForward.extensions().items() if cls.__module__.startswith("dcaccel.")}
    )
