"""The lower and extract stages: an assignment's task DAG, lowered whole or composed from the fragments of
earlier lowerings (:mod:`dcaccel.dag.compose`), timed; and the harvest of fragments for worker processes.
"""

import pickle
import queue
import threading
import time
import warnings
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from dcaccel.dag.compose import Composer, composer_for
from dcaccel.dag.extract import Granularity, extract
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.dag.walk import without_cycle_collection
from dcaccel.exploration.assignments import Assignment
from dcaccel.exploration.load import nodes_by_op_type
from dcaccel.exploration.reporting import report_composition, warn_once
from dcaccel.transforms.lower import ExpansionCache, OpaqueOpWarning, lower


class Recipe(Protocol):
    """How a sweep builds its DAGs (:class:`~dcaccel.exploration.evaluation.Sweep` is one)."""

    granularity: Granularity
    edge_volume: str
    strict: bool
    covers: tuple[Assignment, ...]


@dataclass(frozen=True)
class LoweredDAG:
    """The task DAG of one assignment and what building it cost. ``label`` is the assignment the
    lowering actually applied (see :meth:`Assignment.lowered`), the ``assignment`` column of its points."""

    assignment: Assignment
    label: str
    dag: TaskDAG
    lower_seconds: float
    extract_seconds: float


@dataclass(frozen=True)
class Harvest:
    """The fragments the sweep's own process harvested for its workers (:func:`harvest`): its composer
    (shipped without the workload, :meth:`~dcaccel.dag.compose.Composer.__getstate__`), and the seconds its
    lowerings took, which the ``lower_seconds`` of ``assignment``'s DAG counts."""

    composer: Composer
    assignment: Assignment
    lower_seconds: float


def build_dag(
    workload,
    assignment: Assignment,
    granularity,
    edge_volume: str,
    strict: bool = False,
    compose: bool = False,
    covers: Sequence[Assignment] = (),
    harvested: Harvest | None = None,
) -> LoweredDAG:
    """Lower ``workload`` under ``assignment`` (``strict``: refusing ops without a canonical implementation)
    and extract its task DAG, timing both stages; the label is what the lowering gave the nodes the
    assignment's keys cover. The lowering's warning about opaque tasks is not repeated here:
    :func:`explore` reports the workload's opaque nodes once.

    With ``compose``, the DAG is composed from the fragments of earlier lowerings of the workload in this
    process (:mod:`dcaccel.dag.compose`; ``lower_seconds`` counts the lowerings done for fragments,
    composing counts as extraction). When a node's fragment is missing, the assignment is lowered whole
    (its fragments kept), then the ``covers`` (assignments that together give every node each
    implementation of the sweep), once per process and only while composition applies. The
    first composed DAG is checked against the whole-program extraction; where composition does not
    apply, every assignment is lowered whole and one warning says why. A worker process given the
    fragments its sweep ``harvested`` composes from them instead of lowering covers of its own.
    """
    built = _build_dag(workload, assignment, granularity, edge_volume, strict, compose, covers, harvested)
    if harvested is not None and assignment == harvested.assignment:
        return replace(built, lower_seconds=built.lower_seconds + harvested.lower_seconds)
    return built


def _build_dag(
    workload, assignment: Assignment, granularity, edge_volume: str, strict: bool, compose: bool, covers, harvested
) -> LoweredDAG:
    """:func:`build_dag` but for the harvest's lowering time."""
    shipped = harvested.composer if harvested else None
    composer = composer_for(workload, shipped, expansions_for(workload)) if compose else None
    if composer is not None:
        start = time.perf_counter()
        choices = assignment.as_dict()
        granularity = Granularity.parse(granularity)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dag = composer.dag(choices, granularity, edge_volume, strict)
        if dag is None and composer.reason is None and composer.missing(choices):
            # this assignment lowered whole gives its own fragments (and tells whether composition
            # applies at all); then the covers give the fragments later assignments need
            built = _lowered_dag(workload, assignment, granularity, edge_volume, strict, composer)
            covered = time.perf_counter()
            for cover in covers:
                if composer.reason is not None:
                    break
                if str(cover) not in composer.lowerings:
                    _lower(workload, cover, strict, composer)
            report_composition(workload.name, composer.reason)
            return replace(built, lower_seconds=built.lower_seconds + time.perf_counter() - covered)
        lowered_at = start
        report_composition(workload.name, composer.reason)
        if dag is not None:
            label = str(assignment.lowered(composer.implementations(choices), nodes_by_op_type(workload)))
            if composer.verified or composer.composes_back(choices):
                warn_once(workload.name, caught)
                return LoweredDAG(assignment, label, dag, lowered_at - start, time.perf_counter() - lowered_at)
            whole = _lowered_dag(workload, assignment, granularity, edge_volume, strict, None)
            composer.check(dag, whole.dag, str(assignment))
            report_composition(workload.name, composer.reason)
            return replace(whole, lower_seconds=whole.lower_seconds + lowered_at - start)
    return _lowered_dag(workload, assignment, granularity, edge_volume, strict, composer)


