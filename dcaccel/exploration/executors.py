"""Where the assignments of a sweep are evaluated: in this process, in a process pool, or on a Dask cluster.

The unit of work is one assignment: the worker lowers the workload under it, extracts the task DAG
and schedules every (P, scheduler, on-chip memory) point of the sweep on that DAG, then returns the
points. Lowering dominates (LeNet: 1.3 to 1.5 s to lower and extract one assignment, 0.03 to 0.05 s
to schedule its four points; ``benchmarks/bench_distributed.py`` measures it), so it runs where the
points are scheduled: neither SDFGs nor DAGs travel, only the workload (once per worker) and the
points. Composing DAGs from fragments (``dcaccel.exploration.dags.harvest``), the sweep's process lowers
the covers while the workers start (:meth:`Executor.warm`) and evaluate the first stages, and each
assignment carries the fragments (``map``'s ``evaluation``), so workers lower nothing. A worker obtains
the workload from a :class:`WorkloadSource`:
a built-in workload by name (rebuilt once per worker process), any other workload pickled without
what lowering does not read (weights, ONNX model, reference, input sampler).

Every executor yields one :class:`Outcome` per assignment as it finishes, in completion order. An
assignment that raises yields a :class:`Failure` instead of stopping the others. A process-pool or
Dask worker that dies mid-assignment has the assignment retried on another worker (Dask: by its
scheduler, up to ``distributed.scheduler.allowed-failures`` times; the process pool: alone in a new
pool, up to :data:`RETRIES` times); when the retries are spent the assignment is a failure.

DaCe is not thread-safe: workers are processes (Dask workers should run one thread each, and a lock
serialises evaluations in a worker process that has more).

Pool workers never outlive the sweep: each watches the sweep's process and exits as soon as it ends,
however it ends (Ctrl-C, SIGTERM, SIGKILL); the fork server then exits by itself. Ctrl-C reaches the
sweep only (workers ignore SIGINT); a pool closed by an exception terminates its workers instead of
waiting for their assignments.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import pickle
import select
import signal
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dcaccel.errors import DcaccelError
from dcaccel.exploration.assignments import Assignment
from dcaccel.exploration.points import ExplorationPoint

if TYPE_CHECKING:
    from dcaccel.frontend.workload import Workload

EXECUTORS = ("local", "process", "dask")
#: The most pool or local-cluster processes per core of this machine (each builds the workload once).
MAX_WORKERS_PER_CORE = 4

#: How many times the process pool re-runs an assignment whose worker process died.
RETRIES = 3

#: Modules every pool worker imports (DaCe among them), preloaded by the fork server.
WORKER_MODULES = ("dcaccel.exploration.sweep",)

#: Loopback host of the Dask cluster started when no scheduler address is given.
LOOPBACK = "127.0.0.1"


class Evaluation(Protocol):
    """What an executor runs per assignment (``dcaccel.exploration.evaluation.Sweep``): picklable, pure."""

    def points(self, workload: Workload, assignment: Assignment) -> list[ExplorationPoint]: ...


@dataclass(frozen=True)
class Failure:
    """An assignment whose evaluation raised: the error in one line and its traceback."""

    assignment: str
    error: str  # "ExceptionType: first line of the message"
    traceback: str


@dataclass(frozen=True)
class Outcome:
    """What evaluating one assignment gave: its points, or the failure."""

    assignment: Assignment
    points: tuple[ExplorationPoint, ...] = ()
    failure: Failure | None = None


@dataclass(frozen=True)
class WorkloadSource:
    """How a worker process obtains the workload: a built-in name, or the workload itself (pickled).

    ``workload`` is None for a built-in workload, which each worker process builds once by name.
    """

    name: str
    workload: Workload | None = None

    @classmethod
    def of(cls, workload: Workload, builtin: bool) -> WorkloadSource:
        """The source of ``workload``: by name when it is the built-in one of that name, else a copy
        holding only what lowering reads (the SDFG, the inputs, outputs and symbols)."""
        if builtin:
            return cls(workload.name)
        lowering_view = dataclasses.replace(workload, weights={}, onnx_model=None, reference=None, input_sampler=None)
        return cls(workload.name, lowering_view)

    def __reduce__(self):
        """Pickle a carried workload as bytes that :func:`_carrying` loads once DaCe has built its ONNX
        node classes: a worker process has not built them yet when it receives the source, and the
        workload's ONNX nodes are instances of them."""
        if self.workload is None:
            return WorkloadSource, (self.name,)
        return _carrying, (self.name, pickle.dumps(self.workload))

    def build(self) -> Workload:
        """The workload, built at most once per process for a built-in name."""
        if self.workload is not None:
            return self.workload
        if self.name not in _BUILT:
            from dcaccel import workloads

            _BUILT[self.name] = workloads.get(self.name)
        return _BUILT[self.name]


