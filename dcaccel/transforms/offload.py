"""Partitioning a workload between an accelerator and its host (TVM's annotate-target, merge-compiler-regions
and partition-graph passes, on dcaccel's canonical model).

:func:`partition` runs, in this order:

1. **Annotate.** Every operator of the imported graph gets the first accelerator unit kind whose support
   declarations run it (:func:`dcaccel.architecture.support.annotate`: support rules with constraints,
   composite patterns), else the architecture's host with the reason (unsupported op, the violated
   constraint).
2. **Regions.** Maximal connected sets of offloaded operators (operators joined by a tensor one produces
   and the other reads) are the accelerator regions.
3. **Policy.** ``greedy`` offloads every region; ``min-region`` keeps a region on the host when it has
   fewer than ``min_nodes`` operators or less than ``min_work_share`` of the work (reason "region too
   small"); ``cost`` keeps a region on the host when the schedule's estimate (the makespan on the
   architecture, in cycles, of the program lowered and placed that way) is lower with it there, region
   after region in program order (one more lowering and schedule per region).
4. **Lower.** Host operators keep DaCe's default expansions (each one opaque task, ``lower(...,
   host=...)``); offloaded operators use the canonical implementation chosen for them (the user's choice
   when the unit kind allows it, else the first implementation its support rule lists, else the default).
5. **Place.** The extracted TaskDAG gets ``meta["unit"]`` on every task (its operator's unit kind) and a
   transfer task (``meta["op"] = "Transfer"``, ``meta["transfer"]`` the direction) on every edge between
   a host node and an accelerator node: a buffer sits on the side of the task that writes it, program
   inputs and outputs live in the shared off-chip memory and cross nothing.
6. **Schedule.** The heterogeneous list scheduler (``heft``) runs the placed DAG on the architecture plus
   one unit kind per host↔accelerator link (count 1, throughput its bandwidth over the element size,
   energy per element as energy per MAC; ``meta["macs"]`` of a transfer is its volume), so transfers
   take their bandwidth's time, serialise on the link and cost its energy.

Under a design whose accelerator supports every operator (``abstract``) nothing is moved: the lowering,
the DAG and every number are those of the plain pipeline.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import dace
from dace.libraries.onnx.nodes.onnx_op import ONNXOp

from dcaccel.architecture import Architecture, Unit
from dcaccel.architecture import load as load_architecture
from dcaccel.architecture.support import Annotation, OpInstance, UnitRole, annotate
from dcaccel.errors import DcaccelError
from dcaccel.frontend.ops import library_nodes, op_type
from dcaccel.transforms.lower import LoweredWorkload, OpaqueOpWarning, lower

#: The partitioning policies.
POLICIES = ("greedy", "min-region", "cost")
#: The op of a transfer task.
TRANSFER = "Transfer"
#: Why a region kept on the host by ``min-region`` is there.
TOO_SMALL = "region too small"

_CONSTRAINED_ATTRIBUTES = ("kernel_shape", "strides", "group")


@dataclass(frozen=True)
class NodePlacement:
    """Where one operator runs: its unit kind ``target``, whether that is the accelerator, why, its
    accelerator region (None on the host), and its work (Σ T(v) of its tasks) and MACs."""

    name: str
    op: str
    target: str
    offloaded: bool
    reason: str
    region: int | None
    pattern: str | None
    implementation: str
    work: int
    macs: int


@dataclass(frozen=True)
class Region:
    """A maximal connected set of offloaded operators, in program order."""

    index: int
    nodes: tuple[str, ...]
    units: tuple[str, ...]
    work: int
    offloaded: bool
    reason: str


@dataclass
class Partition:
    """A partitioned workload: the placement of every operator, the regions, the lowered program, the
    placed TaskDAG and its heterogeneous schedule on the architecture (with the link units)."""

    workload: str
    architecture: str
    policy: str
    host: str | None
    nodes: list[NodePlacement]
    regions: list[Region]
    lowered: LoweredWorkload = field(repr=False)
    dag: Any = field(repr=False)  # the placed TaskDAG
    schedule: Any = field(repr=False)  # its Schedule, costs on ``costed``
    costed: Architecture = field(repr=False)  # the architecture plus one unit per host↔accelerator link
    links: dict[str, tuple[str, str]] = field(default_factory=dict)  # link unit -> (host, accelerator kind)

    @property
    def transfer_tasks(self) -> list[int]:
        return [v for v in self.dag.tasks if self.dag.node(v).meta.get("op") == TRANSFER]

    @property
    def transfer_volume(self) -> int:
        """Elements crossing the host↔accelerator links (Σ over transfer tasks of their volume)."""
        return sum(int(self.dag.node(v).meta["macs"]) for v in self.transfer_tasks)

    @property
    def offloaded_work_share(self) -> float:
        return _share([(n.offloaded, n.work) for n in self.nodes])

    @property
    def offloaded_mac_share(self) -> float:
        return _share([(n.offloaded, n.macs) for n in self.nodes])

    @property
    def makespan(self) -> int:
        """The end-to-end makespan on the architecture, in cycles of its clock."""
        return self.schedule.costs.makespan_cycles

    @property
    def energy_pj(self) -> float:
        return self.schedule.costs.energy_total_pj

    @property
    def energy_split_pj(self) -> dict[str, float]:
        """Energy of the host (its compute and its links to memories), the links between host and
        accelerator (the transfers), and the accelerator (everything else: its units, memories, links)."""
        split = {"host": 0.0, "accelerator": 0.0, "link": 0.0}
        for component, energy in self.schedule.costs.energy_pj.items():
            if component in self.links:
                split["link"] += energy
            elif self.host is not None and self.host in (component, *component.split("-")):
                split["host"] += energy
            else:
                split["accelerator"] += energy
        return split

    def summary(self) -> dict:
        """The partition as one JSON-ready object."""
        return {
            "workload": self.workload,
            "architecture": self.architecture,
            "policy": self.policy,
            "nodes": [asdict(node) for node in self.nodes],
            "regions": [asdict(region) for region in self.regions],
            "offloaded_regions": sum(region.offloaded for region in self.regions),
            "offloaded_work_share": self.offloaded_work_share,
            "offloaded_mac_share": self.offloaded_mac_share,
            "transfer_tasks": len(self.transfer_tasks),
            "transfer_volume": self.transfer_volume,
            "makespan": self.makespan,
            "makespan_us": self.schedule.costs.makespan_seconds * 1e6,
            "energy_pj": self.energy_pj,
            "energy_split_pj": self.energy_split_pj,
        }


def _share(pairs: list[tuple[bool, int]]) -> float:
    total = sum(value for _, value in pairs)
    return sum(value for offloaded, value in pairs if offloaded) / total if total else 0.0


# ---------------------------------------------------------------- the imported graph


def op_instances(workload) -> list[OpInstance]:
    """The operators of ``workload``'s SDFG as the support rules see them (program order): constraint
    attributes (a Conv's kernel shape from its weight when the attribute is absent), element types,
    the largest tensor in elements (sizes at the workload's symbols), and the operators they read from."""
    symbols = dict(getattr(workload, "symbols", {}) or {})
    pairs = library_nodes(workload.sdfg)
    producer = {}
    for node, state in pairs:
        for edge in state.out_edges(node):
            producer[edge.data.data] = node.label
    instances = []
    for node, state in pairs:
        edges = [*state.in_edges(node), *state.out_edges(node)]
        descs = [state.sdfg.arrays[e.data.data] for e in edges if e.data.data is not None]
        attributes = {}
        for name in _CONSTRAINED_ATTRIBUTES:
            value = getattr(node, name, None) if isinstance(node, ONNXOp) else None
            if value is not None and value != []:
                attributes[name] = value if isinstance(value, int) else tuple(int(v) for v in value)
        if op_type(node) == "Conv" and "kernel_shape" not in attributes:
            weights = [e for e in state.in_edges(node) if e.dst_conn == "W"]
            if weights:
                shape = state.sdfg.arrays[weights[0].data.data].shape
                attributes["kernel_shape"] = tuple(int(_size(d, symbols)) for d in shape[2:])
        instances.append(
            OpInstance(
                name=node.label,
                op=op_type(node),
                attributes=attributes,
                dtypes=tuple(sorted({desc.dtype.type.__name__ for desc in descs})),
                max_elements=max((_elements(desc.shape, symbols) for desc in descs), default=0),
                producers=tuple(
                    dict.fromkeys(producer[e.data.data] for e in state.in_edges(node) if e.data.data in producer)
                ),
            )
        )
    return instances


def _size(dimension, symbols: Mapping[str, int]) -> int:
    return int(dace.symbolic.evaluate(dimension, symbols)) if dace.symbolic.issymbolic(dimension) else int(dimension)


def _elements(shape, symbols: Mapping[str, int]) -> int:
    try:
        return math.prod(_size(d, symbols) for d in shape)
    except (TypeError, KeyError, ValueError):  # a size left symbolic: no element count to check
        return 0


def regions_of(instances: list[OpInstance], offloaded: set[str]) -> list[list[str]]:
    """Maximal connected sets of ``offloaded`` operators, each in program order, ordered by first node."""
    parent = {name: name for name in offloaded}

    def find(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for instance in instances:
        if instance.name in offloaded:
            for producer in instance.producers:
                if producer in offloaded:
                    parent[find(producer)] = find(instance.name)
    groups: dict[str, list[str]] = {}
    for instance in instances:
        if instance.name in offloaded:
            groups.setdefault(find(instance.name), []).append(instance.name)
    return list(groups.values())


# ---------------------------------------------------------------- placement of the DAG


def link_units(arch: Architecture, kinds: set[str]) -> tuple[Architecture, dict[str, tuple[str, str]]]:
    """``arch`` plus one unit kind per link between its host and an accelerator kind of ``kinds`` (see
    the module docstring), and the link units by name. Raises when a link is missing or unlimited."""
    host = host_of(arch)
    units = dict(arch.units)
    links = {}
    for kind in sorted(kinds):
        link = arch.link(host, kind)
        if link is None or link.bandwidth_bytes_per_cycle is None:
            missing = "no link" if link is None else "an unlimited link"
            raise DcaccelError(
                f"architecture {arch.name}: {missing} between host {host} and {kind}; "
                f"the partition's transfers need its bandwidth_bytes_per_cycle"
            )
        name = f"{host}_{kind}_link"
        while name in units or name in arch.memories:
            name += "_"
        units[name] = Unit(
            count=1,
            ops=[TRANSFER],
            elements_per_cycle=link.bandwidth_bytes_per_cycle / arch.element_bytes,
            energy_per_mac_pj=link.energy_per_element_pj,
        )
        links[name] = (host, kind)
    costed = arch if not links else Architecture.from_dict({**arch.to_dict(), "units": units}, arch.name)
    return costed, links


def host_of(arch: Architecture) -> str | None:
    """The architecture's host unit kind (``role: host``), or None."""
    return next((name for name, unit in arch.units.items() if unit.role == UnitRole.HOST), None)


def place(
    dag,
    target: Mapping[str, str],
    host: str | None,
    links: Mapping[tuple[str, str], str],
    macs: Mapping[str, int] | None = None,
):
    """A copy of ``dag`` with ``meta["unit"]`` on every task (its operator's unit kind in ``target``) and a
    transfer task on every edge between the host and an accelerator kind (``links``: (host, kind) -> link
    unit). A buffer sits on the side of the task that writes it first; pseudo nodes and program buffers
    (written by nothing) are on no side. A transfer moves what the producer wrote (from a buffer: at most
    what the buffer received) into a landing buffer the consumer reads as before; without re-reads it
    feeds the consumer directly. An opaque task on the host gets ``meta["macs"]`` from ``macs`` (operator ->
    the MACs of its canonical lowering) when given: its volumes alone would not count its arithmetic."""
    from dcaccel.dag.taskdag import NodeKind, TaskDAG

    side: dict[int, str] = {}
    for node in dag.nodes:
        if node.kind == NodeKind.TASK and node.meta.get("node") in target:
            side[node.id] = target[node.meta["node"]]
    for src, dst, _ in dag.edges:  # edges come in the order the walk produced them: producers first
        if dag.node(dst).kind == NodeKind.BUFFER and src in side and dst not in side:
            side[dst] = side[src]
    received: dict[int, int] = {}
    for _, dst, volume in dag.edges:
        received[dst] = received.get(dst, 0) + int(volume)
    placed = TaskDAG(dag.name)
    for node in dag.nodes:
        meta = dict(node.meta)
        if node.id in side:
            meta["unit"] = side[node.id]
            if meta.get("opaque") and side[node.id] == host and meta.get("node") in (macs or {}):
                meta["macs"] = macs[meta["node"]]
        placed.add_node(node.kind, node.label, **meta)
    for src, dst, volume in dag.edges:
        a, b = side.get(src), side.get(dst)
        crossing = a is not None and b is not None and a != b and host in (a, b)
        if not crossing:
            placed.add_edge(src, dst, volume)
            continue
        kind = b if a == host else a
        direction = "to-accelerator" if a == host else "to-host"
        moved = min(int(volume), received[src]) if dag.node(src).kind == NodeKind.BUFFER else int(volume)
        transfer = placed.add_node(
            NodeKind.TASK,
            f"{TRANSFER}({dag.label(src)}->{dag.label(dst)})",
            op=TRANSFER,
            transfer=direction,
            unit=links[host, kind],
            macs=moved,
        )
        placed.add_edge(src, transfer, moved)
        if moved == volume:
            placed.add_edge(transfer, dst, volume)
            continue
        landing = placed.add_node(NodeKind.BUFFER, f"{dag.label(src)}@{b}", transfer=direction, unit=b)
        placed.add_edge(transfer, landing, moved)
        placed.add_edge(landing, dst, volume)
    placed.validate()
    return placed


# ---------------------------------------------------------------- the partition


def partition(
    workload,
    arch: str | Architecture = "cgra",
    policy: str = "greedy",
    *,
    choices: Mapping[str, str] | None = None,
    pes: int = 16,
    min_nodes: int = 2,
    min_work_share: float = 0.05,
) -> Partition:
    """Partition ``workload`` (a Workload or a built-in workload's name) on ``arch`` with ``policy``
    (``greedy``, ``min-region``, ``cost``), lower, extract and schedule it (see the module docstring).
    ``choices`` are implementation choices as for ``lower``; ``pes`` the count of unit kinds without one."""
    from dcaccel.dag import extract
    from dcaccel.dag.metrics import task_costs
    from dcaccel.scheduler import schedule

    if policy not in POLICIES:
        raise DcaccelError(f"unknown partition policy '{policy}' (choose from {', '.join(POLICIES)})")
    if not 0 <= min_work_share <= 1:
        raise DcaccelError(f"min_work_share must be between 0 and 1, got {min_work_share}")
    if isinstance(workload, str):
        from dcaccel import workloads

        workload = workloads.get(workload)
    arch = load_architecture(arch)
    host = host_of(arch)
    instances = op_instances(workload)
    annotations = annotate(arch.units, instances)
    for instance in instances:
        if annotations[instance.name].target is None:
            raise DcaccelError(
                f"architecture {arch.name} has no host (a unit of role: host) to run {instance.op} node "
                f"'{instance.name}' ({annotations[instance.name].reason})"
            )
    supported = {name for name, annotation in annotations.items() if annotation.offloaded}
    groups = regions_of(instances, supported)
    choices = dict(choices or {})
    costed, links = link_units(arch, {annotations[name].target for name in supported} if host else set())
    by_pair = {pair: name for name, pair in links.items()}

    def build(on_host: set[str]):
        lowered = _lower(workload, annotations, on_host, choices)
        dag = extract(lowered)
        target = {name: host if name in on_host else annotations[name].target for name in annotations}
        return lowered, dag, target

    canonical_macs: dict[str, int] = {}

    def run(dag, target):
        placed = place(dag, target, host, by_pair, canonical_macs)
        return placed, schedule(placed, pes, "heft", arch=costed)

    unsupported = set(annotations) - supported
    lowered, dag, target = build(unsupported)
    work = _node_figures(dag, task_costs(dag))
    canonical_macs.update((name, work[name][1]) for name in supported if name in work)
    total = sum(w for w, _ in work.values()) or 1
    kept: dict[int, str] = {}
    if policy == "min-region":
        for index, group in enumerate(groups):
            share = sum(work.get(name, (0, 0))[0] for name in group) / total
            if len(group) < min_nodes or share < min_work_share:
                kept[index] = f"{TOO_SMALL} ({len(group)} node(s), {share:.1%} of the work)"
    elif policy == "cost":
        best = run(dag, target)[1].costs.makespan_cycles
        for index in range(len(groups)):
            on_host = unsupported | {name for i in [*kept, index] for name in groups[i]}
            _, trial_dag, trial_target = build(on_host)
            cycles = run(trial_dag, trial_target)[1].costs.makespan_cycles
            if cycles < best:
                kept[index] = f"region cheaper on the host ({cycles} vs {best} cycles offloaded)"
                best = cycles
    if kept:
        lowered, dag, target = build(unsupported | {name for index in kept for name in groups[index]})
        work = _node_figures(dag, task_costs(dag))
    placed, scheduled = run(dag, target)
    regions = [
        Region(
            index,
            tuple(group),
            tuple(dict.fromkeys(annotations[name].target for name in group)),
            sum(work.get(name, (0, 0))[0] for name in group),
            index not in kept,
            kept.get(index, "offloaded"),
        )
        for index, group in enumerate(groups)
    ]
    region_of = {name: index for index, group in enumerate(groups) for name in group}
    nodes = []
    for instance in instances:
        annotation = annotations[instance.name]
        index = region_of.get(instance.name)
        offloaded = index is not None and index not in kept
        nodes.append(
            NodePlacement(
                name=instance.name,
                op=instance.op,
                target=target[instance.name],
                offloaded=offloaded,
                reason=annotation.reason if index is None or offloaded else kept[index],
                region=index if offloaded else None,
                pattern=annotation.pattern if offloaded else None,
                implementation=lowered.implementations.get(instance.name, ""),
                work=work.get(instance.name, (0, 0))[0],
                macs=work.get(instance.name, (0, 0))[1],
            )
        )
    return Partition(workload.name, arch.name, policy, host, nodes, regions, lowered, placed, scheduled, costed, links)


def _lower(workload, annotations: Mapping[str, Annotation], on_host: set[str], choices: dict[str, str]):
    """Lower with the host nodes as DaCe's opaque tasks and every offloaded node on an implementation its
    unit kind allows (the user's choice by node name or op type when allowed, else the first allowed)."""
    from dcaccel.frontend.ops import library_nodes as nodes_of

    chosen = dict(choices)
    for node, _ in nodes_of(workload.sdfg):
        allowed = annotations[node.label].implementations
        if node.label in on_host or allowed is None:
            continue
        wanted = choices.get(node.label, choices.get(op_type(node)))
        chosen[node.label] = wanted if wanted in allowed else allowed[0]
    for name in on_host:
        chosen.pop(name, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpaqueOpWarning)  # the host's nodes are DaCe's opaque tasks by design
        return lower(workload, chosen, host=on_host)


def _node_figures(dag, costs) -> dict[str, tuple[int, int]]:
    """Per operator (``meta["node"]``): the work Σ T(v) of its tasks and their MACs (``meta["macs"]``, else
    the volume of the first in-edge, as the architecture costs count them)."""
    first_in: dict[int, int] = {}
    for _, dst, volume in dag.edges:
        first_in.setdefault(dst, int(volume))
    figures: dict[str, tuple[int, int]] = {}
    for v in dag.tasks:
        meta = dag.node(v).meta
        work, macs = figures.get(meta.get("node"), (0, 0))
        figures[meta.get("node")] = (work + int(costs[v]), macs + int(meta.get("macs", first_in.get(v, 0))))
    return figures
