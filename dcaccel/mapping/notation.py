"""The mapping of one node of a model, as a dataclass with a compact text form that parses back.

A :class:`Mapping` says how one node runs on the accelerator, in the spirit of the MDC directives
(``SpatialMap``, ``TemporalMap``, ``Cluster``) that Marvel searches over:

- ``implementation``: the canonical implementation the node is lowered with (``mv``, ``op``, ``lmv``
  for the matrix products, ``canonical`` for the other ops);
- ``tiles``: the off-chip tile size of every loop dimension of the node's loop nest (the matrix
  product C[n×m] = A[n×k]·B[k×m]: dimensions ``n``, ``k``, ``m``); the tile of the implementation's
  *task dimension* (``m`` for ``mv``, ``k`` for ``op``, ``n`` for ``lmv``) is also the task
  granularity: the task map becomes extent / tile tasks of tile iterations each;
- ``stay``: the loop order, named by the operand that stays resident on chip while the others are
  tiled around it (``A``, ``B`` or ``C``; ``-`` when the node has no loop nest);
- ``fuse``: whether the node's element-wise tasks are fused with their element-wise neighbours;
- ``pes`` and ``scheduler``: the on-chip placement (how many PEs, streaming or list scheduler).

Text form, one node per line (``parse`` reads it back; ``parse(str(m)) == m`` for every mapping)::

    conv1 = mv | Tile(n=6, k=25, m=64) | Stay(C) | Fuse(no) | Spatial(16, list)

Node names are any run of characters without white space, ``=`` or ``|`` (ONNX names such as
``/layer1/layer1.0/conv1/Conv`` included). The parser is a small tokenizer: nothing is evaluated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dcaccel.errors import DcaccelError

#: The operands a loop order can keep resident (the matrix product's A, B and C); ``-``: no loop nest.
RESIDENT = ("A", "B", "C", "-")
SCHEDULERS = ("streaming", "list")
#: The largest tile size and PE count (a 64-bit integer, what result files hold).
MAX_SIZE = 2**63 - 1

_NAME = re.compile(r"[^\s=|]+")
_DIMENSION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DIRECTIVE = re.compile(r"([A-Za-z]+)\((.*)\)")


@dataclass(frozen=True)
class Mapping:
    """How one node runs: implementation, off-chip tiles and loop order, fusion and on-chip placement."""

    node: str
    implementation: str
    tiles: tuple[tuple[str, int], ...] = ()
    stay: str = "-"
    fuse: bool = False
    pes: int = 1
    scheduler: str = "streaming"
    #: Extent of every tiled dimension (not part of the text form; set by the mapping space).
    extents: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.node):
            raise DcaccelError(f"mapping: node name {self.node!r} must be non-empty, without spaces, '=' or '|'")
        if not _DIMENSION.fullmatch(self.implementation):
            raise DcaccelError(f"mapping {self.node}: implementation {self.implementation!r} is not a name")
        names = [name for name, _ in self.tiles]
        if len(set(names)) != len(names):
            raise DcaccelError(f"mapping {self.node}: a tile dimension is given twice ({', '.join(names)})")
        for name, size in self.tiles:
            if not _DIMENSION.fullmatch(name):
                raise DcaccelError(f"mapping {self.node}: tile dimension {name!r} is not a name")
            if not _is_size(size):
                raise DcaccelError(
                    f"mapping {self.node}: tile {name} must be a positive integer of at most {MAX_SIZE}, "
                    f"got {_shown(size)}"
                )
        if self.stay not in RESIDENT:
            raise DcaccelError(f"mapping {self.node}: Stay({self.stay}) must name one of {', '.join(RESIDENT)}")
        if not _is_size(self.pes):
            raise DcaccelError(
                f"mapping {self.node}: Spatial needs a positive number of PEs of at most {MAX_SIZE}, "
                f"got {_shown(self.pes)}"
            )
        if self.scheduler not in SCHEDULERS:
            raise DcaccelError(
                f"mapping {self.node}: scheduler {self.scheduler!r} is not one of {', '.join(SCHEDULERS)}"
            )

    def tile(self, dimension: str) -> int | None:
        """The tile size of ``dimension`` (None when it is not tiled)."""
        return dict(self.tiles).get(dimension)

    def __str__(self) -> str:
        parts = [f"{self.node} = {self.implementation}"]
        if self.tiles:
            parts.append("Tile(" + ", ".join(f"{name}={size}" for name, size in self.tiles) + ")")
        parts.append(f"Stay({self.stay})")
        parts.append(f"Fuse({'yes' if self.fuse else 'no'})")
        parts.append(f"Spatial({self.pes}, {self.scheduler})")
        return " | ".join(parts)


def _is_size(value) -> bool:
    """Whether ``value`` is a tile size or PE count: an integer from 1 to :data:`MAX_SIZE`."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SIZE


