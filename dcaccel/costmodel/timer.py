"""A nanosecond timer for DaCe's generated code: one event per run of a top-level map and of a top-level copy.

DaCe's own ``Timer`` instrumentation counts microseconds (a task under 2 µs reads 0) and times maps but
not copies between containers. :data:`NANOSECOND_TIMER` is an instrumentation type of its own whose
provider reads ``std::chrono::steady_clock`` in nanoseconds around every map scope and every tasklet that
carries it. A copy between two containers (a DAG edge, not a map) is timed as what code generation makes
of it: a tasklet (``memcpy``) or a nested SDFG whose maps carry the timer (:mod:`dcaccel.costmodel.measure`
expands the copies before compiling). Events go to DaCe's report (``__state->report``) with
their times in nanoseconds, named by the label of the map or tasklet timed (the caller gives every
timed scope a short identifier of its own as its label: it names a C++ variable and fits DaCe's 63
characters of an event name).

The instrumentation type is part of the SDFG (``map.instrument``), so the compile cache of
:func:`dcaccel.frontend.execution.program_key` keeps an instrumented build apart from an uninstrumented one.
"""

from dace import dtypes, registry
from dace.codegen.instrumentation.provider import InstrumentationProvider
from dace.sdfg import nodes

#: The instrumentation type of the nanosecond timer (registered once per process).
NANOSECOND_TIMER = getattr(dtypes.InstrumentationType, "NanosecondTimer", None) or (
    dtypes.InstrumentationType.register("NanosecondTimer")
)


@registry.autoregister_params(type=NANOSECOND_TIMER)
class NanosecondTimerProvider(InstrumentationProvider):
    """Emits ``steady_clock`` reads in nanoseconds around instrumented maps and tasklets, named by their labels."""

    def writes_to_report(self) -> bool:
        return True

    def on_sdfg_begin(self, sdfg, local_stream, global_stream, codegen):
        global_stream.write("#include <chrono>")
        sdfg.append_global_code("\n#include <chrono>", None)

    @staticmethod
    def _begin(stream, label: str) -> None:
        stream.write(f"auto __dcaccel_t0_{label} = std::chrono::steady_clock::now();")

    @staticmethod
    def _end(stream, label: str, cfg_id: int, state_id: int, element_id: int) -> None:
        stream.write(
            f"""auto __dcaccel_t1_{label} = std::chrono::steady_clock::now();
__state->report.add_completion("{label}", "dcaccel",
    std::chrono::duration_cast<std::chrono::nanoseconds>(__dcaccel_t0_{label}.time_since_epoch()).count(),
    std::chrono::duration_cast<std::chrono::nanoseconds>(__dcaccel_t1_{label}.time_since_epoch()).count(),
    {cfg_id}, {state_id}, {element_id});"""
        )

    def on_scope_entry(self, sdfg, cfg, state, node, outer_stream, inner_stream, global_stream):
        if isinstance(node, nodes.MapEntry) and node.map.instrument == NANOSECOND_TIMER:
            self._begin(outer_stream, node.map.label)

    def on_scope_exit(self, sdfg, cfg, state, node, outer_stream, inner_stream, global_stream):
        if isinstance(node, nodes.MapExit) and node.map.instrument == NANOSECOND_TIMER:
            entry = state.entry_node(node)
            self._end(outer_stream, node.map.label, cfg.cfg_id, state.block_id, state.node_id(entry))

    def on_node_begin(self, sdfg, cfg, state, node, outer_stream, inner_stream, global_stream):
        if isinstance(node, nodes.Tasklet) and node.instrument == NANOSECOND_TIMER:
            self._begin(outer_stream, node.label)

    def on_node_end(self, sdfg, cfg, state, node, outer_stream, inner_stream, global_stream):
        if isinstance(node, nodes.Tasklet) and node.instrument == NANOSECOND_TIMER:
            self._end(outer_stream, node.label, cfg.cfg_id, state.block_id, state.node_id(node))