def covering_assignments(implementations: Mapping[str, Sequence[str]]) -> tuple[Assignment, ...]:
    """Assignments that together give every key each of its implementations (the j-th gives every key
    its j-th one, wrapping around): lowering them yields every fragment a sweep composes from."""
    longest = max((len(names) for names in implementations.values()), default=0)
    return tuple(
        Assignment(tuple((key, names[j % len(names)]) for key, names in implementations.items() if names))
        for j in range(longest)
    )


def harvest(workload, sweep: Recipe, batch: Sequence[Assignment]) -> Iterator[tuple[list[Assignment], Harvest | None]]:
    """The fragments worker processes need to compose the DAGs of ``batch`` without lowering, harvested
    in this process stage by stage: ``sweep``'s covers of ``workload`` are lowered one at a time, and
    after each the assignments of ``batch`` it gives (a lowering's fragments compose back to it) are
    yielded with the fragments so far, so that workers evaluate them while the next cover is lowered;
    then composition is checked on the first assignment left (composed, and compared with its
    whole-program extraction) and the rest is yielded. Each stage's :class:`Harvest` carries a copy of
    the composer and the seconds lowered for it. Should a lowering fail, the assignments left are
    yielded without a harvest: the workers lower them and report the failure as theirs."""
    composer = composer_for(workload, expansions=expansions_for(workload))
    left = list(batch)
    start = time.perf_counter()

    def stage(ready: list[Assignment]) -> tuple[list[Assignment], Harvest]:
        nonlocal start
        shipped = pickle.loads(pickle.dumps(composer))  # what a worker receives, fixed now
        seconds, start = time.perf_counter() - start, time.perf_counter()
        return ready, Harvest(shipped, ready[0], seconds)

    try:
        for cover in sweep.covers:
            if composer.reason is not None:
                break
            if str(cover) not in composer.lowerings:
                _lower(workload, cover, sweep.strict, composer)
            ready = [assignment for assignment in left if composer.composes_back(assignment.as_dict())]
            if ready and composer.reason is None:
                left = [assignment for assignment in left if assignment not in ready]
                yield stage(ready)
        if left and composer.reason is None and not composer.verified:
            build_dag(workload, left[0], sweep.granularity, sweep.edge_volume, sweep.strict, compose=True)
    except Exception:  # the workers lower what is left and report the failure per assignment
        if left:
            yield left, None
        return
    report_composition(workload.name, composer.reason)
    if left:
        yield stage(left)


def together(stages: list[tuple[list[Assignment], Harvest | None]]) -> tuple[list[Assignment], Harvest | None]:
    """The stages of a harvest as one: every assignment, the last stage's fragments (none if a stage has
    none) and the seconds of all, counted by the first assignment."""
    assignments = [assignment for ready, _ in stages for assignment in ready]
    harvests = [harvested for _, harvested in stages]
    if not harvests or None in harvests:
        return assignments, None
    seconds = sum(harvested.lower_seconds for harvested in harvests)
    return assignments, Harvest(harvests[-1].composer, assignments[0], seconds)


def ahead(items: Iterator) -> Iterator:
    """The items of ``items``, each computed in a background thread while the caller uses the previous."""
    found: queue.Queue = queue.Queue(maxsize=1)
    end = object()

    def produce() -> None:
        try:
            for item in items:
                found.put((item, None))
        except BaseException as err:  # re-raised in the caller's thread
            found.put((end, err))
            return
        found.put((end, None))

    threading.Thread(target=produce, name="harvest", daemon=True).start()
    while True:
        item, err = found.get()
        if err is not None:
            raise err
        if item is end:
            return
        yield item


#: The expansions of each workload's lowerings in this process, the lower stage's cache (held here, not by
#: the workload; dropped with the workload).
_EXPANSIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def expansions_for(workload) -> ExpansionCache:
    """The cache of the expansions of ``workload``'s lowerings in this process (made at the first call),
    which every lowering of the sweep, its composer and its partitions share."""
    return _EXPANSIONS.setdefault(workload, ExpansionCache())


def _lower(workload, assignment: Assignment, strict: bool, composer):
    """``lower(workload, assignment)``; its fragments go to ``composer`` (if any). Without cycle
    collection (see :meth:`Sweep.points`): the harvest lowers outside an assignment's evaluation."""
    with warnings.catch_warnings(), without_cycle_collection():
        warnings.simplefilter("ignore", OpaqueOpWarning)
        lowered = lower(workload, assignment.as_dict(), strict=strict, expansions=expansions_for(workload))
        if composer is not None:
            composer.add(lowered, str(assignment))
    return lowered


def _lowered_dag(workload, assignment: Assignment, granularity, edge_volume: str, strict: bool, composer):
    """:func:`build_dag` by lowering the whole program; its fragments go to ``composer`` (if any)."""
    start = time.perf_counter()
    lowered = _lower(workload, assignment, strict, composer)
    if composer is not None:
        report_composition(workload.name, composer.reason)
    lowered_at = time.perf_counter()
    label = str(assignment.lowered(lowered.implementations, nodes_by_op_type(workload)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dag = extract(lowered, granularity=granularity, edge_volume=edge_volume)
    warn_once(workload.name, caught)
    return LoweredDAG(assignment, label, dag, lowered_at - start, time.perf_counter() - lowered_at)
