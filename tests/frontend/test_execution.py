"""The compile cache: equal SDFGs share one program; an SDFG that differs in anything that changes the
generated code (instrumentation, a name, DaCe's configuration), including what ``hash_sdfg`` leaves
out, is compiled again."""

import json
from pathlib import Path

import dace
import numpy as np
import pytest

from dcaccel.frontend.execution import compiled, program_fingerprint, program_key


def doubling(name: str = "doubling") -> dace.SDFG:
    """``B = 2 * A`` on 8 doubles, built anew (new node identities) on each call."""
    sdfg = dace.SDFG(name)
    sdfg.add_array("A", [8], dace.float64)
    sdfg.add_array("B", [8], dace.float64)
    state = sdfg.add_state("main")
    state.add_mapped_tasklet(
        "double",
        {"i": "0:8"},
        {"a": dace.Memlet("A[i]")},
        "b = 2 * a",
        {"b": dace.Memlet("B[i]")},
        external_edges=True,
    )
    return sdfg


def _map(sdfg: dace.SDFG) -> dace.nodes.Map:
    (entry,) = [node for node, _ in sdfg.all_nodes_recursive() if isinstance(node, dace.nodes.MapEntry)]
    return entry.map


def _tasklet(sdfg: dace.SDFG) -> dace.nodes.Tasklet:
    (tasklet,) = [node for node, _ in sdfg.all_nodes_recursive() if isinstance(node, dace.nodes.Tasklet)]
    return tasklet


def _access(sdfg: dace.SDFG, data: str) -> dace.nodes.AccessNode:
    (node,) = [node for node, _ in sdfg.all_nodes_recursive() if getattr(node, "data", None) == data]
    return node


def _set(target, **values) -> None:
    for name, value in values.items():
        setattr(target, name, value)


def _nested(name: str) -> dace.SDFG:
    """``doubling`` called as a nested SDFG named ``name``."""
    outer = dace.SDFG("outer")
    outer.add_array("A", [8], dace.float64)
    outer.add_array("B", [8], dace.float64)
    state = outer.add_state("main")
    nested = state.add_nested_sdfg(doubling(name), {"A"}, {"B"})
    state.add_edge(state.add_read("A"), None, nested, "A", dace.Memlet("A[0:8]"))
    state.add_edge(nested, "B", state.add_write("B"), None, dace.Memlet("B[0:8]"))
    return outer


@pytest.mark.slow
def test_equal_sdfgs_share_a_key():
    assert program_key(doubling()) == program_key(doubling())
    assert program_key(_nested("inner")) == program_key(_nested("inner"))


#: Changes to ``doubling()`` that change its generated code but not DaCe's ``hash_sdfg``.
UNHASHED = {
    "sdfg-timer": lambda sdfg: _set(sdfg, instrument=dace.InstrumentationType.Timer),
    "state-timer": lambda sdfg: _set(sdfg.start_block, instrument=dace.InstrumentationType.Timer),
    "map-timer": lambda sdfg: _set(_map(sdfg), instrument=dace.InstrumentationType.Timer),
    "tasklet-timer": lambda sdfg: _set(_tasklet(sdfg), instrument=dace.InstrumentationType.Timer),
    "data-save": lambda sdfg: _set(_access(sdfg, "B"), instrument=dace.DataInstrumentationType.Save),
    "program-name": lambda sdfg: _set(sdfg, name="renamed"),
}


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(change, id=name, marks=[] if name in ("sdfg-timer", "data-save") else [pytest.mark.slow])
        for name, change in UNHASHED.items()
    ],
)
def test_what_hash_sdfg_leaves_out_changes_the_key(change):
    original, changed = doubling(), doubling()
    change(changed)
    assert changed.hash_sdfg() == original.hash_sdfg()
    assert program_key(changed) != program_key(original)


@pytest.mark.slow
def test_a_nested_sdfgs_name_changes_the_key():
    """``hash_sdfg`` drops the nested SDFG's name but keeps the label of the node that holds it."""
    assert program_key(_nested("inner")) != program_key(_nested("other"))


def test_a_library_nodes_name_changes_the_key(mmm):
    renamed = mmm.sdfg.__deepcopy__({})
    (node,) = [node for node, _ in renamed.all_nodes_recursive() if isinstance(node, dace.nodes.LibraryNode)]
    node.name = f"{node.name}_renamed"
    assert renamed.hash_sdfg() == mmm.sdfg.hash_sdfg()
    assert program_key(renamed) != program_key(mmm.sdfg)


def test_the_configuration_changes_the_key():
    sdfg = doubling()
    before = program_key(sdfg)
    with dace.config.set_temporary("compiler", "cpu", "args", value="-O1"):
        assert program_key(sdfg) != before
    assert program_key(sdfg) == before


def _run(sdfg: dace.SDFG) -> np.ndarray:
    source = np.arange(8, dtype=np.float64)
    result = np.zeros(8)
    compiled(sdfg)(A=source, B=result)
    return result


def _reports(sdfg: dace.SDFG) -> int:
    """How many instrumentation reports the build folder of ``sdfg`` holds."""
    return len(list(Path(sdfg.build_folder, "perf").glob("report-*.json")))


@pytest.mark.slow
def test_an_instrumented_sdfg_is_not_served_the_build_without_timers():
    """The same program (name and content) with timers on the program and the map: compiled apart, and
    a run writes a report of both timers, where a run of the plain build writes none."""
    plain, timed = doubling("cache_plain"), doubling("cache_plain")
    timed.instrument = dace.InstrumentationType.Timer
    _map(timed).instrument = dace.InstrumentationType.Timer
    reports = _reports(plain)
    assert _run(plain).tolist() == [2.0 * i for i in range(8)]
    assert _reports(plain) == reports
    assert compiled(timed) is not compiled(plain)
    assert compiled(timed).sdfg.instrument == dace.InstrumentationType.Timer
    assert _run(timed).tolist() == [2.0 * i for i in range(8)]
    assert _reports(timed) == reports + 1
    assert len(timed.get_latest_report().durations) == 2
    assert compiled(doubling("cache_plain")) is compiled(plain)


@pytest.mark.slow
def test_a_renamed_program_is_compiled_under_its_own_name():
    first, renamed = doubling("cache_first"), doubling("cache_renamed")
    assert compiled(first).sdfg.name == "cache_first"
    program = compiled(renamed)
    assert program is not compiled(first)
    assert program.sdfg.name == "cache_renamed" and "cache_renamed" in program.filename
    assert _run(renamed).tolist() == [2.0 * i for i in range(8)]


def test_the_fingerprint_does_not_depend_on_where_the_source_is(tmp_path):
    """The same ``@dace.program`` parsed from a copy of its module elsewhere: DaCe's JSON names the source file,
    the fingerprint leaves it out (a dataset measured from one checkout is read back from another)."""
    import importlib.util

    from dcaccel.workloads import mmm

    copy = tmp_path / "mmm_elsewhere.py"
    copy.write_text(Path(mmm.__file__).read_text())
    spec = importlib.util.spec_from_file_location("mmm_elsewhere", copy)
    elsewhere = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(elsewhere)
    here, there = mmm.workload(N=4, K=4, M=4).sdfg, elsewhere.workload(N=4, K=4, M=4).sdfg
    assert str(copy) in json.dumps(there.to_json()) and here.hash_sdfg() != there.hash_sdfg()
    assert program_fingerprint(here) == program_fingerprint(there)
