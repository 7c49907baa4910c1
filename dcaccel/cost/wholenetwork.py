"""The whole network on an architecture: every operator, activations kept on chip between layers, and the
overlap of operators on different units; reported beside the per-layer sums of :mod:`dcaccel.cost.network`.

- **Arithmetic.** Every operator costs its arithmetic, read from the program as lowered for the design
  (:func:`dcaccel.transforms.offload.lower_partitioned`: the canonical implementation on the accelerator,
  DaCe's opaque task on the host) and counted by :func:`dcaccel.dag.arithmetic.task_arithmetic` (MACs
  plus other operations, one slot of a unit's MAC rate and one MAC's energy each).
- **Where.** An operator runs on the unit kind its support rules choose (:mod:`dcaccel.architecture.support`).
  A Conv/Gemm/MatMul layer on the accelerator is costed by its best loop-nest mapping; every other
  operator, and a layer on the host, takes ⌈operations / (units × MAC rate)⌉ cycles, or the time its
  off-chip traffic needs at the off-chip bandwidth when longer.
- **Inter-layer reuse.** Activations live in the *activation buffer*, the largest on-chip memory that holds
  both inputs and outputs. A tensor produced on the accelerator and consumed only there (not a model
  output) stays in it when it fits beside the tensors already kept while it lives; a layer's mapping is
  searched again with the buffer less the bytes kept across it (its tiles and the kept tensors share the
  buffer). A kept tensor is never written off chip: its producer's final write and its consumers' off-chip
  reads of it become accesses of the buffer. So the whole network's off-chip traffic is at most the sum
  of the per-layer figures. An operator's other inputs and outputs cross off chip once each; views
  (operators with no arithmetic whose output has the size of their input: Reshape, Flatten) alias their
  input and move nothing, as does an operator the program does not have (folded at import: a
  BatchNormalization into the Conv before it).
- **Overlap.** Operators are list-scheduled in program order, each on its unit kind when its producers have
  finished and the kind is free: the makespan counts work on different kinds (host and accelerator) in
  parallel. A layer's cycles are its loop-nest cycles with its off-chip transfers (kept tensors make them
  an upper bound).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections import defaultdict
from dataclasses import dataclass

import onnx
import pandas as pd

from dcaccel.architecture import Architecture, MemoryLevel
from dcaccel.cost.evaluate import LayerCost
from dcaccel.cost.hierarchy import Hierarchy
from dcaccel.cost.nest import LayerNest
from dcaccel.cost.search import best_mapping
from dcaccel.dag.arithmetic import task_arithmetic
from dcaccel.errors import DcaccelError

#: Operand names in descriptions that an activation buffer must hold.
_ACTIVATIONS = {"inputs", "outputs"}


@dataclass(frozen=True)
class OperatorRow:
    """One operator of the whole network."""

    node: str
    op: str
    unit: str
    macs: int
    operations: int
    cycles: int
    start: int
    energy_pj: float
    offchip_bytes: float
    buffer_bytes: float  # bytes read from and written to the activation buffer for kept tensors
    output_kept: bool


@dataclass(frozen=True)
class WholeNetwork:
    """Every operator's row, the makespan with overlap, and the activation buffer used for reuse."""

    rows: tuple[OperatorRow, ...]
    buffer: str | None
    buffer_bytes: int

    @property
    def table(self) -> pd.DataFrame:
        return pd.DataFrame([dataclasses.asdict(row) for row in self.rows], columns=_COLUMNS)

    @property
    def makespan(self) -> int:
        return max((row.start + row.cycles for row in self.rows), default=0)

    def totals(self) -> dict[str, float]:
        return {
            "cycles": self.makespan,
            "serial_cycles": sum(row.cycles for row in self.rows),
            "energy_pj": sum(row.energy_pj for row in self.rows),
            "offchip_bytes": sum(row.offchip_bytes for row in self.rows),
            "macs": sum(row.macs for row in self.rows),
            "operations": sum(row.operations for row in self.rows),
        }


_COLUMNS = [field.name for field in dataclasses.fields(OperatorRow)]


