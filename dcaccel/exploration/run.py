"""Running a study: the load stage, the assignments its strategy enumerates, evaluated by its executor
(stored points skipped), recorded in its result store; the points as a DataFrame.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace

import pandas as pd
from tqdm import tqdm

from dcaccel.architecture import Architecture
from dcaccel.cost.learned import cost_source
from dcaccel.dag.walk import Granularity
from dcaccel.errors import DcaccelError
from dcaccel.exploration.assignments import Assignment, node_candidates, per_node, per_op_type
from dcaccel.exploration.dags import ahead, covering_assignments, harvest, together
from dcaccel.exploration.evaluation import Sweep
from dcaccel.exploration.executors import Executor, Failure, Outcome, WorkloadSource, make_executor
from dcaccel.exploration.grid import Grid, architectures, check_units
from dcaccel.exploration.load import (
    LoadedModel,
    check_implementations,
    check_ops_run,
    default_implementations,
    drop_unknown_keys,
    load_model,
    nodes_by_op_type,
    report_opaque,
)
from dcaccel.exploration.mapping import MappingSearch, layer_assignment, mapping_frame, searched_layers
from dcaccel.exploration.points import ExplorationPoint, to_frame
from dcaccel.exploration.store import ResultStore
from dcaccel.exploration.study import MAPPING, Study, objective_column


def run_study(study: Study, loaded: LoadedModel | None = None, progress: bool | None = None) -> pd.DataFrame:
    """Run ``study`` on each of its models (or on ``loaded``, the one model :func:`dcaccel.explore` was
    given as a workload) and return one row per design point, the models' rows one after the other.

    :param progress: show a progress bar over assignments (None: when the sweep runs longer than a second).
    :raises SweepError: after the whole study, when assignments failed; it carries the finished points.
    """
    archs = architectures(study.arch, study.arch_params)
    models = [loaded] if loaded is not None else [load_model(spec, study.symbols) for spec in study.models]
    frames, failures, messages = [], [], []
    for model in models:
        try:
            frames.append(_run_model(study, archs, model, progress))
        except SweepError as err:
            frames.append(err.results)
            failures += err.failures
            messages.append(str(err))
    frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    if failures:
        raise SweepError("; ".join(messages), frame, failures)
    return frame


def _run_model(study: Study, archs: tuple[Architecture, ...], model: LoadedModel, progress: bool | None):
    """The points of ``study`` on one loaded model."""
    workload = model.workload
    if study.strategy == MAPPING:
        return _run_mapping(study, archs, model, progress)
    options = study.partition
    grid = Grid(
        study.pe_counts(archs),
        study.scheduler,
        study.onchip_memory,
        study.partitioning,
        options.policies,
        options.min_nodes,
        options.min_work_share,
        options.partition_objective,
    )
    check_units(grid, archs)
    check_ops_run(workload, archs)
    report_opaque(workload, study.dag.strict)
    nodes = nodes_by_op_type(workload)
    implementations = default_implementations(workload) if study.implementations is None else study.implementations
    implementations = drop_unknown_keys(workload, implementations)
    check_implementations(workload, implementations)
    dag = study.dag
    covers = covering_assignments(implementations) if dag.compose else ()
    granularity = Granularity.parse(dag.granularity)
    sweep = Sweep(
        grid, granularity, dag.edge_volume, study.cost_model, dag.strict, archs, dag.compose, covers,
        cost=cost_source(study.cost),
    )  # fmt: skip
    space = Space(nodes, implementations)
    if study.strategy == "greedy":
        column = objective_column(study.objective)
        choose = lambda evaluate: greedy(evaluate, space.nodes, space.implementations, column)  # noqa: E731
        run = _evaluate(study, sweep, model, [], progress, choose)
    else:
        run = _evaluate(study, sweep, model, space.assignments(study.strategy, study.max_assignments), progress)
    frame = to_frame([point for assignment in run.order if assignment in run.found for point in run.found[assignment]])
    return _finished(run, workload.name, frame)


def _run_mapping(study: Study, archs: tuple[Architecture, ...], model: LoadedModel, progress: bool | None):
    """The rows of the mapping strategy on one loaded model: its layers searched as the study's
    assignments (:mod:`dcaccel.exploration.mapping`)."""
    from dcaccel.mapping.search import LayerOptions, onchip_capacity

    for arch in archs:
        for memory in study.onchip_memory:
            onchip_capacity(arch, memory or None)
    name = model.workload.name
    layers, searched = searched_layers(model.workload)
    options = LayerOptions(study.pe_counts(archs), study.objective)
    search = MappingSearch(name, searched, archs, study.onchip_memory, options)
    run = _evaluate(study, search, model, [layer_assignment(node) for node in searched], progress)
    found = {assignment.choices[0][0]: rows for assignment, rows in run.found.items()}
    return _finished(run, name, mapping_frame(name, layers, found, archs, study.onchip_memory))


def _finished(run: Run, name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame``, the rows of ``run`` on the model ``name``; a :class:`SweepError` carrying it when
    assignments failed."""
    if run.failures:
        first = next(iter(run.failures.values()))
        raise SweepError(
            f"explore {name}: {len(run.failures)} of {len(run.order)} assignments failed "
            f"(first: {first.assignment}: {first.error})",
            frame,
            list(run.failures.values()),
        )
    return frame