def _carrying(name: str, workload: bytes) -> WorkloadSource:
    """The source of the pickled ``workload``, loaded after registering dcaccel's implementations (which
    builds DaCe's ONNX node classes)."""
    from dcaccel.expansions.registry import register

    register()
    return WorkloadSource(name, pickle.loads(workload))


#: Built-in workloads built in this (worker) process, by name.
_BUILT: dict[str, Workload] = {}

#: Serialises evaluations in one process: DaCe's lowering is not thread-safe.
_LOWERING = threading.Lock()

#: The workload of a process-pool worker and its queue of started assignments, set by the pool's initializer.
_INSTALLED: list = []


def evaluate(evaluation: Evaluation, workload: Workload, assignment: Assignment) -> Outcome:
    """Evaluate one assignment; an exception becomes the outcome's :class:`Failure`."""
    try:
        with _LOWERING:
            points = evaluation.points(workload, assignment)
    except Exception as err:  # any error of one assignment is reported, the sweep goes on
        return Outcome(assignment, failure=failure_of(assignment, err))
    return Outcome(assignment, tuple(points))


def failure_of(assignment: Assignment, err: BaseException) -> Failure:
    """The :class:`Failure` of ``assignment`` that raised ``err``."""
    lines = str(err).strip().splitlines()
    error = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
    return Failure(str(assignment), error, "".join(traceback.format_exception(err)))


def _evaluate_source(source: WorkloadSource, evaluation: Evaluation, assignment: Assignment) -> Outcome:
    """A Dask task: evaluate ``assignment`` on the workload of ``source``."""
    return evaluate(evaluation, source.build(), assignment)


def _alive(pid: int) -> bool:
    """Whether the process ``pid`` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _watch(pid: int) -> None:
    """Return when the process ``pid`` has ended: wait on a pidfd where the system has them (Linux), else
    poll once a second."""
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd here, or the process is already gone
        while _alive(pid):
            time.sleep(1.0)
        return
    with os.fdopen(handle) as pidfd:
        select.select([pidfd], [], [])


def exit_with(pid: int) -> threading.Thread:
    """Make this process exit as soon as the process ``pid`` ends (a daemon thread waits for it)."""

    def wait_then_exit() -> None:
        _watch(pid)
        os._exit(1)

    watcher = threading.Thread(target=wait_then_exit, name=f"exit-with-{pid}", daemon=True)
    watcher.start()
    return watcher


def _install(source: WorkloadSource, started, sweep: int) -> None:
    """Process-pool initializer: leave Ctrl-C to the sweep, exit when the sweep process ``sweep`` ends,
    build the worker's workload once and keep the queue starts are reported on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with(sweep)
    _INSTALLED[:] = [source.build(), started]


def _ready() -> None:
    """A process-pool task that does nothing: submitted to start a worker process."""


def _evaluate_installed(evaluation: Evaluation, assignment: Assignment) -> Outcome:
    """A process-pool task: report the start of ``assignment``, evaluate it on the installed workload."""
    workload, started = _INSTALLED
    started.put(assignment)
    return evaluate(evaluation, workload, assignment)


