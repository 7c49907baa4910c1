"""The mapping search of a whole model: per layer, the off-chip stage then the on-chip stage.

``map_workload(workload, arch, objective=...)`` (``dcaccel.map``) takes every Conv, Gemm and 2-D MatMul
node of the model (:mod:`dcaccel.mapping.layers`), builds its bounded :class:`MappingSpace`, and

- ``search="decoupled"``: ranks the off-chip subspace by traffic (:mod:`dcaccel.mapping.offchip`, no
  scheduling), keeps the ``top_k`` groups of choices (a group varies only the task tile, i.e. the
  task granularity, which the on-chip stage picks; one choice per realised program and re-fetch
  count), and runs one round of coordinate search over (kept choice, placement): every placement
  (fusion × PEs × scheduler, :mod:`dcaccel.mapping.onchip`) of the least-traffic choice, every kept
  choice with the best placement, every placement of the best choice, ranking by the objective;
- ``search="exhaustive"``: schedules every mapping of the space that fits on chip.

Each candidate is realised (:mod:`dcaccel.mapping.realise`), extracted and scheduled; a layer is
lowered once per implementation. Layers with the same op, attributes and shapes (a signature) are
searched once and share the result (renamed to their own node). Every other node keeps its canonical
implementation and gets its best placement (:func:`place_canonical`). The whole model's cost is the
sum over its nodes, run one after the other; a node whose one-node model does not lower alone is
named in ``MappingResult.uncounted`` instead.
"""

from __future__ import annotations

import itertools
import time
import warnings
from dataclasses import asdict, dataclass, field, replace

import pandas as pd
from tqdm import tqdm

from dcaccel.architecture import Architecture, design_pes
from dcaccel.architecture import load as load_architecture
from dcaccel.dag.metrics import io_volume
from dcaccel.errors import DcaccelError
from dcaccel.mapping.layers import Layer, model_layers, program_model
from dcaccel.mapping.notation import SCHEDULERS, Mapping
from dcaccel.mapping.offchip import rank
from dcaccel.mapping.onchip import Cost, check_objective, cost
from dcaccel.mapping.realise import TASK_DIMENSION, realised_dag
from dcaccel.mapping.space import IMPLEMENTATIONS, MappingSpace, onchip_choices
from dcaccel.records import attributes

SEARCHES = ("decoupled", "exhaustive")


@dataclass
class LayerResult:
    """The search of one layer: one row of :meth:`MappingResult.table`."""

    layer: str
    op_type: str
    space_size: int
    space_formula: str
    fitting: int  # off-chip choices within the on-chip capacity
    offchip_evaluated: int  # off-chip choices whose traffic the off-chip stage computed
    evaluations: int  # mappings scheduled
    seconds: float
    makespan_cycles: int
    energy_pj: float
    objective: float
    mapping: str
    shared_with: str = ""  # the layer of the same signature that was searched instead


@dataclass
class MappingResult:
    """The best mapping of every mapped layer of a model, and what the search cost."""

    workload: str
    architecture: str
    objective_name: str
    search: str
    layers: list[LayerResult]
    best: dict[str, Mapping]
    seconds: float
    total: Cost = field(default_factory=lambda: Cost(0, 0.0))
    #: Nodes left out of ``total`` (their one-node model does not lower alone), with the reason.
    uncounted: dict[str, str] = field(default_factory=dict)

    @property
    def space_size(self) -> int:
        """Σ over the searched layers of their space's size."""
        return sum(row.space_size for row in self.layers if not row.shared_with)

    @property
    def evaluations(self) -> int:
        """Mappings scheduled, over all layers."""
        return sum(row.evaluations for row in self.layers)

    @property
    def objective(self) -> float:
        """The objective of the whole model: every node (``uncounted`` ones excepted) one after the other,
        the matrix products with their best mapping, the others canonical with their best placement."""
        return self.total.value(self.objective_name)

    def table(self) -> pd.DataFrame:
        """One row per mapped layer, the fields of :class:`LayerResult`."""
        return pd.DataFrame([asdict(row) for row in self.layers])

    def to_json(self) -> dict:
        """One JSON object: totals, the best mapping per layer (notation) and the per-layer rows."""
        shown = "workload architecture search objective_name objective space_size evaluations seconds uncounted"
        return (
            attributes(self, shown.split())
            | asdict(self.total)
            | {
                "best": {node: str(mapping) for node, mapping in self.best.items()},
                "layers": [asdict(row) for row in self.layers],
            }
        )


