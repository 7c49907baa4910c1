"""``explore(..., strategy="mapping")``: the mapping search (:func:`dcaccel.map`, ``docs/mapping.md``) as
an exploration, in the results table's form.

For each architecture and on-chip size of the sweep, :func:`dcaccel.map` searches the best mapping of
every node; the rows are one per node (``granularity`` ``"layer"``) then one for the whole network
(``"network"``), with the columns of :class:`~dcaccel.exploration.points.ExplorationPoint`:

- ``assignment``: a layer's best mapping in the notation (``conv1 = lmv | Tile(...) | ... |
  Spatial(16, list)``); the network's implementation per node (``conv1=lmv,relu1=canonical,...``);
- ``pes`` and ``scheduler``: the layer mapping's ``Spatial(P, scheduler)``; the network's largest P and
  its layers' schedulers joined by ``+``;
- ``onchip_memory`` as swept (0: the architecture's capacity), ``architecture`` its label,
  ``partition_policy`` ``"none"``;
- ``makespan_cycles`` and ``energy_pj``: the search's cost of the layer (schedule plus off-chip
  re-fetches), the network's the sum over its counted nodes run one after the other; ``makespan_us``
  the cycles at the architecture's clock; ``lower_seconds`` the search's time;
- every other column is NaN: the search does not compute it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from dcaccel.architecture import Architecture
from dcaccel.errors import DcaccelError
from dcaccel.exploration.points import columns

#: The strategy of :func:`dcaccel.explore` that runs the mapping search.
MAPPING = "mapping"
#: The ``granularity`` of a layer's row and of the whole network's.
LAYER, NETWORK = "layer", "network"


def mapping_points(
    workload, archs: Sequence[Architecture], onchip_memory: Sequence[int], objective: str, pes: Sequence[int]
) -> pd.DataFrame:
    """The best mapping per layer and the whole network's point, for each architecture and on-chip size
    (see the module docstring); ``objective`` and ``pes`` as for :func:`dcaccel.map`."""
    from dcaccel.mapping import OBJECTIVES, map_workload

    if objective not in OBJECTIVES:
        raise DcaccelError(
            f"explore: the mapping strategy's objective is one of {', '.join(OBJECTIVES)}, not {objective!r}"
        )
    rows = []
    for arch in archs:
        for memory in onchip_memory:
            result = map_workload(workload, arch, objective, pes=tuple(pes), capacity=memory or None)
            common = {"workload": result.workload, "architecture": arch.label, "onchip_memory": memory}
            for layer in result.layers:
                mapping = result.best[layer.layer]
                rows.append(
                    _row(
                        common,
                        arch,
                        layer.mapping,
                        LAYER,
                        mapping.pes,
                        mapping.scheduler,
                        layer.makespan_cycles,
                        layer.energy_pj,
                        layer.seconds,
                    )
                )
            mappings = list(result.best.values())
            rows.append(
                _row(
                    common,
                    arch,
                    ",".join(f"{m.node}={m.implementation}" for m in mappings),
                    NETWORK,
                    max(m.pes for m in mappings),
                    "+".join(sorted({m.scheduler for m in mappings})),
                    result.total.makespan_cycles,
                    result.total.energy_pj,
                    result.seconds,
                )
            )
    return pd.DataFrame(rows, columns=columns())


def _row(common, arch: Architecture, assignment, granularity, pes, scheduler, cycles, energy, seconds) -> dict:
    return {
        **common,
        "assignment": assignment,
        "granularity": granularity,
        "pes": pes,
        "scheduler": scheduler,
        "partition_policy": "none",
        "makespan_cycles": cycles,
        "makespan_us": cycles / arch.clock_mhz,
        "energy_pj": energy,
        "lower_seconds": seconds,
    }
