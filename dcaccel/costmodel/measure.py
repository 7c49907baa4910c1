"""Measuring a lowered program on this machine: one row per (program, sizes, step) with its time and features.

The program is compiled with a nanosecond timer of :mod:`dcaccel.costmodel.timer` on every top-level map
and every top-level copy (the calling thread's CPU time when the program runs on one thread, which the load
of a shared machine does not inflate; else the wall clock, as a thread's CPU time misses OpenMP's other
threads: :func:`choose_clock`), then called ``warmup + repeat`` times directly (the compiled program: no
re-hashing of the SDFG per call, which costs far more than a small program runs). DaCe keeps every event
of every call in one report written when the program is finalised (``report_each_invocation`` off: one
file per measurement, not one per call named by the millisecond, where fast calls overwrote each other);
the report is read and deleted. A step's time is summarised by its median over the repeats (preemption on
a shared machine makes outliers of 10x), with the 10th and 90th percentiles, the minimum and the count.

Every process a measurement times in keeps the memory a program frees for its next call (:mod:`dcaccel.costmodel.heap`),
so a step's time is not that of faulting in the pages of its transients afresh on every call.

Rows carry their provenance: dcaccel's and DaCe's versions, the workload's fingerprint and sizes, the
assignment of implementations, the machine, the OpenMP threads of the run, the clock that timed it and the
heap.
"""

from __future__ import annotations

import copy as copying
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, replace
from pathlib import Path

import dace
import numpy as np
from dace.codegen.compiled_sdfg import CompiledSDFG
from dace.codegen.targets import cpp
from dace.libraries.standard.nodes.copy import CopyLibraryNode, select_copy_implementation
from dace.sdfg import infer_types
from dace.transformation.passes.insert_explicit_copies import InsertExplicitCopies

import dcaccel
from dcaccel.costmodel.features import StepPlace, program_context, step_features, step_tokens
from dcaccel.costmodel.heap import HEAPS, PER_CALL, keep_freed_memory
from dcaccel.costmodel.timer import CLOCKS, WALL_EVENT
from dcaccel.dag.extract import origins_of
from dcaccel.dag.scopes import Copy, LoweredProgram, TaskScope, read_program
from dcaccel.dag.task import TaskInfo
from dcaccel.errors import DcaccelError
from dcaccel.frontend.execution import compiled, program_arguments, program_fingerprint, program_key

#: Calls before the timed ones (first-touch page faults, cold caches).
WARMUP = 1
#: The most timed calls of one measurement (each call runs the whole program).
MAX_REPEAT = 10_000
#: The most worker processes of one measurement.
MAX_PROCESSES = 64
#: A step the thread CPU timer times is timed by its wall clock when that reads a median under this many
#: nanoseconds: the CPU clock's read is a system call that adds about 0.9 µs to every step (docs/costmodel.md,
#: "Measuring"), while preemption by other processes (what the CPU clock is for) hardly reaches a step so short.
WALL_BELOW_NS = 20_000


@dataclass(frozen=True)
class Timing:
    """A step's time over the repeats of a measurement, in nanoseconds."""

    median_ns: float
    p10_ns: float
    p90_ns: float
    min_ns: float
    n: int

    @classmethod
    def of(cls, samples: np.ndarray) -> Timing:
        samples = np.asarray(samples, dtype=np.float64)
        p10, median, p90 = np.percentile(samples, [10, 50, 90])
        return cls(float(median), float(p10), float(p90), float(samples.min()), int(samples.size))


@dataclass(frozen=True)
class Provenance:
    """Where and on what a measurement was taken."""

    dcaccel_version: str
    dace_version: str
    fingerprint: str
    machine: str
    threads: int
    clock: str = "wall"  # a key of timer.CLOCKS; rows of before the thread CPU clock were timed by the wall clock
    heap: str = PER_CALL  # heap.STEADY: freed memory kept for reuse (costmodel/heap.py); rows of before: per-call


def run_key(program: str, sizes: Mapping[str, int], assignment: Mapping[str, str]) -> tuple[str, str, str]:
    """A measured program: the workload's name, its sizes and its assignment of implementations (in text)."""
    return program, json.dumps(dict(sizes), sort_keys=True), json.dumps(dict(assignment), sort_keys=True)