class LayerSearch:
    """The search of one layer: its one-node workload lowered once per implementation, realised DAGs
    and their buffer I/O cached per (implementation, task tile, fusion)."""

    def __init__(self, layer: Layer, arch: Architecture, capacity: int):
        from dcaccel.frontend import load
        from dcaccel.frontend.ops import library_nodes

        self.layer, self.arch, self.capacity = layer, arch, capacity
        self.workload = load(layer.model, name="layer")
        self.node = library_nodes(self.workload.sdfg)[0][0].label
        self._lowered: dict[str, object] = {}
        self._dags: dict[tuple, object] = {}

    def lowered(self, implementation: str):
        if implementation not in self._lowered:
            self._lowered[implementation] = self.workload.lower({self.node: implementation})
        return self._lowered[implementation]

    def dag(self, implementation: str, task_tile: int, fuse: bool):
        key = (implementation, task_tile, fuse)
        if key not in self._dags:
            dimension = TASK_DIMENSION[implementation]
            mapping = Mapping(self.node, implementation, ((dimension, task_tile),), fuse=fuse)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._dags[key] = realised_dag(self.lowered(implementation), mapping)
        return self._dags[key]

    def buffer_io(self, implementation: str, task_tile: int) -> int:
        return int(io_volume(self.dag(implementation, task_tile, False)))

    def cost(self, mapping: Mapping, refetch: int) -> Cost:
        task_tile = mapping.tile(TASK_DIMENSION[mapping.implementation])
        dag = self.dag(mapping.implementation, task_tile, mapping.fuse)
        return cost(dag, mapping, self.arch, refetch, self.capacity)

    def run(self, space: MappingSpace, objective: str, search: str, top_k: int) -> tuple[LayerResult, Mapping]:
        start = time.perf_counter()
        stage = rank(space, self.capacity, self.buffer_io)
        if not stage.ranked:
            raise DcaccelError(
                f"map {self.layer.node}: no tiling of its space fits the {self.capacity} elements on chip"
            )
        candidates = stage.top(top_k) if search == "decoupled" else stage.members
        placements = list(space.onchip())
        scores: dict[tuple[int, int], tuple[float, Mapping, Cost]] = {}

        def score(candidate: int, placement: int) -> float:
            if (candidate, placement) not in scores:
                ranked = candidates[candidate]
                mapping = space.mapping(ranked.choice, placements[placement])
                value = self.cost(mapping, ranked.refetch)
                scores[candidate, placement] = (value.value(objective), mapping, value)
            return scores[candidate, placement][0]

        if search == "exhaustive":
            for candidate, placement in itertools.product(range(len(candidates)), range(len(placements))):
                score(candidate, placement)
        else:
            placement = min(range(len(placements)), key=lambda j: score(0, j))
            candidate = min(range(len(candidates)), key=lambda i: score(i, placement))
            for j in range(len(placements)):
                score(candidate, j)
        evaluations = len(scores)
        best = scores[min(scores, key=lambda pair: (scores[pair][0], pair))]
        score, mapping, value = best
        row = LayerResult(
            self.layer.node,
            self.layer.op_type,
            space.size,
            space.formula,
            stage.fitting,
            stage.evaluated,
            evaluations,
            time.perf_counter() - start,
            value.makespan_cycles,
            value.energy_pj,
            score,
            str(mapping),
        )
        return row, mapping


def place_canonical(layer: Layer, arch: Architecture, capacity: int, pes: tuple[int, ...], objective: str):
    """The best placement of a node the search does not map (no loop nest): lowered with its canonical
    implementation, scheduled with every fusion × PE count × scheduler; returns its row and mapping."""
    from dcaccel.dag.extract import extract
    from dcaccel.frontend import load

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = load(layer.model, name="layer").lower()
        dags = {fuse: extract(lowered, fusion=fuse) for fuse in (False, True)}
    placements = list(onchip_choices(tuple(dags), pes))
    scored = []
    for on in placements:
        mapping = Mapping(layer.node, "canonical", (), "-", on.fuse, on.pes, on.scheduler)
        value = cost(dags[on.fuse], mapping, arch, 0, capacity)
        scored.append((value.value(objective), mapping, value))
    score, mapping, value = min(scored, key=lambda item: item[0])
    dimensions = {"fuse": len(dags), "pes": len(pes), "scheduler": len(SCHEDULERS)}
    formula = "·".join(f"|{name}|" for name in dimensions) + " = " + "·".join(map(str, dimensions.values()))
    row = LayerResult(
        layer.node,
        layer.op_type,
        len(placements),
        formula,
        1,
        0,
        len(placements),
        time.perf_counter() - start,
        value.makespan_cycles,
        value.energy_pj,
        score,
        str(mapping),
    )
    return row, mapping