def _shown(value) -> str:
    """``value`` as an error message shows it (an integer of more than 128 bits as its bit length: Python
    refuses to print one of more than 4,300 digits)."""
    return (
        f"an integer of {value.bit_length()} bits"
        if isinstance(value, int) and value.bit_length() > 128
        else repr(value)
    )


def parse(text: str) -> Mapping:
    """The :class:`Mapping` written as ``text`` (one line of the form of :class:`Mapping`'s ``str``).

    Directives after the implementation may come in any order and may be left out (defaults: no
    tiles, ``Stay(-)``, ``Fuse(no)``, ``Spatial(1, streaming)``). Raises :class:`DcaccelError` with
    one line naming the directive at fault.
    """
    line = text.strip()
    head, sep, _ = line.partition("=")
    if not sep:
        raise DcaccelError(f"mapping {line!r}: expected 'NODE = IMPLEMENTATION | Directive(...) ...'")
    node = head.strip()
    parts = [part.strip() for part in line[len(head) + 1 :].split("|")]
    if not _NAME.fullmatch(node):
        raise DcaccelError(f"mapping {line!r}: node name {node!r} must be non-empty, without spaces, '=' or '|'")
    fields: dict[str, object] = {"node": node, "implementation": parts[0]}
    seen: set[str] = set()
    for part in parts[1:]:
        match = _DIRECTIVE.fullmatch(part)
        if match is None:
            raise DcaccelError(f"mapping {node}: {part!r} is not a directive Name(...)")
        name, body = match.group(1), match.group(2).strip()
        if name in seen:
            raise DcaccelError(f"mapping {node}: directive {name} given twice")
        seen.add(name)
        if name not in _READERS:
            raise DcaccelError(f"mapping {node}: unknown directive {name} (known: {', '.join(_READERS)})")
        fields.update(_READERS[name](node, body))
    return Mapping(**fields)


def _integer(node: str, directive: str, text: str) -> int:
    """The decimal integer ``text``; one too long for :data:`MAX_SIZE` is refused before it is converted
    (Python refuses to convert more than 4,300 digits)."""
    if not re.fullmatch(r"[0-9]+", text):
        raise DcaccelError(f"mapping {node}: {directive} expects a positive integer, got {text!r}")
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_SIZE)):
        raise DcaccelError(
            f"mapping {node}: {directive} expects an integer of at most {MAX_SIZE}, got {len(digits)} digits"
        )
    return int(digits)


def _read_tiles(node: str, body: str) -> dict:
    tiles = []
    for item in filter(None, (item.strip() for item in body.split(","))):
        name, sep, value = (piece.strip() for piece in item.partition("="))
        if not sep or not _DIMENSION.fullmatch(name):
            raise DcaccelError(f"mapping {node}: Tile expects dimension=size items, got {item!r}")
        tiles.append((name, _integer(node, f"Tile({name}=...)", value)))
    return {"tiles": tuple(tiles)}


def _read_stay(node: str, body: str) -> dict:
    return {"stay": body}


def _read_fuse(node: str, body: str) -> dict:
    if body not in ("yes", "no"):
        raise DcaccelError(f"mapping {node}: Fuse expects yes or no, got {body!r}")
    return {"fuse": body == "yes"}


def _read_spatial(node: str, body: str) -> dict:
    pieces = [piece.strip() for piece in body.split(",")]
    if len(pieces) != 2:
        raise DcaccelError(f"mapping {node}: Spatial expects (PES, SCHEDULER), got {body!r}")
    return {"pes": _integer(node, "Spatial", pieces[0]), "scheduler": pieces[1]}


_READERS = {"Tile": _read_tiles, "Stay": _read_stay, "Fuse": _read_fuse, "Spatial": _read_spatial}


def format_mappings(mappings: list[Mapping]) -> str:
    """The text of several mappings, one per line."""
    return "\n".join(str(mapping) for mapping in mappings)


def parse_mappings(text: str) -> list[Mapping]:
    """The mappings of ``text``, one per non-empty line (``#`` starts a comment line)."""
    lines = (line.strip() for line in text.splitlines())
    return [parse(line) for line in lines if line and not line.startswith("#")]
