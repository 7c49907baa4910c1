"""What a canonical implementation is, as the op modules of :mod:`dcaccel.expansions` declare theirs.

Every op module lists what it implements in ``IMPLEMENTATIONS``, a tuple of :class:`Implementation`;
:mod:`dcaccel.expansions.registry` imports the op modules and registers them. The op modules import this
module, never the registry, so that the registry can import them without an import circle.
"""

from dataclasses import dataclass

CANONICAL = "canonical"
"""The name of the one implementation of ops that have a single canonical lowering."""


@dataclass(frozen=True)
class Implementation:
    """One canonical implementation: the op it expands, its name and the class that expands it.

    ``node_class`` is the DaCe library node class for a library node (``expansion`` is then an
    ``ExpandTransformation``), None for an ONNX op named ``op`` (``expansion`` is then a
    ``CanonicalForward``).
    """

    op: str
    name: str
    expansion: type
    node_class: type | None = None