@dataclass(frozen=True)
class Row:
    """One measured step of one program: what it is, what the models read of it and how long it took."""

    program: str  # the workload's name
    family: str  # the workload family of the held-out protocol (dcaccel.costmodel.folds)
    assignment: dict[str, str]  # node name -> implementation
    sizes: dict[str, int]
    step: str  # the timer's event name (map/copy CFG STATE ID)
    label: str  # the map's label, or "SRC->DST" for a copy
    features: dict[str, float | str]
    tokens: list[str]
    timing: Timing
    provenance: Provenance
    analytic: float = field(default=0.0)  # the analytic model's time of the step: max(volume in, volume out)

    def run(self) -> tuple[str, str, str]:
        """The program the row is a step of: the workload at its sizes under one assignment."""
        return run_key(self.program, self.sizes, self.assignment)

    def key(self) -> tuple[str, str, str, str]:
        """The step in its program (:meth:`run` and the step): what two measurements of it share."""
        return (*self.run(), self.step)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping) -> Row:
        """A row read back from :meth:`to_json`'s dictionary; a missing or mistyped field, a time that is not a
        finite number >= 0, a feature that is not finite and sizes or tokens of the wrong kind are refused in
        one line."""
        try:
            row = cls(
                program=str(data["program"]),
                family=str(data["family"]),
                assignment={str(k): str(v) for k, v in data["assignment"].items()},
                sizes={str(k): int(v) for k, v in data["sizes"].items()},
                step=str(data["step"]),
                label=str(data["label"]),
                features={str(k): v if isinstance(v, str) else float(v) for k, v in data["features"].items()},
                tokens=[str(t) for t in data["tokens"]],
                timing=Timing(
                    **{k: float(v) for k, v in data["timing"].items() if k != "n"}, n=int(data["timing"]["n"])
                ),
                provenance=_provenance(data["provenance"]),
                analytic=float(data.get("analytic", 0.0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise DcaccelError(f"costmodel row: field {err} missing or of the wrong type") from None
        row._check(data)
        return row

    def _check(self, data: Mapping) -> None:
        """Refuse what the constructor's conversions would silently accept or reinterpret."""
        for name, value in asdict(self.timing).items():
            if not 0 <= value < math.inf or (name == "n" and value < 1):
                least = "an integer >= 1" if name == "n" else "a finite number >= 0"
                raise DcaccelError(f"costmodel row {self.label}: timing.{name} is {value}, expected {least}")
        for name, value in self.features.items():
            if not isinstance(value, str) and not math.isfinite(value):
                raise DcaccelError(f"costmodel row {self.label}: feature {name} is {value}, expected a finite number")
        for name, value in data["sizes"].items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise DcaccelError(f"costmodel row {self.label}: size {name} is {value!r}, expected an integer")
        if self.provenance.clock not in CLOCKS:
            raise DcaccelError(
                f"costmodel row {self.label}: clock {self.provenance.clock!r}, expected one of {', '.join(CLOCKS)}"
            )
        if self.provenance.heap not in HEAPS:
            raise DcaccelError(
                f"costmodel row {self.label}: heap {self.provenance.heap!r}, expected one of {', '.join(HEAPS)}"
            )
        if not isinstance(data["tokens"], list):
            raise DcaccelError(f"costmodel row {self.label}: tokens must be a list of strings")


def _provenance(data: Mapping) -> Provenance:
    """A row's provenance read back: every field required but those with a default (``clock``, ``heap``)."""
    fields = Provenance.__dataclass_fields__.values()
    return Provenance(**{f.name: data[f.name] for f in fields if f.name in data or f.default is MISSING})


#: The provenance of a row that was not measured (a step whose time is only predicted).
PROVENANCE_UNMEASURED = Provenance(dcaccel.__version__, dace.__version__, "", "", 0)


def threads() -> int:
    """The OpenMP threads a compiled program runs with (``OMP_NUM_THREADS``, else the CPUs)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else os.cpu_count() or 1


def choose_clock(clock: str | None = None) -> str:
    """The clock a measurement is timed by: ``clock``, by default the calling thread's CPU time when the
    program runs on one thread (:func:`threads`), else the wall clock; the thread's clock on more than one
    thread is refused in one line (it misses the other threads' work)."""
    chosen = clock or ("thread-cpu" if threads() == 1 else "wall")
    if chosen not in CLOCKS:
        raise DcaccelError(f"measure: clock {chosen!r}, expected one of {', '.join(CLOCKS)}")
    if chosen == "thread-cpu" and threads() != 1:
        raise DcaccelError(f"measure: the thread-cpu clock misses OpenMP's other threads ({threads()}): use wall")
    return chosen


def instrument(sdfg: dace.SDFG, clock: str = "wall") -> tuple[dict[str, str], dict[tuple[str, str, str], list[str]]]:
    """Put the timer of ``clock`` (:data:`~dcaccel.costmodel.timer.CLOCKS`) on every top-level map of
    ``sdfg`` and on every top-level copy, in place.

    A map is relabelled ``tN``. A copy is made what code generation would make of it (DaCe's explicit copy
    node, expanded): a tasklet, labelled and timed ``cN``, or a nested SDFG whose maps are. Returns the
    event per map entry guid, and the events of the copies per (state label, source, destination).
    """
    maps, copies = {}, {}
    for state in sdfg.states():
        for node in state.nodes():
            if isinstance(node, dace.nodes.MapEntry) and state.scope_dict()[node] is None:
                maps[node.guid] = node.map.label = f"t{len(maps)}"
                node.map.instrument = CLOCKS[clock]
    for state, node, key in list(_explicit_copies(sdfg)):
        event = f"c{sum(map(len, copies.values()))}"
        copies.setdefault(key, []).append(event)
        target = state.out_edges(node)[0].dst
        node.expand(state.sdfg, state)
        made = next(e.src for e in state.in_edges(target) if e.data.data == target.data)
        timed = [made] if isinstance(made, dace.nodes.Tasklet) else _top_level_maps(made.sdfg)
        for item in timed:
            item.label = event  # a map entry's label is its map's
            item.instrument = CLOCKS[clock]
    return maps, copies


def _explicit_copies(sdfg: dace.SDFG):
    """The top-level copies of ``sdfg`` made DaCe's explicit copy nodes (in place), as code generation makes
    them: per copy its state, its node and its key (state label, source, destination)."""
    InsertExplicitCopies().apply_pass(sdfg, {})
    infer_types.infer_connector_types(sdfg)
    for state in sdfg.states():
        for node in [n for n in state.nodes() if isinstance(n, CopyLibraryNode) and state.scope_dict()[n] is None]:
            (source,), (target,) = state.in_edges(node), state.out_edges(node)
            yield state, node, (state.label, source.src.data, target.dst.data)


def copy_implementations(sdfg: dace.SDFG) -> dict[tuple[str, str, str], list[str]]:
    """What code generation makes of each top-level copy of ``sdfg`` (made DaCe's explicit copy nodes in
    place: pass a copy): the implementation DaCe's explicit copy node chooses (``MemcpyCPU``,
    ``MappedTasklet``, ``Tasklet``), per (state label, source, destination) in the order :func:`instrument`
    times them."""
    made: dict[tuple[str, str, str], list[str]] = {}
    for state, node, key in _explicit_copies(sdfg):
        chosen = node.implementation
        made.setdefault(key, []).append(select_copy_implementation(node, state) if chosen in (None, "Auto") else chosen)
    return made


def atomic_containers(sdfg: dace.SDFG) -> dict[str, frozenset[str]]:
    """Per top-level map of ``sdfg`` (by its entry's guid), the access nodes' containers its scope writes
    atomically in the code DaCe generates, read with the schedules code generation gives, set on ``sdfg`` in
    place (pass a copy; a map nested in a parallel one runs sequentially): the writes with write-conflict
    resolution that DaCe's ``is_write_conflicted`` says conflict, a tasklet's, a scope-local container's or a
    nested SDFG's, each named by the access node its path ends at (a scope-local one too; a view by itself).
    A nested SDFG's own states are not read: an update in it whose edge out of the SDFG has no write-conflict
    resolution counts none."""
    infer_types.set_default_schedule_and_storage_types(sdfg, None)
    atomic = {}
    for state, entry in _top_level_entries(sdfg):
        ends = (
            state.memlet_path(edge)[-1].dst
            for edge in state.scope_subgraph(entry).edges()
            if cpp.is_write_conflicted(state, edge)
        )
        atomic[entry.guid] = frozenset(end.data for end in ends if isinstance(end, dace.nodes.AccessNode))
    return atomic


def _top_level_entries(sdfg: dace.SDFG):
    """The entries of the maps at the top level of the states of ``sdfg``, each with its state."""
    for state in sdfg.states():
        scopes = state.scope_dict()
        yield from ((state, n) for n in state.nodes() if isinstance(n, dace.nodes.MapEntry) and scopes[n] is None)


def _top_level_maps(sdfg: dace.SDFG) -> list:
    """The maps at the top level of the states of ``sdfg`` (a nested SDFG a copy expanded to)."""
    return [entry.map for _, entry in _top_level_entries(sdfg)]


def run_timed(program, arguments: Mapping, repeat: int, progress: Callable[[], None] | None = None) -> dict:
    """Call the instrumented ``program`` ``WARMUP + repeat`` times in this process; the nanoseconds of each
    timed event per call after the warm-up, by event name."""
    perf = Path(program.sdfg.build_folder) / "perf"
    before = _reports(perf)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Return value .* is passed as a regular argument")
        for _ in range(WARMUP + repeat):
            program(**arguments)
            if progress is not None:
                progress()
    program.finalize()  # writes the one report of all calls
    return _samples(_take_report(program.sdfg, perf, before), repeat)


def run_timed_in_processes(
    programs: Sequence[tuple[CompiledSDFG, Mapping]],
    repeat: int,
    processes: int,
    progress: Callable[[], None] | None,
    heap: str,
) -> list[dict]:
    """Time every (program, arguments) of ``programs`` in ``processes`` fresh worker processes, one after the
    other (:mod:`dcaccel.costmodel.worker`: each calls every program ``WARMUP + repeat`` times, in order, with
    the ``heap`` of :mod:`dcaccel.costmodel.heap`: a steady one, or the C library's as it is); per
    program, the nanoseconds of each timed event per call after the warm-ups, the calls of all workers
    pooled. The programs must be compiled (this process does not call them) and run no host task (its
    onnxruntime session lives in this process)."""
    with tempfile.TemporaryDirectory(prefix="dcaccel-measure-") as scratch:
        entries = [
            _manifest_entry(program, arguments, Path(scratch) / f"{k}.npz")
            for k, (program, arguments) in enumerate(programs)
        ]
        manifest = Path(scratch) / "manifest.json"
        manifest.write_text(json.dumps({"calls": WARMUP + repeat, "heap": heap, "programs": entries}))
        pooled: list[dict[str, list]] = [{} for _ in programs]
        for _ in range(processes):
            perfs = [Path(program.sdfg.build_folder) / "perf" for program, _ in programs]
            before = [_reports(perf) for perf in perfs]
            done = subprocess.run(
                [sys.executable, "-m", "dcaccel.costmodel.worker", str(manifest)], capture_output=True, text=True
            )
            if done.returncode != 0:
                tail = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
                raise DcaccelError(f"measure: a timing process failed: {tail[0]}")
            for (program, _), perf, seen, samples in zip(programs, perfs, before, pooled, strict=True):
                for name, values in _samples(_take_report(program.sdfg, perf, seen), repeat).items():
                    samples.setdefault(name, []).extend(values)
                for _ in range((WARMUP + repeat) * (progress is not None)):
                    progress()
    return [{name: np.array(values) for name, values in samples.items()} for samples in pooled]


def _manifest_entry(program: CompiledSDFG, arguments: Mapping, path: Path) -> dict:
    """What a worker needs to call ``program``: its build folder, its array arguments (written to ``path``) and
    its scalar ones; a host task's callback cannot cross to another process and is refused in one line."""
    callbacks = [name for name, value in arguments.items() if callable(value)]
    if callbacks:
        raise DcaccelError(
            f"measure {program.sdfg.name}: host tasks ({', '.join(callbacks)}) run in this process only: "
            "measure it with one process"
        )
    np.savez(path, **{name: value for name, value in arguments.items() if isinstance(value, np.ndarray)})
    scalars = {name: value for name, value in arguments.items() if not isinstance(value, np.ndarray)}
    return {"folder": str(program.sdfg.build_folder), "arrays": str(path), "scalars": scalars}


def _reports(perf: Path) -> set[Path]:
    """The timer reports in ``perf`` now."""
    return set(perf.glob("report-*.json")) if perf.is_dir() else set()


def _take_report(sdfg: dace.SDFG, perf: Path, before: set[Path]) -> dict:
    """The one timer report written to ``perf`` since ``before``, read and deleted."""
    written = sorted(_reports(perf) - before)
    if len(written) != 1:
        raise DcaccelError(f"measure {sdfg.name}: expected one timer report in {perf}, found {len(written)}")
    report = json.loads(written[0].read_text())
    written[0].unlink()
    return report


def _samples(report: dict, repeat: int) -> dict[str, np.ndarray]:
    """The nanoseconds of each dcaccel event of ``report`` per call, the warm-up calls' left out."""
    samples: dict[str, list[float]] = {}
    for event in sorted(report["traceEvents"], key=lambda e: e["ts"]):
        if event.get("cat") == "dcaccel":
            samples.setdefault(event["name"], []).append(float(event["dur"]))
    return {
        name: np.array(values[len(values) - repeat * (len(values) // (WARMUP + repeat)) :])
        for name, values in samples.items()
    }


def measure(
    lowered,
    *,
    family: str,
    repeat: int = 20,
    processes: int = 1,
    seed: int = 0,
    clock: str | None = None,
    progress: Callable[[], None] | None = None,
) -> list[Row]:
    """Measure the steps of ``lowered`` (a :class:`~dcaccel.transforms.lower.LoweredWorkload` of a workload
    with every size given) over ``repeat`` timed calls in each of ``processes`` processes (1: this one; more:
    fresh worker processes, the samples pooled), timed by ``clock`` (:func:`choose_clock`); one row per
    top-level map and per top-level copy."""
    return measure_programs(
        [lowered], family=family, repeat=repeat, processes=processes, seed=seed, clock=clock, progress=progress
    )[0]


def measure_programs(
    lowereds: Sequence,
    *,
    family: str,
    repeat: int = 20,
    processes: int = 1,
    seed: int = 0,
    clock: str | None = None,
    progress: Callable[[], None] | None = None,
) -> list[list[Row]]:
    """:func:`measure` of each of ``lowereds``, the rows of each; with more than one process, every worker
    process times all the programs in turn (one process start per worker, not per program)."""
    if not 1 <= repeat <= MAX_REPEAT:
        raise DcaccelError(f"measure: repeat must be 1 to {MAX_REPEAT}, got {repeat}")
    if not 1 <= processes <= MAX_PROCESSES:
        raise DcaccelError(f"measure: processes must be 1 to {MAX_PROCESSES}, got {processes}")
    clock = choose_clock(clock)
    prepared = [timed_program(lowered, seed, clock) for lowered in lowereds]
    heap = keep_freed_memory()
    if processes == 1:
        samples = [run_timed(program, arguments, repeat, progress) for _, _, program, arguments in prepared]
    else:
        calls = [(program, arguments) for _, _, program, arguments in prepared]
        samples = run_timed_in_processes(calls, repeat, processes, progress, heap)
    return [
        _rows(lowered, symbols, events, timed, family, clock, heap)
        for (lowered, (symbols, events), _, _), timed in zip(prepared, samples, strict=True)
    ]


def timed_program(lowered, seed: int, clock: str) -> tuple:
    """``lowered`` with its sizes and timed events, its program compiled with the timers of ``clock`` and its
    arguments (of inputs drawn with ``seed``): what :func:`run_timed` calls."""
    workload = lowered.workload
    inputs = workload.random_inputs(seed)
    symbols = workload.bind_symbols(inputs)
    sdfg, events = _timed_steps(lowered, symbols, clock)
    with dace.config.set_temporary("instrumentation", "report_each_invocation", value=False):
        program = compiled(sdfg)
    return lowered, (symbols, events), program, program_arguments(program, workload, inputs)


def _rows(
    lowered, symbols: Mapping[str, int], events: list, samples: dict, family: str, clock: str, heap: str
) -> list[Row]:
    """The rows of ``lowered``'s timed ``events`` from their ``samples``, measured with ``heap``."""
    workload = lowered.workload
    provenance = Provenance(
        dcaccel_version=dcaccel.__version__,
        dace_version=dace.__version__,
        fingerprint=program_fingerprint(workload.sdfg),
        machine=f"{platform.node()} {platform.machine()} {platform.processor() or platform.system()}",
        threads=threads(),
        clock=clock,
        heap=heap,
    )
    return [
        Row(
            program=workload.name,
            family=family,
            assignment=dict(sorted(lowered.implementations.items())),
            sizes=dict(sorted(symbols.items())),
            step=event,
            label=label,
            features=features,
            tokens=tokens,
            timing=timing,
            provenance=replace(provenance, clock=timed_by),
            analytic=float(features["work"]),
        )
        for event, label, features, tokens in events
        if event in samples  # a copy DaCe generates without the copy hooks (e.g. a view) is not timed
        for timing, timed_by in [_timing(samples, event, clock)]
    ]


def _timing(samples: Mapping[str, np.ndarray], event: str, clock: str) -> tuple[Timing, str]:
    """The timing of ``event`` and the clock it is read from: ``clock``'s, or the wall clock's the thread CPU
    timer reads inside its own when its median is under :data:`WALL_BELOW_NS`."""
    wall = samples.get(event + WALL_EVENT)
    if wall is not None and np.median(wall) < WALL_BELOW_NS:
        return Timing.of(wall), "wall"
    return Timing.of(samples[event]), clock


def _timed_steps(
    lowered, symbols: Mapping[str, int], clock: str = "wall"
) -> tuple[dace.SDFG, list[tuple[str, str, dict, list[str]]]]:
    """A copy of ``lowered``'s SDFG with the timers of ``clock`` (:func:`instrument`), and per step they time
    its event, label, features and tokens (read before the timers relabel maps and expand copies)."""
    sdfg = copying.deepcopy(lowered.sdfg)
    steps = read_steps(lowered, sdfg, symbols)
    places = step_places(sdfg, steps, symbols)
    maps, copies = instrument(sdfg, clock)
    # a build folder of its own (DaCe's is the program's name): the assignments of one workload share a name
    sdfg.name = f"{sdfg.name}_timed_{program_key(sdfg)[:12]}"
    return sdfg, list(_events(steps, places, maps, copies))


def _events(steps: LoweredProgram, places: list, maps: dict, copies: dict):
    """Per step that :func:`instrument` timed: its event, label, features and tokens."""
    for step, (place, features, tokens), event in zip(steps.steps, places, _paired(steps, copies), strict=True):
        if isinstance(step, TaskScope) and place.scope is not None:
            yield maps[place.scope.guid], step.label, features, tokens
        elif event is not None:
            yield event, f"{step.src.data}->{step.dst.data}", features, tokens


def _paired(program: LoweredProgram, per_copy: Mapping[tuple[str, str, str], list]) -> list:
    """Per step of ``program``: for a copy, the next item of ``per_copy`` under its (state label, source,
    destination), the copies of one key taken in program order as :func:`_explicit_copies` meets them; None
    for a map, and for a copy code generation makes none of (a view)."""
    pending = {key: list(items) for key, items in per_copy.items()}
    return [
        items.pop(0)
        if isinstance(step, Copy) and (items := pending.get((step.state, step.src.data, step.dst.data)))
        else None
        for step in program.steps
    ]


def refeature(lowered, rows: list[Row], seed: int = 0) -> list[Row]:
    """``rows`` measured of ``lowered`` with their features, tokens and analytic time read again from the
    program (nothing compiled or run): a dataset follows a change of :mod:`~dcaccel.costmodel.features`
    without measuring again. A row of another program, or a step the program does not have under the
    same label, is refused in one line."""
    workload = lowered.workload
    fingerprint = program_fingerprint(workload.sdfg)
    symbols = workload.bind_symbols(workload.random_inputs(seed))
    _, events = _timed_steps(lowered, symbols)
    read = {event: (label, features, tokens) for event, label, features, tokens in events}
    renewed = []
    for row in rows:
        if row.provenance.fingerprint != fingerprint or row.sizes != dict(sorted(symbols.items())):
            raise DcaccelError(f"costmodel refeature {row.program} {row.step}: measured of another program or sizes")
        label, features, tokens = read.get(row.step, (None, None, None))
        if label != row.label:
            raise DcaccelError(f"costmodel refeature {row.program} {row.step}: the program has no step {row.label}")
        renewed.append(replace(row, features=features, tokens=tokens, analytic=float(features["work"])))
    return renewed


def read_steps(lowered, sdfg: dace.SDFG, symbols: Mapping[str, int]) -> LoweredProgram:
    """The steps of ``sdfg`` (a copy of ``lowered``'s), each map's record carrying its origin and its entry's guid."""
    origins = origins_of(lowered)
    sources = {
        node.guid: origins.get(node.guid, TaskInfo()).derive(guid=node.guid)
        for state in sdfg.states()
        for node in state.nodes()
        if isinstance(node, dace.nodes.MapEntry) and state.scope_dict()[node] is None
    }
    return read_program(sdfg, symbols, sources=sources)


def step_places(sdfg: dace.SDFG, program: LoweredProgram, symbols: Mapping[str, int]) -> list:
    """Per step of ``program`` (read from ``sdfg``): where it is, its features (with those of the program its
    maps and copies make up: :func:`~dcaccel.costmodel.features.program_context`) and its tokens; (None,
    None, None) for a step that is neither a map nor a copy code generation makes (a tasklet or an opaque
    node at the top level, a view)."""
    states = {state.label: state for state in sdfg.states()}
    entries = {node.guid: node for state in sdfg.states() for node in state.nodes()}
    generated = copying.deepcopy(sdfg)  # read as code generation makes it: copies explicit, schedules set
    implementations = copy_implementations(generated)
    atomic = atomic_containers(generated)
    places = []
    for step, made in zip(program.steps, _paired(program, implementations), strict=True):
        scope = entries.get(step.info.guid) if isinstance(step, TaskScope) else None
        updated = atomic.get(scope.guid, frozenset()) if isinstance(scope, dace.nodes.MapEntry) else frozenset()
        place = StepPlace(sdfg, states[step.state], scope, program.containers, symbols, made, updated)
        if not isinstance(scope, dace.nodes.MapEntry) and made is None:
            places.append((replace(place, scope=None), None, None))
            continue
        places.append((place, step_features(step, place), step_tokens(step, place)))
    described = [features for _, features, _ in places if features is not None]
    context = program_context(described)
    for features in described:
        features.update(context)
    return places


def write_rows(rows: list[Row], path: str | os.PathLike, append: bool = True) -> None:
    """Write ``rows`` as JSON lines to ``path`` (appended to what it holds unless ``append`` is False)."""
    with open(path, "a" if append else "w", encoding="utf-8") as stream:
        for row in rows:
            stream.write(json.dumps(row.to_json(), sort_keys=True) + "\n")


def combine_passes(passes: Sequence[Sequence[Row]]) -> list[Row]:
    """One row per step of ``passes``, measurements of the same programs taken one after another (a pass
    each), in the first pass's order: its median, p10 and p90 the median of the passes' (the mean of two),
    its least time the least, its count the sum; features, tokens and provenance the first pass's. What
    drifts over the minutes a measurement takes (the machine's other tenants) then weighs on every step
    alike rather than on the family measured when it came. Passes of other steps, a step twice in a pass and
    a step read with other features in one are refused in one line."""
    if not passes:
        raise DcaccelError("costmodel combine: no pass given")
    keyed = []
    for number, rows in enumerate(passes, start=1):
        steps = {row.key(): row for row in rows}
        if len(steps) != len(rows):
            raise DcaccelError(f"costmodel combine: pass {number} measures a step twice (appended to twice?)")
        if keyed and steps.keys() != keyed[0].keys():
            step = next(iter(steps.keys() ^ keyed[0].keys()))
            raise DcaccelError(f"costmodel combine: passes 1 and {number} differ in step {step[3]} of {step[:3]}")
        keyed.append(steps)
    combined = []
    for row in passes[0]:
        key = row.key()
        same = [rows[key] for rows in keyed]
        if any(other.features != row.features or other.tokens != row.tokens for other in same):
            raise DcaccelError(f"costmodel combine: step {row.step} of {key[:3]} was read with other features")
        timings = [other.timing for other in same]
        timing = Timing(
            *(float(np.median([getattr(t, name) for t in timings])) for name in ("median_ns", "p10_ns", "p90_ns")),
            min(t.min_ns for t in timings),
            sum(t.n for t in timings),
        )
        combined.append(replace(row, timing=timing))
    return combined


#: Largest rows file read (a shipped set is a few MB).
MAX_ROWS_BYTES = 256 * 2**20


def read_rows(path: str | os.PathLike) -> list[Row]:
    """The rows of a JSON-lines file written by :func:`write_rows`; a bad line is refused naming its number."""
    path = Path(path)
    if not path.is_file():
        raise DcaccelError(f"costmodel rows {path}: no such file")
    if path.stat().st_size > MAX_ROWS_BYTES:
        raise DcaccelError(f"costmodel rows {path}: larger than {MAX_ROWS_BYTES} bytes")
    rows = []
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                rows.append(Row.from_json(json.loads(line)))
            except (json.JSONDecodeError, DcaccelError) as err:
                raise DcaccelError(f"costmodel rows {path}:{number}: {err}") from None
    return rows
