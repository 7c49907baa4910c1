"""``explore(..., strategy="mapping")``: the mapping search (:func:`dcaccel.map`, ``docs/mapping.md``) as an
exploration, its layers evaluated by the study's executor like any other strategy's assignments and stored
in its result file, and its rows in the results table's form.

The unit of work is one layer of the model (the first of the layers sharing a signature, whose search the
others reuse, as :func:`dcaccel.map` does): :class:`MappingSearch` searches it on every architecture and
on-chip size of the study and gives one :class:`MappedLayer` each. The rows are, per architecture and
on-chip size, one per node (``granularity`` ``"layer"``) then one for the whole network (``"network"``),
with the columns of :class:`~dcaccel.exploration.points.ExplorationPoint`:

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
from dataclasses import asdict, dataclass, replace

import pandas as pd

from dcaccel.architecture import Architecture
from dcaccel.errors import DcaccelError
from dcaccel.exploration.assignments import Assignment
from dcaccel.exploration.points import columns

#: The strategy of :func:`dcaccel.explore` that runs the mapping search.
MAPPING = "mapping"
#: The ``granularity`` of a layer's row and of the whole network's.
LAYER, NETWORK = "layer", "network"


@dataclass(frozen=True)
class MappedLayer:
    """The best mapping of one layer on one architecture and on-chip size (a row of the result file's
    ``mappings`` table)."""

    workload: str
    layer: str  # the node
    architecture: str  # its label
    onchip_memory: int  # as swept: 0 is the architecture's capacity
    implementation: str
    mapping: str  # the best mapping in the notation; "" when the node is not counted
    pes: int
    scheduler: str
    makespan_cycles: int
    energy_pj: float
    seconds: float  # the search's time
    uncounted: str  # why the node is left out of the network's cost ("" when it is counted)

    @property
    def assignment(self) -> str:
        """The unit of work that found it (:func:`layer_assignment`), as stored failures name it."""
        return str(layer_assignment(self.layer))


def layer_assignment(node: str) -> Assignment:
    """The unit of work of the mapping strategy that searches ``node``."""
    return Assignment(((node, MAPPING),))


@dataclass(frozen=True)
class MappingSearch:
    """What the mapping strategy evaluates per layer, wherever the executor runs it: the layers (by node,
    each with its one-node model), the architectures, on-chip sizes and search options. Picklable."""

    workload: str
    layers: dict  # node -> dcaccel.mapping.layers.Layer
    archs: tuple[Architecture, ...]
    onchip_memory: tuple[int, ...]
    options: object  # dcaccel.mapping.search.LayerOptions
    compose: bool = False  # nothing is harvested for the workers (the executors' protocol)
    harvested: None = None

    def points(self, workload, assignment: Assignment) -> list[MappedLayer]:
        """The best mapping of the layer ``assignment`` names on every architecture and on-chip size."""
        from dcaccel.mapping.search import onchip_capacity, search_layer

        ((node, _),) = assignment.choices
        layer = self.layers[node]
        found = []
        for arch in self.archs:
            for memory in self.onchip_memory:
                capacity = onchip_capacity(arch, memory or None)
                try:
                    row, mapping = search_layer(layer, arch, capacity, self.options)
                except DcaccelError as error:
                    if layer.mapped:
                        raise
                    found.append(
                        MappedLayer(self.workload, node, arch.label, memory, "", "", 0, "", 0, 0.0, 0.0, _first(error))
                    )
                    continue
                found.append(
                    MappedLayer(
                        self.workload,
                        node,
                        arch.label,
                        memory,
                        mapping.implementation,
                        row.mapping,
                        mapping.pes,
                        mapping.scheduler,
                        row.makespan_cycles,
                        row.energy_pj,
                        row.seconds,
                        "",
                    )
                )
        return found

    def complete(self, stored: Sequence[MappedLayer]) -> list[MappedLayer] | None:
        """The rows of every architecture and on-chip size among ``stored`` (one layer's), in the order
        :meth:`points` gives them; None when one is missing."""
        by_key = {(row.architecture, row.onchip_memory): row for row in stored}
        wanted = [(arch.label, memory) for arch in self.archs for memory in self.onchip_memory]
        if not all(key in by_key for key in wanted):
            return None
        return [by_key[key] for key in wanted]

    def stored(self, store, workload: str) -> dict[str, list[MappedLayer]]:
        """The rows ``store`` (a :class:`~dcaccel.exploration.store.ResultStore`) holds for ``workload``."""
        return store.mapped(workload)

    def settings(self, workload) -> dict[str, object]:
        """What a result file must share to be resumed by this search: its options, the description behind
        each architecture label, the workload's fingerprint."""
        from dcaccel.exploration.load import fingerprint

        options = {
            key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self.options).items()
        }
        return {
            "mapping search": options,
            **{f"architecture {arch.label}": arch.to_dict() for arch in self.archs},
            **fingerprint(workload),
        }


def _first(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def searched_layers(workload) -> tuple[list, dict]:
    """The layers of ``workload`` in graph order, and the ones searched (by node): the first of each
    signature. Refuses a model with no layer the search maps."""
    from dcaccel.mapping.layers import model_layers, program_model

    name, model = program_model(workload)
    layers = model_layers(model)
    if not any(layer.mapped for layer in layers):
        raise DcaccelError(f"map {name}: no Conv, Gemm or 2-D MatMul node to map")
    first: dict[tuple, object] = {}
    for layer in layers:
        first.setdefault(layer.signature, layer)
    return layers, {layer.node: layer for layer in first.values()}


def mapping_frame(
    workload: str, layers: list, found: dict, archs: Sequence[Architecture], onchip_memory: Sequence[int]
) -> pd.DataFrame:
    """The rows of the mapping strategy (see the module docstring) from ``found``, the rows of each searched
    layer (by node): a layer sharing another's signature reuses its mapping, renamed, in no time."""
    from dcaccel.mapping.notation import parse

    by_key = {(row.layer, row.architecture, row.onchip_memory): row for rows in found.values() for row in rows}
    searched = {layer.signature: layer.node for layer in layers if layer.node in found}
    rows = []
    for arch in archs:
        for memory in onchip_memory:
            common = {"workload": workload, "architecture": arch.label, "onchip_memory": memory}
            counted = []
            for layer in layers:
                first = searched.get(layer.signature)
                if first is None:
                    continue
                row = by_key[(first, arch.label, memory)]
                if row.uncounted:
                    continue
                if first != layer.node:
                    text = str(replace(parse(row.mapping), node=layer.node))
                    row = replace(row, layer=layer.node, mapping=text, seconds=0.0)
                counted.append(row)
                rows.append(
                    _row(
                        common,
                        arch,
                        row.mapping,
                        LAYER,
                        row.pes,
                        row.scheduler,
                        row.makespan_cycles,
                        row.energy_pj,
                        row.seconds,
                    )
                )
            rows.append(
                _row(
                    common,
                    arch,
                    ",".join(f"{row.layer}={row.implementation}" for row in counted),
                    NETWORK,
                    max(row.pes for row in counted),
                    "+".join(sorted({row.scheduler for row in counted})),
                    sum(row.makespan_cycles for row in counted),
                    sum((row.energy_pj for row in counted), 0.0),
                    sum(row.seconds for row in counted),
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