class Executor:
    """Evaluates assignments and yields their outcomes as they finish; a context manager that releases
    its workers on exit."""

    name = ""

    def map(self, assignments: Sequence[Assignment], evaluation: Evaluation | None = None) -> Iterator[Outcome]:
        """One outcome per assignment of ``assignments``, in completion order, each evaluated by
        ``evaluation`` (default: the executor's)."""
        raise NotImplementedError

    def warm(self) -> None:
        """Start the workers now (each builds the workload), while the caller prepares the first map."""

    def close(self) -> None:
        """Release the workers."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalExecutor(Executor):
    """Evaluates every assignment in this process, in order, on the caller's workload."""

    name = "local"

    def __init__(self, workload: Workload, evaluation: Evaluation):
        self.workload = workload
        self.evaluation = evaluation

    def map(self, assignments: Sequence[Assignment], evaluation: Evaluation | None = None) -> Iterator[Outcome]:
        for assignment in assignments:
            yield evaluate(self.evaluation if evaluation is None else evaluation, self.workload, assignment)


def _worker_context() -> multiprocessing.context.BaseContext:
    """How pool workers start: forked from a fork server that has imported :data:`WORKER_MODULES` once
    (spawned where there is no fork server). Neither inherits the caller's threads."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_MODULES))
    return context


class ProcessExecutor(Executor):
    """A pool of ``workers`` processes on this machine, each building the workload once.

    A worker process that dies breaks the pool. Each task reports its start on a queue, so the
    assignments that were running then are known: they are retried one at a time in new pools (one
    that breaks again alone is the cause, and fails after :data:`RETRIES` retries); the assignments
    that had not started are resubmitted without counting an attempt.
    """

    name = "process"

    def __init__(self, source: WorkloadSource, evaluation: Evaluation, workers: int | None = None):
        self.source = source
        self.evaluation = evaluation
        self.workers = workers or os.cpu_count() or 1
        self._context = _worker_context()
        self._pool: ProcessPoolExecutor | None = None
        self._started = None

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._started = self._context.SimpleQueue()
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=self._context,
                initializer=_install,
                initargs=(self.source, self._started, os.getpid()),
            )
        return self._pool

    def _drain_started(self) -> set[Assignment]:
        """The assignments whose start the workers reported since the last call."""
        started = set()
        while not self._started.empty():
            started.add(self._started.get())
        return started

    def _discard_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._started.close()
            self._pool = self._started = None

    def warm(self) -> None:
        """Start the pool's processes (one no-op task each)."""
        pool = self._ensure_pool()
        for _ in range(self.workers):
            pool.submit(_ready)

    def _run(
        self, batch: list[Assignment], evaluation: Evaluation
    ) -> Iterator[Outcome | tuple[Assignment, BrokenProcessPool, bool]]:
        """Run ``batch`` in the current pool: outcomes, then (assignment, error, blamed) for each
        assignment a broken pool lost, blamed when it was running."""
        pool = self._ensure_pool()
        futures = {pool.submit(_evaluate_installed, evaluation, assignment): assignment for assignment in batch}
        started: set[Assignment] = set()
        lost = []
        waiting = set(futures)
        while waiting:
            done, waiting = wait(waiting, return_when=FIRST_COMPLETED)
            started |= self._drain_started()
            for future in done:
                try:
                    yield future.result()
                except BrokenProcessPool as err:
                    lost.append((futures[future], err))
        if lost:
            started |= self._drain_started()
            self._discard_pool()
            if not started:
                raise DcaccelError(f"explore: the worker processes died before starting any assignment ({lost[0][1]})")
            for assignment, err in lost:
                yield assignment, err, assignment in started

    def map(self, assignments: Sequence[Assignment], evaluation: Evaluation | None = None) -> Iterator[Outcome]:
        attempts = dict.fromkeys(assignments, 0)
        pending = list(attempts)
        suspects: list[Assignment] = []
        while pending or suspects:
            batch, pending = ([suspects.pop(0)], pending) if suspects else (pending, [])
            for result in self._run(batch, self.evaluation if evaluation is None else evaluation):
                if isinstance(result, Outcome):
                    yield result
                    continue
                assignment, err, blamed = result
                if not blamed:
                    pending.append(assignment)
                    continue
                attempts[assignment] += 1
                if attempts[assignment] > RETRIES:
                    yield Outcome(assignment, failure=failure_of(assignment, err))
                else:
                    suspects.append(assignment)

    def close(self) -> None:
        self._discard_pool()

    def terminate(self) -> None:
        """Stop the workers now, abandoning the assignments they run."""
        if self._pool is not None:
            # ProcessPoolExecutor has no public way to stop busy workers before Python 3.14
            for process in list(self._pool._processes.values()):
                process.terminate()

    def __exit__(self, kind, *exc) -> None:
        if kind is not None:
            self.terminate()
        self.close()