def activation_buffer(arch: Architecture) -> tuple[str | None, int]:
    """The largest on-chip memory holding both inputs and outputs, and its bytes ((None, 0): none)."""
    candidates = [
        (memory.capacity_bytes, name)
        for name, memory in arch.spec.memories.items()
        if memory.level == MemoryLevel.ONCHIP
        and memory.capacity_bytes is not None
        and _ACTIVATIONS <= set(memory.operands or _ACTIVATIONS)
    ]
    if not candidates:
        return None, 0
    capacity, name = max(candidates)
    return name, capacity


def node_arithmetic(lowered) -> dict[str, tuple[int, int]]:
    """Per operator (the ``node`` of its tasks' records): (MACs, operations) of the lowered program."""
    from dcaccel.dag.extract import extract

    dag = extract(lowered)
    first_in: dict[int, int] = {}
    for _, dst, volume in dag.edges:
        first_in.setdefault(dst, int(volume))
    figures: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for v in dag.tasks:
        info = dag.info(v)
        macs, operations = task_arithmetic(info, first_in.get(v, 0))
        figures[info.node][0] += macs
        figures[info.node][1] += operations
    return {node: (macs, operations) for node, (macs, operations) in figures.items()}


def _shrunk(target: Hierarchy, buffer: str, kept_bytes: int) -> Hierarchy:
    """``target`` with ``kept_bytes`` of memory ``buffer`` taken by kept tensors."""
    memories = tuple(
        dataclasses.replace(memory, size_bits=memory.size_bits - 8 * kept_bytes) if memory.name == buffer else memory
        for memory in target.memories
    )
    return dataclasses.replace(target, memories=memories)


class _Walk:
    """The state of the walk over the operators in program order (the module's rules)."""

    def __init__(self, arch: Architecture, model: onnx.ModelProto, shapes, placement, arithmetic, objective):
        self.arch, self.placement, self.arithmetic, self.objective = arch, placement, arithmetic, objective
        self.spec = arch.spec
        self.buffer, self.capacity = activation_buffer(arch)
        self.element_bytes = self.spec.element_bytes
        initializers = {tensor.name for tensor in model.graph.initializer}
        self.nodes = [node for node in model.graph.node if node.op_type != "Constant"]
        self.producer = {output: node.name for node in self.nodes for output in node.output}
        self.outputs_of = {node.name: list(node.output) for node in self.nodes}
        self.data = {node.name: [t for t in node.input if t and t not in initializers] for node in self.nodes}
        self.consumers: dict[str, list[str]] = defaultdict(list)
        for node in self.nodes:
            for tensor in self.data[node.name]:
                self.consumers[tensor].append(node.name)
        self.outputs = {output.name for output in model.graph.output}
        self.size = {name: math.prod(shape) * self.element_bytes for name, shape in shapes.items()}
        self.kept: dict[str, int] = {}  # tensor -> bytes in the activation buffer
        self.alias: dict[str, str] = {}  # a view's output -> the tensor it aliases
        self.remaining = {tensor: len(names) for tensor, names in self.consumers.items()}
        self.searched: dict[tuple, LayerCost] = {}

    def unit_of(self, name: str) -> tuple[str, bool]:
        where = self.placement.get(name)
        if where is None or where.target is None:
            raise DcaccelError(f"node {name}: no unit of {self.spec.name} runs it ({where.reason if where else '?'})")
        return where.target, where.offloaded

    def keepable(self, node: onnx.NodeProto) -> bool:
        """Whether ``node``'s output may stay on chip: produced on the accelerator, consumed only there."""
        if self.buffer is None or len(node.output) != 1 or node.output[0] in self.outputs:
            return False
        consumers = self.users(node.output[0])
        return bool(consumers) and all(self.unit_of(name)[1] for name in consumers)

    def users(self, tensor: str) -> list[str]:
        """The operators that read ``tensor``, through the nodes folded away at import."""
        found = []
        for name in self.consumers.get(tensor, []):
            if name in self.placement:
                found.append(name)
            else:
                found.extend(user for output in self.outputs_of[name] for user in self.users(output))
        return found

    def root(self, tensor: str) -> str:
        while tensor in self.alias:
            tensor = self.alias[tensor]
        return tensor

    def release(self, node: onnx.NodeProto) -> None:
        for tensor in self.data[node.name]:
            self.remaining[tensor] -= 1
            root = self.root(tensor)
            names = [root, *[view for view in self.alias if self.root(view) == root]]
            alive = any(self.remaining.get(name, 0) > 0 for name in names)
            if not alive:
                self.kept.pop(root, None)


