"""The loop-nest cost of a whole model: every Conv, Gemm and 2-D MatMul layer's best mapping on an
architecture's operand-aware hierarchy (:mod:`dcaccel.cost.architecture`), layers one after another.

Layers of the same loop nest are searched once. The network's figures are the sums of its layers' (as
ZigZag sums them: no overlap between layers, every layer reads its inputs from and writes its outputs to
the off-chip memory); the other operators of the model are not in these figures (``uncounted`` names
them).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import onnx
import onnx.shape_inference
import pandas as pd

from dcaccel.architecture import Architecture
from dcaccel.architecture import load as load_architecture
from dcaccel.architecture.support import annotate
from dcaccel.cost.architecture import hierarchy
from dcaccel.cost.evaluate import LayerCost
from dcaccel.cost.hierarchy import Hierarchy
from dcaccel.cost.nest import LayerNest, layer_nest
from dcaccel.cost.search import best_mapping
from dcaccel.cost.wholenetwork import WholeNetwork, whole_network
from dcaccel.errors import DcaccelError
from dcaccel.frontend.load import resolve
from dcaccel.frontend.onnx_import import readable_node_names
from dcaccel.mapping.layers import MAPPED_OPS, node_attributes, program_model, static_shapes
from dcaccel.transforms.offload import lower_partitioned, op_instances


@dataclass(frozen=True)
class LayerRow:
    """One layer's best mapping, as a table row."""

    layer: str
    op: str
    macs: int
    cycles: int
    ideal_cycles: int
    utilisation: float
    stall_cycles: int
    energy_pj: float
    offchip_bytes: float
    mapping: str


@dataclass(frozen=True)
class NetworkCost:
    """Every MAC layer's :class:`LayerCost` on ``architecture`` under ``objective``."""

    workload: str
    architecture: str
    objective: str
    offchip: str
    costs: tuple[tuple[str, str, LayerCost], ...]  # (node, op, cost)
    uncounted: tuple[tuple[str, str], ...]  # (node, why it has no loop nest here)
    seconds: float
    whole: WholeNetwork | None = None  # every operator, kept activations, overlap (network_cost(whole=True))

    def rows(self) -> list[LayerRow]:
        return [
            LayerRow(
                node,
                op,
                cost.macs,
                cost.cycles,
                cost.ideal_cycles,
                round(cost.utilisation, 4),
                cost.stall_cycles,
                round(cost.energy_total_pj, 1),
                cost.bits(self.offchip) / 8,
                cost.mapping.text(),
            )
            for node, op, cost in self.costs
        ]

    @property
    def layers(self) -> pd.DataFrame:
        return pd.DataFrame([dataclasses.asdict(row) for row in self.rows()], columns=_COLUMNS)

    def total(self, column: str) -> float:
        return float(self.layers[column].sum())

    def to_json(self) -> dict:
        """Per layer: cycles, energy per memory, bits and energy per memory and operand, off-chip bytes,
        utilisation."""
        layers = []
        for row, (_, _, cost) in zip(self.rows(), self.costs, strict=True):
            traffic = {
                f"{memory}.{operand}": {
                    "read_bits": t.read_bits,
                    "write_bits": t.write_bits,
                    "energy_pj": cost.operand_energy_pj.get((memory, operand), 0.0),
                }
                for (memory, operand), t in sorted(cost.traffic.items())
            }
            layers.append({**dataclasses.asdict(row), "energy_by_memory_pj": dict(cost.energy_pj), "traffic": traffic})
        totals = {column: self.total(column) for column in ("macs", "cycles", "energy_pj", "offchip_bytes")}
        result = {
            "workload": self.workload,
            "architecture": self.architecture,
            "objective": self.objective,
            "layers": layers,
            "totals": totals,
            "uncounted": dict(self.uncounted),
            "seconds": round(self.seconds, 3),
        }
        if self.whole is not None:
            result["whole_network"] = {
                "totals": self.whole.totals(),
                "activation_buffer": self.whole.buffer,
                "operators": [dataclasses.asdict(row) for row in self.whole.rows],
            }
        return result


_COLUMNS = [field.name for field in dataclasses.fields(LayerRow)]


def _nest(node: onnx.NodeProto, shapes) -> LayerNest | str:
    """The loop nest of ``node``, or why it has none."""
    if node.op_type not in MAPPED_OPS:
        return f"{node.op_type} is not a multiply-accumulate layer"
    try:
        return layer_nest(node, shapes, node_attributes(node))
    except DcaccelError as error:
        return str(error)


def network_cost(
    workload,
    arch: Architecture | str,
    objective: str = "makespan",
    *,
    progress: Callable[[int, int], None] | None = None,
    whole: bool = False,
) -> NetworkCost:
    """The best mapping of every MAC layer of ``workload`` (a built-in workload's name, a model file, a
    Workload or an ONNX proto) on ``arch`` by ``objective``, each on the accelerator unit kind its support
    rules place it on (:func:`dcaccel.architecture.support.annotate`); a layer placed on the host, or on no
    unit, is listed in ``uncounted`` with the reason. ``progress(done, total)`` is called after each node.
    ``whole``: also the whole network, every operator included (:mod:`dcaccel.cost.wholenetwork`)."""
    start = time.perf_counter()
    arch = arch if isinstance(arch, Architecture) else load_architecture(arch)
    program = resolve(workload)
    name, model = program_model(program)
    inferred = readable_node_names(onnx.shape_inference.infer_shapes(model))
    placement = annotate(arch.units, op_instances(program))
    shapes = static_shapes(inferred)
    nodes = [node for node in inferred.graph.node if node.op_type != "Constant"]
    hierarchies: dict[str, Hierarchy] = {}
    searched: dict[tuple, LayerCost] = {}
    costs, uncounted = [], []
    nests: dict[str, LayerNest] = {}
    for index, node in enumerate(nodes):
        nest = _nest(node, shapes)
        where = placement.get(node.name)
        if isinstance(nest, str):
            uncounted.append((node.name, nest))
        elif where is None or where.target is None or not where.offloaded:
            uncounted.append((node.name, f"not on the accelerator ({where.reason if where else 'not in the program'})"))
        else:
            if where.target not in hierarchies:
                hierarchies[where.target] = hierarchy(arch, where.target)
            key = (where.target, tuple(nest.loops.items()), tuple(sorted(nest.accesses.items())))
            if key not in searched:
                searched[key] = best_mapping(nest, hierarchies[where.target], objective)
            costs.append((node.name, node.op_type, dataclasses.replace(searched[key], layer=node.name)))
            nests[node.name] = nest
        if progress is not None:
            progress(index + 1, len(nodes))
    result = NetworkCost(name, arch.name, objective, arch.offchip, tuple(costs), tuple(uncounted), 0.0)
    if whole:
        on_host = {node for node, where in placement.items() if where.target is not None and not where.offloaded}
        lowered = lower_partitioned(program, placement, on_host, {})
        result = dataclasses.replace(
            result, whole=whole_network(result, arch, inferred, shapes, placement, lowered, nests, hierarchies)
        )
    return dataclasses.replace(result, seconds=time.perf_counter() - start)