class DaskExecutor(Executor):
    """Submits assignments to a ``dask.distributed`` cluster: the scheduler at ``address``, or a
    ``LocalCluster`` of ``workers`` single-threaded worker processes on loopback when none is given.

    The workload source travels once: a pickled workload is scattered to every worker; a built-in
    name is passed with each task and built once per worker process.
    """

    name = "dask"

    def __init__(
        self,
        source: WorkloadSource,
        evaluation: Evaluation,
        address: str | None = None,
        workers: int | None = None,
    ):
        from distributed import Client, LocalCluster

        self.cluster = None
        if address is None:
            self.cluster = LocalCluster(
                n_workers=workers or os.cpu_count() or 1,
                threads_per_worker=1,
                processes=True,
                host=LOOPBACK,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            try:
                self.client = Client(self.cluster)
            except BaseException:
                self.cluster.close()
                raise
        else:
            try:
                self.client = Client(address, timeout="10s")
            except OSError as err:
                raise DcaccelError(f"cannot reach the Dask scheduler at {address}: {err}") from None
        self.evaluation = evaluation
        self.source = source
        self._source_argument = None

    def _source(self):
        """The source as a task argument: a scattered future when it carries a workload, else itself."""
        if self._source_argument is None:
            if self.source.workload is None:
                self._source_argument = self.source
            else:
                self._source_argument = self.client.scatter(self.source, broadcast=True, hash=False)
        return self._source_argument

    def map(self, assignments: Sequence[Assignment], evaluation: Evaluation | None = None) -> Iterator[Outcome]:
        from distributed import as_completed

        source = self._source()
        evaluation = self.evaluation if evaluation is None else evaluation
        futures = {
            self.client.submit(_evaluate_source, source, evaluation, assignment, pure=False): assignment
            for assignment in assignments
        }
        try:
            for future in as_completed(futures):
                assignment = futures[future]
                try:
                    outcome = future.result()
                except Exception as err:  # a worker lost more often than allowed, or a lost dependency
                    outcome = Outcome(assignment, failure=failure_of(assignment, err))
                yield outcome
        finally:
            self.client.cancel(list(futures))

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def make_executor(
    kind: str,
    workload: Workload,
    source: WorkloadSource,
    evaluation: Evaluation,
    address: str | None = None,
    workers: int | None = None,
) -> Executor:
    """The executor named ``kind`` (one of :data:`EXECUTORS`) for ``workload``.

    ``address`` (a Dask scheduler, e.g. ``tcp://10.0.0.5:8786``) applies to ``"dask"`` only;
    ``workers`` is the size of the process pool or of the local Dask cluster.
    """
    check_executor(kind, address, workers)
    if kind == "local":
        return LocalExecutor(workload, evaluation)
    if kind == "process":
        return ProcessExecutor(source, evaluation, workers)
    return DaskExecutor(source, evaluation, address, workers)


def check_executor(kind: str, address: str | None = None, workers: int | None = None) -> None:
    """Raise :class:`DcaccelError` for an unknown executor, an address without Dask, or no workers."""
    if kind not in EXECUTORS:
        raise DcaccelError(f"unknown executor '{kind}' (expected one of {', '.join(EXECUTORS)})")
    if address is not None and kind != "dask":
        raise DcaccelError(f"address {address!r} needs executor 'dask', not '{kind}'")
    if workers is not None and workers < 1:
        raise DcaccelError(f"workers must be positive, got {workers}")
    most = MAX_WORKERS_PER_CORE * (os.cpu_count() or 1)
    if workers is not None and workers > most:
        raise DcaccelError(
            f"workers {workers}: at most {most} here ({MAX_WORKERS_PER_CORE} per core, each loads the model)"
        )