def whole_network(
    network,
    arch: Architecture,
    model: onnx.ModelProto,
    shapes,
    placement,
    lowered,
    nests: dict[str, LayerNest],
    hierarchies: dict[str, Hierarchy],
) -> WholeNetwork:
    """The whole network of ``model`` (the module's rules): ``network`` is its :class:`NetworkCost` (the
    per-layer mappings), ``placement`` the support rules' annotations, ``lowered`` the program lowered for
    the design, ``nests`` the loop nests of its layers on the accelerator, ``hierarchies`` by unit kind."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arithmetic = node_arithmetic(lowered)
    walk = _Walk(arch, model, shapes, placement, arithmetic, network.objective)
    per_layer = {node: cost for node, _, cost in network.costs}
    offchip = arch.spec.memories[arch.offchip]
    buffer = arch.spec.memories[walk.buffer] if walk.buffer else None
    free: dict[str, int] = defaultdict(int)
    finish: dict[str, int] = {}
    rows = []
    for node in walk.nodes:
        if node.name not in placement and walk.data[node.name]:
            # folded away at import (a BatchNormalization into the Conv before it): its output is its input's
            walk.alias[node.output[0]] = walk.data[node.name][0]
            walk.release(node)
            continue
        unit, offloaded = walk.unit_of(node.name)
        macs, operations = arithmetic.get(node.name, (0, 0))
        inputs = walk.data[node.name]
        resident = [t for t in inputs if walk.root(t) in walk.kept]
        view = operations == 0 and len(inputs) == 1 and walk.size.get(node.output[0]) == walk.size.get(inputs[0])
        if view:
            walk.alias[node.output[0]] = inputs[0]
            energy, off_bytes, buffer_bytes, cycles, kept = 0.0, 0.0, 0.0, 0, walk.root(inputs[0]) in walk.kept
        else:
            keep = walk.keepable(node)
            out_bytes = walk.size.get(node.output[0], 0)
            live = sum(walk.kept.values())
            if keep and live + out_bytes > walk.capacity:
                keep = False
            if node.name in per_layer:
                layer = (per_layer[node.name], nests[node.name], hierarchies[unit])
                cost = _layer_cost(walk, *layer, live + keep * out_bytes)
                if cost is None and keep:
                    keep = False
                    cost = _layer_cost(walk, *layer, live)
                if cost is None:
                    cost = per_layer[node.name]
                    _spill(walk, rows)
                    resident = []
                energy, off_bytes, buffer_bytes, cycles = _layer_figures(
                    cost, arch.offchip, offchip, buffer, resident, keep, walk, node
                )
            else:
                if resident and not offloaded:  # the host reads from off-chip memory only
                    _spill(walk, rows)
                    resident = []
                energy, off_bytes, buffer_bytes, cycles = _operator_figures(
                    arch, unit, operations, inputs, resident, keep, out_bytes, walk, offchip, buffer
                )
            kept = keep
            if keep:
                walk.kept[node.output[0]] = out_bytes
        ready = max((finish.get(p, 0) for p in _producers(walk, inputs)), default=0)
        start = max(ready, free[unit])
        free[unit] = finish[node.name] = start + cycles
        rows.append(
            OperatorRow(
                node.name,
                node.op_type,
                unit,
                macs,
                operations,
                cycles,
                start,
                energy,
                off_bytes,
                buffer_bytes,
                kept,
            )
        )
        walk.release(node)
    return WholeNetwork(tuple(rows), walk.buffer, walk.capacity)


def _producers(walk: _Walk, inputs: list[str]) -> list[str]:
    return [walk.producer[t] for t in inputs if t in walk.producer]


def _layer_cost(walk: _Walk, alone: LayerCost, nest: LayerNest, target: Hierarchy, kept_bytes: int) -> LayerCost | None:
    """The best mapping of a layer with ``kept_bytes`` of the activation buffer taken (None: none fits);
    ``alone``: its mapping with the whole buffer (the per-layer figure)."""
    if not kept_bytes:
        return alone
    if walk.buffer not in {memory.name for memory in target.memories}:
        return None
    key = (
        tuple(target.array.items()),
        target.memories,
        tuple(nest.loops.items()),
        tuple(sorted(nest.accesses.items())),
        kept_bytes,
    )
    if key not in walk.searched:
        try:
            walk.searched[key] = best_mapping(nest, _shrunk(target, walk.buffer, kept_bytes), walk.objective)
        except DcaccelError:
            walk.searched[key] = None
    cost = walk.searched[key]
    return None if cost is None else dataclasses.replace(cost, layer=alone.layer)


def _layer_figures(cost: LayerCost, offchip_name, offchip, buffer, resident, keep, walk: _Walk, node):
    """Energy, off-chip bytes, buffer bytes and cycles of a mapped layer, its kept input read from the
    buffer instead of off chip and its kept output not written off chip."""
    energy = cost.energy_total_pj
    off_bytes = cost.bits(offchip_name) / 8
    buffer_bytes = 0.0
    if resident:
        moved = cost.traffic.get((offchip_name, "I"))
        elements = moved.read_elements if moved else 0
        energy += elements * (buffer.read_energy_pj - offchip.read_energy_pj)
        off_bytes -= moved.read_bits / 8 if moved else 0
        buffer_bytes += moved.read_bits / 8 if moved else 0
    if keep:
        elements = walk.size[node.output[0]] / walk.element_bytes
        energy -= elements * offchip.write_energy_pj
        off_bytes -= elements * walk.element_bytes
    return energy, off_bytes, buffer_bytes, cost.cycles


def _operator_figures(arch, unit, operations, inputs, resident, keep, out_bytes, walk, offchip, buffer):
    """Energy, off-chip bytes, buffer bytes and cycles of an operator with no loop nest here."""
    spec = arch.spec.units[unit]
    rate = (arch.mac_rate(unit) or arch.throughput(unit)) * (spec.count or 1)
    in_offchip = sum(walk.size.get(t, 0) for t in inputs if t not in resident)
    in_buffer = sum(walk.size.get(t, 0) for t in inputs if t in resident)
    out_offchip = 0 if keep else out_bytes
    out_buffer = out_bytes if keep else 0
    per_byte = 1 / walk.element_bytes
    energy = operations * spec.energy_per_mac_pj
    energy += per_byte * (in_offchip * offchip.read_energy_pj + out_offchip * offchip.write_energy_pj)
    if buffer is not None:
        energy += per_byte * (in_buffer * buffer.read_energy_pj + out_buffer * buffer.write_energy_pj)
    off_bytes = in_offchip + out_offchip
    bandwidth = arch.offchip_bandwidth
    transfer = 0 if bandwidth is None else math.ceil(off_bytes / bandwidth)
    cycles = max(math.ceil(operations / rate), transfer)
    return energy, off_bytes, in_buffer + out_buffer, cycles


def _spill(walk: _Walk, rows: list[OperatorRow]) -> None:
    """No mapping of the next layer fits beside the kept tensors: every kept tensor is written off chip
    after all (its producer's row pays the write) and read from there."""
    offchip = walk.arch.spec.memories[walk.arch.offchip]
    for tensor, size in list(walk.kept.items()):
        for index, row in enumerate(rows):
            if row.output_kept and tensor in walk.outputs_of[row.node]:
                rows[index] = dataclasses.replace(
                    row,
                    offchip_bytes=row.offchip_bytes + size,
                    energy_pj=row.energy_pj + size / walk.element_bytes * offchip.write_energy_pj,
                    output_kept=False,
                )
    walk.kept.clear()
