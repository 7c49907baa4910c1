"""Nanosecond timers for DaCe's generated code: one event per run of a top-level map and of a top-level copy.

DaCe's own ``Timer`` instrumentation counts microseconds (a task under 2 µs reads 0) and times maps but
not copies between containers. dcaccel has two instrumentation types of its own, both made by one
provider (:class:`ClockTimerProvider`, parametrised by its clocks) around every map scope and every
tasklet that carries the type, in nanoseconds:

- :data:`NANOSECOND_TIMER` reads ``std::chrono::steady_clock``: wall time, which on a shared machine grows
  with the load (a step longer than a scheduler time slice is preempted and waits);
- :data:`THREAD_CPU_TIMER` reads ``clock_gettime(CLOCK_THREAD_CPUTIME_ID)``, the calling thread's CPU time,
  which a competing process does not inflate but which misses the work of any other thread (an OpenMP
  map on more than one thread); its read is a system call, not a vDSO read, and adds about 0.9 µs to
  every step on this machine (docs/costmodel.md, "Measuring"). So it also reads the steady clock inside
  its own reads, as a second event (the step's name and :data:`WALL_EVENT`): a short step is read from
  that (:data:`dcaccel.costmodel.measure.WALL_BELOW_NS`), a long one from the CPU time.

A copy between two containers (a DAG edge, not a map) is timed as what code generation makes of it: a
tasklet (``memcpy``) or a nested SDFG whose maps carry the timer (:mod:`dcaccel.costmodel.measure`
expands the copies before compiling). Events go to DaCe's report (``__state->report``) with their times
in nanoseconds of their clock, named by the label of the map or tasklet timed (the caller gives every
timed scope a short identifier of its own as its label: it names a C++ variable and fits DaCe's 63
characters of an event name).

The instrumentation type is part of the SDFG (``map.instrument``), so the compile cache of
:func:`dcaccel.frontend.execution.program_key` keeps an instrumented build apart from an uninstrumented one,
and a build timed by one clock apart from one timed by the other.
"""

from collections.abc import Callable

from dace import dtypes, registry
from dace.codegen.instrumentation.provider import InstrumentationProvider
from dace.sdfg import nodes


def _instrumentation_type(name: str) -> dtypes.InstrumentationType:
    """The instrumentation type ``name``, registered once per process."""
    return getattr(dtypes.InstrumentationType, name, None) or dtypes.InstrumentationType.register(name)


#: The wall-clock timer (``steady_clock``).
NANOSECOND_TIMER = _instrumentation_type("NanosecondTimer")
#: The timer of the calling thread's CPU time (``CLOCK_THREAD_CPUTIME_ID``).
THREAD_CPU_TIMER = _instrumentation_type("ThreadCPUTimer")


def _steady_read(variable: str) -> str:
    """C++ defining ``variable``: the wall clock (``steady_clock``) in nanoseconds."""
    return (
        f"unsigned long {variable} = std::chrono::duration_cast<std::chrono::nanoseconds>("
        "std::chrono::steady_clock::now().time_since_epoch()).count();"
    )


def _thread_cpu_read(variable: str) -> str:
    """C++ defining ``variable``: the calling thread's CPU time in nanoseconds."""
    return (
        f"timespec {variable}_ts; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &{variable}_ts);\n"
        f"unsigned long {variable} = {variable}_ts.tv_sec * 1000000000UL + {variable}_ts.tv_nsec;"
    )


#: What the thread CPU timer appends to a step's event name for its wall-clock event.
WALL_EVENT = "_wall"


class ClockTimerProvider(InstrumentationProvider):
    """Emits reads of clocks in nanoseconds around instrumented maps and tasklets, an event per clock named by
    the label of what is timed and the clock's suffix.

    A subclass names its instrumentation type and its ``clocks``: (event suffix, C++ that defines a variable
    with a read) from the outermost read to the innermost; a step's reads open in that order and close in
    the reverse, so an inner clock's event does not count the outer clock's reads."""

    instrumentation: dtypes.InstrumentationType
    clocks: tuple[tuple[str, Callable[[str], str]], ...]

    def writes_to_report(self) -> bool:
        return True

    def on_sdfg_begin(self, sdfg, local_stream, global_stream, codegen):
        for header in ("chrono", "time.h"):
            global_stream.write(f"#include <{header}>")
            sdfg.append_global_code(f"\n#include <{header}>", None)

    def _begin(self, stream, label: str) -> None:
        for suffix, read in self.clocks:
            stream.write(read(f"__dcaccel_t0_{label}{suffix}"))

    def _end(self, stream, label: str, cfg_id: int, state_id: int, element_id: int) -> None:
        for suffix, read in reversed(self.clocks):
            stream.write(read(f"__dcaccel_t1_{label}{suffix}"))
        for suffix, _ in self.clocks:
            stream.write(
                f"""__state->report.add_completion("{label}{suffix}", "dcaccel", __dcaccel_t0_{label}{suffix},
    __dcaccel_t1_{label}{suffix}, {cfg_id}, {state_id}, {element_id});"""
            )

    def on_scope_entry(self, sdfg, cfg, state, node, outer_stream, inner_stream, global_stream):
        if isinstance(node, nodes.MapEntry) and node.map.instrument == self.instrumentation:
            self._begin(outer_stream, node.map.label)

    def on_scope_exit(self, sdfg, cfg, state, node, outer_stream, inner_stream, global_stream):
        if isinstance(node, nodes.MapExit) and node.map.instrument == self.instrumentation:
            entry = state.entry_node(node)
            self._end(outer_stream, node.map.label, cfg.cfg_id, state.block_id, state.node_id(entry))

    def on_node_begin(self, sdfg, cfg, state, node, outer_stream, inner_stream, global_stream):
        if isinstance(node, nodes.Tasklet) and node.instrument == self.instrumentation:
            self._begin(outer_stream, node.label)

    def on_node_end(self, sdfg, cfg, state, node, outer_stream, inner_stream, global_stream):
        if isinstance(node, nodes.Tasklet) and node.instrument == self.instrumentation:
            self._end(outer_stream, node.label, cfg.cfg_id, state.block_id, state.node_id(node))


@registry.autoregister_params(type=NANOSECOND_TIMER)
class NanosecondTimerProvider(ClockTimerProvider):
    """The wall clock: one event per step."""

    instrumentation = NANOSECOND_TIMER
    clocks = (("", _steady_read),)


@registry.autoregister_params(type=THREAD_CPU_TIMER)
class ThreadCPUTimerProvider(ClockTimerProvider):
    """The calling thread's CPU time (the step's event), and inside its reads the wall clock (the step's
    event with :data:`WALL_EVENT` appended)."""

    instrumentation = THREAD_CPU_TIMER
    clocks = (("", _thread_cpu_read), (WALL_EVENT, _steady_read))


#: The clocks a measurement can be timed by, by the name a row's provenance records.
CLOCKS = {"wall": NANOSECOND_TIMER, "thread-cpu": THREAD_CPU_TIMER}
