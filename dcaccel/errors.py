"""Errors a user of dcaccel can act on.

Every error raised for bad input derives from :class:`DcaccelError`; its message is one line
that names the problem (the op and node, the tensor and its shape, the file). The CLI prints
that line and exits with status 2 instead of showing a traceback.
"""


class DcaccelError(Exception):
    """Bad input or an unsupported request, explained in one line."""


class UnsupportedOpError(DcaccelError):
    """An ONNX op (or one of its attributes) that dcaccel cannot lower."""

    def __init__(self, op_type: str, node_name: str, detail: str = ""):
        self.op_type = op_type
        self.node_name = node_name
        suffix = f": {detail}" if detail else ""
        super().__init__(f"unsupported op {op_type} (node '{node_name}'){suffix}")


class ShapeError(DcaccelError):
    """A tensor whose shape does not fit what was declared or expected."""

    def __init__(self, tensor: str, expected, got):
        self.tensor = tensor
        super().__init__(f"tensor '{tensor}': expected shape {tuple(expected)}, got {tuple(got)}")


class DAGContractError(DcaccelError):
    """A task DAG that violates the canonical contract (see ``TaskDAG.validate``)."""
