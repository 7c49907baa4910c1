"""The frontend: import a model (PyTorch, ONNX, ``@dace.program``, SDFG) into a :class:`Workload`.

:func:`load` is the single entry point; the importers live one per module beside it.
"""

from dcaccel.frontend.load import load
from dcaccel.frontend.workload import Origin, TensorSpec, Workload

__all__ = ["Origin", "TensorSpec", "Workload", "load"]
