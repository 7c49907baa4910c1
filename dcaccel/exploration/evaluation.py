"""What a sweep evaluates per assignment, wherever its executor runs it: the plain pipeline's points (lower
or compose, extract, schedule, cost) and each partition's.
"""

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

from dcaccel.architecture import DEFAULT as DEFAULT_ARCHITECTURE
from dcaccel.architecture import Architecture
from dcaccel.architecture import load as load_architecture
from dcaccel.cost.learned import ANALYTIC, LearnedCost, task_times
from dcaccel.cost.proxy import CostModel
from dcaccel.dag.extract import Granularity
from dcaccel.dag.walk import without_cycle_collection
from dcaccel.exploration.assignments import Assignment
from dcaccel.exploration.dags import Harvest, build_dag, expansions_for
from dcaccel.exploration.grid import Grid, point_keys
from dcaccel.exploration.load import fingerprint
from dcaccel.exploration.partitions import partitioned_dags
from dcaccel.exploration.points import ExplorationPoint
from dcaccel.exploration.scheduling import schedule_points
from dcaccel.exploration.study import NO_PARTITION
from dcaccel.scheduler import HETEROGENEOUS
from dcaccel.transforms.lower import OpaqueOpWarning, lower

DEFAULT_COST_MODEL = CostModel()


@dataclass(frozen=True)
class Sweep:
    """What every assignment of one exploration is evaluated on: the grid, how the DAG is extracted,
    the cost model and the architectures every point is costed on (distinct labels); ``strict`` refuses ops
    without a canonical implementation (a failed assignment) instead of lowering them as opaque tasks.
    Picklable: executors ship it to their workers."""

    grid: Grid
    granularity: Granularity
    edge_volume: str
    cost_model: CostModel
    strict: bool = False
    archs: tuple[Architecture, ...] = field(default_factory=lambda: (load_architecture(DEFAULT_ARCHITECTURE),))
    compose: bool = True  # compose DAGs from fragments where that applies (build_dag)
    covers: tuple[Assignment, ...] = ()  # lowered first for their fragments (build_dag)
    harvested: Harvest | None = None  # the fragments of the sweep's process, for its workers (harvest)
    cost: LearnedCost | None = None  # the learned cost source (learned_seconds), None: the analytic one only

    @property
    def label(self) -> str:
        """The granularity as the ``granularity`` column writes it (``task``, ``coarse``, ``tiles=T``)."""
        granularity = self.granularity
        return f"tiles={granularity.tiles}" if granularity.mode == "tiles" else granularity.mode

    def points(self, workload, assignment: Assignment) -> list[ExplorationPoint]:
        """Lower ``workload`` under ``assignment``, extract its DAG and schedule every point of the grid;
        then each partition of :func:`partition_runs` (``dcaccel.partition`` with the assignment as its
        choices; ``lower_seconds`` is the whole partition's time), scheduled with HEFT on its architecture
        plus the link units, at every on-chip size.

        Python's cycle collector is paused meanwhile (as in :func:`_lower`): the collections that
        lowering's allocations trigger rescan every live object of the sweep (the workload, cached
        expansions, fragments), about a third of the lowering time on ResNet-18. The cyclic garbage of
        one assignment is collected after it, so a sweep's peak memory is higher (ResNet-18 per op
        type: 1.5 GB instead of 1.15 GB)."""
        with without_cycle_collection():
            return self._points(workload, assignment)

    def _points(self, workload, assignment: Assignment) -> list[ExplorationPoint]:
        found = []
        if NO_PARTITION in self.grid.partition_policies:
            built = build_dag(
                workload,
                assignment,
                self.granularity,
                self.edge_volume,
                self.strict,
                self.compose,
                self.covers,
                self.harvested,
            )
            learned = None if self.cost is None else self._learned(workload, assignment, built.dag)
            found += schedule_points(
                workload.name, built, self.grid, self.label, self.cost_model, self.archs, learned=learned
            )
        partitions = partitioned_dags(workload, assignment, self.grid, self.archs, self.granularity, self.edge_volume)
        for built, split, pes in partitions:
            grid = replace(self.grid, pes=(pes,), schedulers=(HETEROGENEOUS,))
            learned = None if self.cost is None else task_times(split.lowered, built.dag, self.cost)
            found += schedule_points(
                workload.name, built, grid, self.label, self.cost_model, (split.costed,), split, learned
            )
        return found

    def _learned(self, workload, assignment: Assignment, dag):
        """The durations of ``dag``'s nodes by the learned cost model, read from the assignment's lowered
        program (lowered here: a composed DAG has none; the expansions are the sweep's)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OpaqueOpWarning)  # explore reports the opaque nodes once
            lowered = lower(workload, assignment.as_dict(), strict=self.strict, expansions=expansions_for(workload))
        return task_times(lowered, dag, self.cost)

    def stored(self, store, workload: str) -> dict[str, list[ExplorationPoint]]:
        """The points ``store`` (a :class:`~dcaccel.exploration.store.ResultStore`) holds for ``workload`` at
        this sweep's granularity, by assignment."""
        return store.points(workload, self.label)

    def settings(self, workload) -> dict[str, object]:
        """What a result file must share to be resumed by this sweep on ``workload``: the options not in
        a point's key, the description behind each ``architecture`` label, and the workload's fingerprint
        (:func:`fingerprint`). A file resumed with other architectures gains their points; a label whose
        description changed is refused."""
        return {
            "edge_volume": self.edge_volume,
            "partitioning": self.grid.partitioning,
            "partition options": {
                "min_nodes": self.grid.min_nodes,
                "min_work_share": self.grid.min_work_share,
                "objective": self.grid.partition_objective,
            },
            "cost_model": asdict(self.cost_model),
            **{f"architecture {arch.label}": arch.to_dict() for arch in self.archs},
            **fingerprint(workload),
            "cost": ANALYTIC if self.cost is None else self.cost.setting,
        }

    def complete(self, stored: Sequence[ExplorationPoint]) -> list[ExplorationPoint] | None:
        """The points of the grid among ``stored`` (one assignment's), in the order :func:`schedule_points`
        yields them; None when one is missing."""
        by_key = {
            (point.pes, point.scheduler, point.architecture, point.onchip_memory, point.partition_policy): point
            for point in stored
        }
        wanted = point_keys(self.grid, self.archs)
        if not all(key in by_key for key in wanted):
            return None
        return [by_key[key] for key in wanted]
