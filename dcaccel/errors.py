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
        self.detail = detail
        suffix = f": {detail}" if detail else ""
        super().__init__(f"unsupported op {op_type} (node '{node_name}'){suffix}")


class ImportedShapeError(UnsupportedOpError):
    """A node whose imported shapes contradict what its op computes from its inputs and attributes (ONNX's shape
    inference of the model gave another shape than the op's): no implementation, the host's included, can write
    that node's output, so lowering refuses it instead of falling back."""


class ShapeError(DcaccelError):
    """A tensor whose shape does not fit what was declared or expected."""

    def __init__(self, tensor: str, expected, got):
        self.tensor = tensor
        super().__init__(f"tensor '{tensor}': expected shape {tuple(expected)}, got {tuple(got)}")


class UnboundSymbolError(DcaccelError):
    """A symbolic dimension of a tensor that was given no value; ``how`` says how to give it."""

    def __init__(self, tensor: str, symbol: str, how: str = ""):
        self.tensor = tensor
        self.symbol = symbol
        how = how or f"symbols={{'{symbol}': ...}}"
        super().__init__(f"tensor '{tensor}': dimension '{symbol}' has no value (give it with {how})")


class DAGContractError(DcaccelError):
    """A task DAG that violates the canonical contract (see ``TaskDAG.validate``)."""