def onchip_capacity(architecture: Architecture, capacity: int | None) -> int:
    """The on-chip elements a search places buffers in: ``capacity``, else the architecture's; refused when
    there are none."""
    capacity = architecture.onchip_capacity_elements if capacity is None else capacity
    if capacity < 1:
        raise DcaccelError(f"map: architecture {architecture.name} has no on-chip capacity; give capacity= (elements)")
    return capacity


@dataclass(frozen=True)
class LayerOptions:
    """How one layer is searched (:func:`search_layer`; the keywords of :func:`map_workload`)."""

    pes: tuple[int, ...]
    objective: str
    search: str = "decoupled"
    top_k: int = 4
    implementations: tuple[str, ...] = IMPLEMENTATIONS
    tile_limit: int | None = 4


def search_layer(layer: Layer, architecture: Architecture, capacity: int, options: LayerOptions):
    """The best mapping of ``layer`` on ``architecture`` with ``capacity`` on-chip elements, and its row: the
    search of its mapping space for a matrix product, the best placement of its canonical lowering for any
    other node (a :class:`DcaccelError` when that node does not lower alone)."""
    if not layer.mapped:
        return place_canonical(layer, architecture, capacity, options.pes, options.objective)
    run = LayerSearch(layer, architecture, capacity)
    space = MappingSpace.of(
        layer.node, layer.nest, implementations=options.implementations, pes=options.pes, tile_limit=options.tile_limit
    )
    return run.run(space, options.objective, options.search, options.top_k)


def map_workload(
    workload,
    arch: Architecture | str = "abstract",
    objective: str = "makespan",
    *,
    search: str = "decoupled",
    top_k: int = 4,
    pes: tuple[int, ...] | None = None,
    implementations: tuple[str, ...] = IMPLEMENTATIONS,
    tile_limit: int | None = 4,
    capacity: int | None = None,
    progress: bool | None = None,
) -> MappingResult:
    """Search the best mapping of every Conv, Gemm and 2-D MatMul node of ``workload`` on ``arch``.

    ``objective``: ``makespan`` (cycles), ``energy`` (pJ) or ``edp``; ``search``: ``decoupled`` (off-chip
    stage, then the ``top_k`` choices on chip) or ``exhaustive`` (the whole bounded space); ``pes``: the
    PE counts of the on-chip placement (None: the design's units when it fixes every unit count, else 1 to
    128: :func:`~dcaccel.architecture.design_pes`, the default of ``dcaccel map`` and of a study's mapping
    strategy); ``tile_limit``: divisors kept per loop dimension (None: all); ``capacity``: on-chip
    elements (default: the architecture's; needed for ``abstract``); ``progress``: show a progress
    bar over the nodes (None: when the search runs longer than a second).
    """
    check_objective(objective)
    if search not in SEARCHES:
        raise DcaccelError(f"unknown search '{search}' (expected one of {', '.join(SEARCHES)})")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise DcaccelError(f"top_k must be a positive integer, got {top_k!r}")
    start = time.perf_counter()
    architecture = load_architecture(arch)
    capacity = onchip_capacity(architecture, capacity)
    pes = design_pes([architecture]) if pes is None else pes
    name, model = program_model(workload)
    layers = model_layers(model)
    if not any(layer.mapped for layer in layers):
        raise DcaccelError(f"map {name}: no Conv, Gemm or 2-D MatMul node to map")
    rows, best, searched, uncounted = [], {}, {}, {}
    total = Cost(0, 0.0)
    bar = tqdm(layers, desc=f"map {name}", unit="node", disable=progress is False, delay=0 if progress else 1.0)
    for layer in bar:
        if layer.signature in searched:
            first, (row, mapping) = searched[layer.signature]
            mapping = replace(mapping, node=layer.node)
            rows.append(
                replace(
                    row,
                    layer=layer.node,
                    evaluations=0,
                    offchip_evaluated=0,
                    seconds=0.0,
                    mapping=str(mapping),
                    shared_with=first,
                )
            )
        else:
            options = LayerOptions(tuple(pes), objective, search, top_k, tuple(implementations), tile_limit)
            try:
                row, mapping = search_layer(layer, architecture, capacity, options)
            except DcaccelError as error:
                if layer.mapped:
                    raise
                uncounted[layer.node] = str(error).splitlines()[0]
                continue
            searched[layer.signature] = (layer.node, (row, mapping))
            rows.append(row)
        best[layer.node] = mapping
        total = total + Cost(rows[-1].makespan_cycles, rows[-1].energy_pj)
    seconds = time.perf_counter() - start
    return MappingResult(name, architecture.name, objective, search, rows, best, seconds, total, uncounted)
