"""The opaque mark: which code node of a lowered program is an opaque task (:mod:`dcaccel.transforms.opaque`).

The mark is ``location["dcaccel.opaque"]`` on the code node (a nested SDFG DaCe expanded an op into, or a host
task's tasklet, :mod:`dcaccel.transforms.host`), in a DaCe ``DictProperty`` that survives ``deepcopy``,
inlining of its parents and JSON, as the buffer marks do (never a name). DaCe's code generator parses every
value of a code node's ``location`` as a symbolic expression, so the mark's value is the constant ``"1"``.
This module imports nothing of dcaccel, so that both the opaque fallback and the host tasks can mark.
"""

from dace.sdfg import nodes

_KEY = "dcaccel.opaque"
_MARK = "1"  # a constant: DaCe reads the values of a code node's location as symbolic expressions


def mark_opaque(node: nodes.CodeNode) -> None:
    """Mark ``node`` (the nested SDFG or tasklet an op was expanded into) as an opaque task."""
    node.location[_KEY] = _MARK


def is_opaque(node: nodes.Node) -> bool:
    """Whether ``node`` is an opaque task (a code node carrying the mark)."""
    return isinstance(node, nodes.CodeNode) and _KEY in node.location
