"""``dcaccel.partition``: how much of a model runs on an accelerator, and what the host part and the
transfers cost (``docs/partitioning.md``).

:func:`partition` runs the pipeline on a split program, in this order:

1. **Annotate, regions, policy, lower** (:mod:`dcaccel.transforms.offload`): every operator gets the unit
   kind that runs it, the offloaded ones form regions, the policy keeps some regions on the host, and the
   program is lowered with the host's operators as DaCe's opaque tasks.
2. **Extract and place** (:mod:`dcaccel.dag.placement`): every task's record gets its ``unit``
   and a transfer task on every edge between the host and an accelerator kind.
3. **Schedule and cost**: the heterogeneous list scheduler (``heft``) runs the placed DAG on the
   architecture plus one unit kind per host↔accelerator link (:mod:`dcaccel.architecture.links`), and
   :func:`dcaccel.cost.schedule.cost_schedule` costs that schedule there.

The ``cost`` policy keeps a region on the host when the makespan on the architecture, in cycles, of the
program lowered and placed that way is lower with it there, region after region in program order (one more
lowering and schedule per region). A program is lowered and extracted once per set of host nodes: the
partitions given the same :class:`Lowerings` (the sweep's: one per assignment, for every policy, architecture
and P) take it from there, and the ``cost`` policy's chosen split is the program it tried last. Under a
design whose accelerator supports every operator (``abstract``) nothing is moved: the lowering, the DAG and
every number are those of the plain pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tqdm import tqdm

from dcaccel.architecture import Architecture
from dcaccel.architecture import load as load_architecture
from dcaccel.architecture.links import host_of, link_units
from dcaccel.cost.schedule import ArchitectureCosts, cost_schedule
from dcaccel.dag import extract
from dcaccel.dag.arithmetic import task_arithmetic
from dcaccel.dag.extract import Granularity
from dcaccel.dag.metrics import task_costs
from dcaccel.dag.placement import place, transfer_tasks
from dcaccel.errors import DcaccelError
from dcaccel.records import attributes
from dcaccel.scheduler import Schedule, schedule
from dcaccel.transforms.lower import ExpansionCache, LoweredWorkload
from dcaccel.transforms.offload import (
    annotations_of,
    check_policy,
    lower_partitioned,
    partition_choices,
    regions_of,
    too_small,
)


@dataclass
class Lowerings:
    """What the partitions of one workload share: the expansions of its lowerings (``lower``'s cache) and each
    program lowered with a set of nodes on the host and extracted, by what makes it: the host nodes, the
    choices it is lowered with (:func:`~dcaccel.transforms.offload.partition_choices`), the granularity and
    the edge-volume rule (:func:`partition` lowers a program only when it is not here: once for every
    policy, P and architecture that give it)."""

    expansions: ExpansionCache | None = None
    programs: dict[tuple, tuple[LoweredWorkload, Any]] = field(default_factory=dict)
    lowered: int = 0  # how many programs were lowered (the rest were taken from ``programs``)


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
    schedule: Schedule = field(repr=False)  # its heterogeneous schedule on ``costed``
    costs: ArchitectureCosts = field(repr=False)  # what that schedule costs there
    costed: Architecture = field(repr=False)  # the architecture plus one unit per host↔accelerator link
    links: dict[str, tuple[str, str]] = field(default_factory=dict)  # link unit -> (host, accelerator kind)
    objective: str = "makespan"  # what the cost policy minimised

    @property
    def transfer_tasks(self) -> list[int]:
        return transfer_tasks(self.dag)

    @property
    def transfer_volume(self) -> int:
        """Elements crossing the host↔accelerator links (Σ over transfer tasks of their volume)."""
        return sum(int(self.dag.info(v).elements) for v in self.transfer_tasks)

    @property
    def offloaded_work_share(self) -> float:
        return _share([(n.offloaded, n.work) for n in self.nodes])

    @property
    def offloaded_mac_share(self) -> float:
        return _share([(n.offloaded, n.macs) for n in self.nodes])

    @property
    def makespan(self) -> int:
        """The end-to-end makespan on the architecture, in cycles of its clock."""
        return self.costs.makespan_cycles

    @property
    def energy_pj(self) -> float:
        return self.costs.energy_total_pj

    @property
    def energy_split_pj(self) -> dict[str, float]:
        """Energy of the host (its compute and its links to memories), the links between host and
        accelerator (the transfers), and the accelerator (everything else: its units, memories, links)."""
        return self.costs.energy_split(self.links)

    def summary(self) -> dict:
        """The partition as one JSON-ready object."""
        shown = "workload architecture policy objective offloaded_work_share offloaded_mac_share transfer_volume"
        return attributes(self, [*shown.split(), "makespan", "energy_pj", "energy_split_pj"]) | {
            "nodes": [asdict(node) for node in self.nodes],
            "regions": [asdict(region) for region in self.regions],
            "offloaded_regions": sum(region.offloaded for region in self.regions),
            "transfer_tasks": len(self.transfer_tasks),
            "makespan_us": self.costs.makespan_seconds * 1e6,
        }


def _share(pairs: list[tuple[bool, int]]) -> float:
    total = sum(value for _, value in pairs)
    return sum(value for offloaded, value in pairs if offloaded) / total if total else 0.0


#: What the ``cost`` policy minimises, with its unit.
UNITS = {"makespan": "cycles", "energy": "pJ", "edp": "pJ·cycles"}
OBJECTIVES = tuple(UNITS)


def partition(
    workload,
    arch: str | Architecture = "cgra",
    policy: str = "greedy",
    *,
    choices: Mapping[str, str] | None = None,
    pes: int = 16,
    min_nodes: int = 2,
    min_work_share: float = 0.05,
    granularity: str | tuple = "task",
    edge_volume: str = "exact",
    objective: str = "makespan",
    progress: bool | None = False,
    lowerings: Lowerings | None = None,
) -> Partition:
    """Partition ``workload`` (a Workload, a built-in workload's name, an ONNX file or
    ``path/to/file.py:attribute``, as :func:`dcaccel.frontend.load.resolve` reads it) on ``arch`` with ``policy``
    (``greedy``, ``min-region``, ``cost``), lower, extract, place and schedule it (see the module docstring).
    ``choices`` are implementation choices as for ``lower``; ``pes`` the count of unit kinds without one;
    ``granularity`` and ``edge_volume`` those of :func:`dcaccel.dag.extract`; ``objective`` what the
    ``cost`` policy minimises: ``makespan`` (cycles), ``energy`` (pJ) or ``edp`` (their product);
    ``progress``: a progress bar over the regions the ``cost`` policy tries (None: when that takes longer
    than a second); ``lowerings``: what the workload's earlier partitions lowered (:class:`Lowerings`), which
    this one reuses and adds to (a program is lowered once per set of host nodes)."""
    check_policy(policy, min_work_share)
    if objective not in OBJECTIVES:
        raise DcaccelError(f"unknown partition objective '{objective}' (choose from {', '.join(OBJECTIVES)})")
    if isinstance(workload, str):
        from dcaccel.frontend.load import resolve

        workload = resolve(workload)
    arch = load_architecture(arch)
    host = host_of(arch)
    choices = dict(choices or {})
    instances, annotations = annotations_of(workload, arch, host, choices)
    supported = {name for name, annotation in annotations.items() if annotation.offloaded}
    groups = regions_of(instances, supported)
    costed, links = link_units(arch, {annotations[name].target for name in supported} if host else set())
    by_pair = {pair: name for name, pair in links.items()}

    lowerings = Lowerings() if lowerings is None else lowerings
    extraction = (Granularity.parse(granularity), edge_volume)

    def build(on_host: set[str]):
        chosen = partition_choices(workload, annotations, on_host, choices)
        key = (frozenset(on_host), tuple(sorted(chosen.items())), *extraction)
        if key not in lowerings.programs:
            lowered = lower_partitioned(workload, annotations, on_host, choices, lowerings.expansions)
            lowerings.programs[key] = lowered, extract(lowered, granularity=granularity, edge_volume=edge_volume)
            lowerings.lowered += 1
        target = {name: host if name in on_host else annotations[name].target for name in annotations}
        return (*lowerings.programs[key], target)

    def run(dag, target):
        placed = place(dag, target, host, by_pair)
        scheduled = schedule(placed, pes, "heft", arch=costed)
        return placed, scheduled, cost_schedule(scheduled, costed)

    unsupported = set(annotations) - supported
    lowered, dag, target = build(unsupported)
    work = _node_figures(dag, task_costs(dag))
    kept: dict[int, str] = {}  # a design without a host keeps every region on the accelerator
    if policy == "min-region" and host is not None:
        kept = too_small(groups, {name: w for name, (w, _) in work.items()}, min_nodes, min_work_share)
    elif policy == "cost" and host is not None:
        best = _objective(run(dag, target)[2], objective)
        tried = tqdm(
            range(len(groups)),
            desc=f"partition {workload.name}",
            unit="region",
            disable=progress is False,
            delay=0 if progress else 1.0,
        )
        for index in tried:
            on_host = unsupported | {name for i in [*kept, index] for name in groups[i]}
            _, trial_dag, trial_target = build(on_host)
            value = _objective(run(trial_dag, trial_target)[2], objective)
            if value < best:
                shown = f"{_shown(value)} vs {_shown(best)} {UNITS[objective]}"
                kept[index] = f"region cheaper on the host ({shown} offloaded)"
                best = value
    if kept:
        lowered, dag, target = build(unsupported | {name for index in kept for name in groups[index]})
        work = _node_figures(dag, task_costs(dag))
    placed, scheduled, costs = run(dag, target)
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
    return Partition(
        workload.name,
        arch.name,
        policy,
        host,
        nodes,
        regions,
        lowered,
        placed,
        scheduled,
        costs,
        costed,
        links,
        objective,
    )


def _objective(costs, objective: str) -> float:
    """The value of ``objective`` of a schedule's costs on the architecture."""
    return {
        "makespan": costs.makespan_cycles,
        "energy": costs.energy_total_pj,
        "edp": costs.makespan_cycles * costs.energy_total_pj,
    }[objective]


def _shown(value: float) -> str:
    """A value of an objective as a region's reason says it (cycles exactly, energies to four digits)."""
    return str(value) if isinstance(value, int) else f"{value:.4g}"


def _node_figures(dag, costs) -> dict[str, tuple[int, int]]:
    """Per operator (its tasks' records' ``node``): the work Σ T(v) of its tasks and their MACs
    (:func:`dcaccel.dag.arithmetic.task_arithmetic`, as the architecture costs count them)."""
    first_in: dict[int, int] = {}
    for _, dst, volume in dag.edges:
        first_in.setdefault(dst, int(volume))
    figures: dict[str, tuple[int, int]] = {}
    for v in dag.tasks:
        info = dag.info(v)
        work, macs = figures.get(info.node, (0, 0))
        task_macs, _ = task_arithmetic(info, first_in.get(v, 0))
        figures[info.node] = (work + int(costs[v]), macs + task_macs)
    return figures
