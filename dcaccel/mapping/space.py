"""The bounded mapping space of one layer: implementations, divisor tile sizes, loop orders, fusion and
on-chip placements, with its size as a formula and as a number.

The space is the product of its dimensions, split as Marvel splits it: the *off-chip* subspace
(implementation × a tile size per loop dimension × the resident operand) and the *on-chip* subspace
(fusion × PEs × scheduler). Tile sizes are divisors of their dimension's extent (tiles are equal, as
the DAG contract wants); with ``tile_limit`` only that many divisors are kept per dimension, evenly
spread over the sorted divisors and always including 1 and the whole extent.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from dcaccel.errors import DcaccelError
from dcaccel.mapping.layers import LoopNest
from dcaccel.mapping.notation import RESIDENT, SCHEDULERS, Mapping

IMPLEMENTATIONS = ("mv", "op", "lmv")
ORDERS = tuple(r for r in RESIDENT if r != "-")


def divisors(extent: int) -> list[int]:
    """The divisors of ``extent``, ascending."""
    small = [d for d in range(1, math.isqrt(extent) + 1) if extent % d == 0]
    return sorted(set(small + [extent // d for d in small]))


def bounded(values: Sequence[int], limit: int | None) -> tuple[int, ...]:
    """At most ``limit`` of ``values`` (sorted), evenly spread by index, first and last always kept."""
    if limit is None or len(values) <= limit:
        return tuple(values)
    if limit < 2:
        raise DcaccelError(f"mapping space: the tile limit must be at least 2 (1 and the extent), got {limit}")
    picks = {round(i * (len(values) - 1) / (limit - 1)) for i in range(limit)}
    return tuple(values[i] for i in sorted(picks))


@dataclass(frozen=True)
class OffchipChoice:
    """A point of the off-chip subspace: implementation, tile size per loop dimension, resident operand."""

    implementation: str
    tiles: tuple[tuple[str, int], ...]
    stay: str


@dataclass(frozen=True)
class OnchipChoice:
    """A point of the on-chip subspace: fusion and placement."""

    fuse: bool
    pes: int
    scheduler: str


def onchip_choices(
    fusion: Sequence[bool] = (False, True), pes: Sequence[int] = (16,), schedulers: Sequence[str] = SCHEDULERS
) -> Iterator[OnchipChoice]:
    """Every fusion × PE count × scheduler, in that order (the on-chip subspace of any node)."""
    for fuse, count, scheduler in itertools.product(fusion, pes, schedulers):
        yield OnchipChoice(fuse, count, scheduler)


@dataclass(frozen=True)
class MappingSpace:
    """The bounded mapping space of the node ``node`` with loop nest ``nest``."""

    node: str
    nest: LoopNest
    implementations: tuple[str, ...]
    tiles: tuple[tuple[str, tuple[int, ...]], ...]
    orders: tuple[str, ...]
    fusion: tuple[bool, ...]
    pes: tuple[int, ...]
    schedulers: tuple[str, ...]

    @classmethod
    def of(
        cls,
        node: str,
        nest: LoopNest,
        *,
        implementations: Sequence[str] = IMPLEMENTATIONS,
        pes: Sequence[int] = (16,),
        schedulers: Sequence[str] = SCHEDULERS,
        fusion: Sequence[bool] = (False, True),
        tile_limit: int | None = 4,
    ) -> MappingSpace:
        """The space of ``node`` with the divisors of every extent (at most ``tile_limit`` each)."""
        unknown = sorted(set(implementations) - set(IMPLEMENTATIONS))
        if unknown or not implementations:
            raise DcaccelError(
                f"mapping space {node}: implementations must be among {', '.join(IMPLEMENTATIONS)}, got "
                f"{', '.join(implementations) or 'none'}"
            )
        if not pes or any(isinstance(p, bool) or not isinstance(p, int) or p < 1 for p in pes):
            raise DcaccelError(f"mapping space {node}: PE counts must be positive integers, got {list(pes)}")
        bad = sorted(set(schedulers) - set(SCHEDULERS))
        if bad or not schedulers:
            raise DcaccelError(f"mapping space {node}: schedulers must be among {', '.join(SCHEDULERS)}")
        tiles = tuple((name, bounded(divisors(extent), tile_limit)) for name, extent in nest.extents.items())
        return cls(node, nest, tuple(implementations), tiles, ORDERS, tuple(fusion), tuple(pes), tuple(schedulers))

    def dimensions(self) -> dict[str, int]:
        """The number of choices of every dimension, off-chip ones first."""
        return {
            "implementation": len(self.implementations),
            **{f"tile {name}": len(sizes) for name, sizes in self.tiles},
            "stay": len(self.orders),
            "fuse": len(self.fusion),
            "pes": len(self.pes),
            "scheduler": len(self.schedulers),
        }

    @property
    def offchip_size(self) -> int:
        return len(self.implementations) * math.prod(len(s) for _, s in self.tiles) * len(self.orders)

    @property
    def onchip_size(self) -> int:
        return len(self.fusion) * len(self.pes) * len(self.schedulers)

    @property
    def size(self) -> int:
        """The number of mappings in the space (before the capacity constraint)."""
        return self.offchip_size * self.onchip_size

    @property
    def formula(self) -> str:
        """The size as a product of the dimensions' counts: ``|impl|·|tile n|·... = 3·4·3·4·3·2·1·2``."""
        counts = self.dimensions()
        return "·".join(f"|{name}|" for name in counts) + " = " + "·".join(str(c) for c in counts.values())

    def offchip(self) -> Iterator[OffchipChoice]:
        """Every point of the off-chip subspace."""
        names = [name for name, _ in self.tiles]
        for implementation in self.implementations:
            for sizes in itertools.product(*(s for _, s in self.tiles)):
                for stay in self.orders:
                    yield OffchipChoice(implementation, tuple(zip(names, sizes, strict=True)), stay)

    def onchip(self) -> Iterator[OnchipChoice]:
        """Every point of the on-chip subspace."""
        return onchip_choices(self.fusion, self.pes, self.schedulers)

    def mapping(self, off: OffchipChoice, on: OnchipChoice) -> Mapping:
        """The :class:`Mapping` of one off-chip and one on-chip choice."""
        return Mapping(self.node, off.implementation, off.tiles, off.stay, on.fuse, on.pes, on.scheduler)