@dataclass(frozen=True)
class Space:
    """The implementation space of one model: its nodes per op type, the implementations to try per key."""

    nodes: Mapping[str, list[str]]
    implementations: Mapping[str, Sequence[str]]

    def assignments(self, strategy: str, max_assignments: int) -> list[Assignment]:
        """The assignments ``strategy`` enumerates up front (greedy: none, it chooses as it goes), each reduced
        to the choices that decide a node's implementation, without repeats."""
        if strategy == "per-op-type":
            found = per_op_type(self.implementations)
        elif strategy == "per-node":
            found = per_node(self.nodes, self.implementations, max_assignments)
        else:
            found = []
        return list(dict.fromkeys(assignment.effective(self.nodes) for assignment in found))


def _evaluate(
    study: Study, evaluation, model: LoadedModel, assignments: list[Assignment], progress, choose=None
) -> Run:
    """Evaluate ``assignments`` with ``evaluation`` (a :class:`Sweep` or a :class:`MappingSearch`) on the
    study's executor, recording in its store, or let ``choose`` pick them (it takes :meth:`Run.evaluate`)."""
    workload = model.workload
    execution = study.execution
    with ExitStack() as stack:
        store = None
        if study.store.results is not None:
            store = stack.enter_context(
                ResultStore(study.store.results, evaluation.settings(workload), study.store.resume)
            )
            store.record_study(study.to_yaml())
        bar = stack.enter_context(
            tqdm(
                total=len(assignments) or None,
                desc=f"explore {workload.name}",
                unit="assignment",
                disable=progress is False,
                delay=0 if progress else 1.0,
            )
        )

        def start() -> Executor:
            source = WorkloadSource.of(workload, model.builtin)
            return stack.enter_context(
                make_executor(execution.executor, workload, source, evaluation, execution.address, execution.workers)
            )

        run = Run(evaluation, workload, store, bar, start, evaluation.stored(store, workload.name) if store else {})
        if choose is not None:
            choose(run.evaluate)
        else:
            run.evaluate(assignments)
    return run


class SweepError(DcaccelError):
    """Assignments of a sweep failed; the others finished.

    ``results`` holds the finished points (as :func:`explore` would return them), ``failures`` one
    :class:`Failure` per failed assignment. With a result file, the finished points are stored and a
    resumed sweep retries only the failed assignments.
    """

    def __init__(self, message: str, results: pd.DataFrame, failures: list[Failure]):
        super().__init__(message)
        self.results = results
        self.failures = failures


class Run:
    """The state of one sweep: the points found (stored or evaluated), the failures, and the executor,
    started at the first assignment that is not stored. Composing for worker processes, this process
    harvests the fragments (:func:`harvest`) while they start, and ships them with every assignment."""

    def __init__(self, sweep: Sweep, workload, store: ResultStore | None, bar, start: Callable[[], Executor], stored):
        self.sweep = sweep  # with the harvested fragments once the workers are started (harvest)
        self.workload = workload
        self.store = store
        self.bar = bar
        self.start = start
        self.stored: dict[str, list[ExplorationPoint]] = stored
        self.executor: Executor | None = None
        self.order: list[Assignment] = []
        self.found: dict[Assignment, list[ExplorationPoint]] = {}
        self.failures: dict[Assignment, Failure] = {}

    def evaluate(self, batch: Sequence[Assignment]) -> list[list[ExplorationPoint] | None]:
        """The points of every assignment of ``batch`` (None for a failed one), evaluating in parallel
        those neither evaluated in this sweep nor stored."""
        todo = []
        for assignment in dict.fromkeys(batch):
            if assignment in self.found or assignment in self.failures:
                continue
            self.order.append(assignment)
            points = self.sweep.complete(self.stored.get(str(assignment), ()))
            if points is None:
                todo.append(assignment)
            else:
                self.found[assignment] = points
                self.bar.update(1)
        if todo:
            stages = [(todo, self.sweep.harvested)]
            if self.executor is None:
                self.executor = self.start()
                if self.sweep.compose and self.executor.name != "local":
                    # the workers start, then evaluate each stage while this process harvests the next;
                    # on Dask (its client's event loop runs in this process) the harvest comes first
                    self.executor.warm()
                    stages = harvest(self.workload, self.sweep, todo)
                    stages = ahead(stages) if self.executor.name == "process" else [together(list(stages))]
            for assignments, harvested in stages:
                self.sweep = replace(self.sweep, harvested=harvested)
                for outcome in self.executor.map(assignments, self.sweep):
                    self._record(outcome)
        return [self.found.get(assignment) for assignment in batch]

    def _record(self, outcome: Outcome) -> None:
        if outcome.failure is None:
            self.found[outcome.assignment] = list(outcome.points)
            if self.store is not None:
                self.store.add(outcome.points)
        else:
            self.failures[outcome.assignment] = outcome.failure
            if self.store is not None:
                self.store.add_failure(outcome.failure)
            self.bar.set_postfix(failed=len(self.failures))
        self.bar.update(1)


def greedy(evaluate, nodes: Mapping[str, list[str]], implementations: Mapping[str, Sequence[str]], objective: str):
    """Choose per node, one at a time in the order of :func:`node_candidates`, the implementation
    minimising the mean ``objective`` over the grid with the other nodes fixed (ties: the first listed;
    a failed candidate scores infinity). ``evaluate`` takes the candidates of one node at once, so they
    run in parallel."""
    order = node_candidates(nodes, implementations)
    current = Assignment(tuple((node, names[0]) for node, names in order))
    for node, names in order:
        candidates = [current.replace(node, implementation) for implementation in names]
        scores = [
            sum(getattr(point, objective) for point in points) / len(points) if points else math.inf
            for points in evaluate(candidates)
        ]
        current = current.replace(node, names[scores.index(min(scores))])
    return current
