"""Measuring a lowered program (compiles: slow)."""

import copy
import dataclasses
from pathlib import Path

import pytest

from dcaccel.costmodel import measure as measuring
from dcaccel.errors import DcaccelError
from dcaccel.frontend import execution

pytestmark = pytest.mark.slow

REPEAT = 5


@pytest.fixture(scope="module")
def lowered(lowered_workload):
    return lowered_workload("conv-seed", {"Conv": "mv"})


@pytest.fixture(scope="module")
def rows(lowered):
    return measuring.measure(lowered, family="conv-seed", repeat=REPEAT)


@pytest.fixture(scope="module")
def cpu_rows(lowered):
    """``rows`` timed as a one-thread program is by default: the thread CPU clock, in two worker processes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        return measuring.measure(lowered, family="conv-seed", repeat=REPEAT, processes=2)


def test_every_map_and_copy_is_a_row(rows):
    # conv-seed under mv: seven maps (im2col, weight reshape, broadcast, MV, gather, bias, reshape) and two copies
    assert [r.features["kind"] for r in rows].count("map") == 7
    assert {r.label for r in rows if r.features["kind"] == "copy"} == {"X_col->_b_copy", "output->__return"}
    assert {r.features["op"] for r in rows} == {"Conv", "Copy"}
    assert all(r.timing.n == REPEAT and 0 < r.timing.min_ns <= r.timing.median_ns <= r.timing.p90_ns for r in rows)


def test_times_are_nanoseconds(rows):
    # DaCe's timer counts microseconds: every time would be a multiple of 1000 ns
    assert any(r.timing.median_ns % 1000 for r in rows)


def test_provenance(rows, lowered):
    first = rows[0]
    assert first.assignment == {"Conv_0": "mv"} or set(first.assignment.values()) == {"mv"}
    assert first.provenance.dace_version.startswith("2.0")
    assert first.provenance.fingerprint == execution.program_fingerprint(lowered.workload.sdfg)
    assert first.provenance.heap == "steady"


def test_instrumented_program_has_its_own_cache_key(lowered):
    plain = copy.deepcopy(lowered.sdfg)
    timed = copy.deepcopy(lowered.sdfg)
    measuring.instrument(timed)
    assert execution.program_key(plain) != execution.program_key(timed)


def test_calls_are_direct_and_leave_no_report(lowered, monkeypatch):
    sdfg = copy.deepcopy(lowered.sdfg)
    measuring.instrument(sdfg)
    with measuring.dace.config.set_temporary("instrumentation", "report_each_invocation", value=False):
        program = execution.compiled(sdfg)
    arguments = execution.program_arguments(program, lowered.workload, lowered.workload.random_inputs(0))
    hashed = []
    monkeypatch.setattr(execution, "program_key", lambda sdfg: hashed.append(sdfg) or "")
    for repeat in (3, 4):  # two measurements in the same millisecond range: no report overwritten or left
        samples = measuring.run_timed(program, arguments, repeat)
        assert {len(values) for values in samples.values()} == {repeat}
    assert hashed == []
    assert list((Path(program.sdfg.build_folder) / "perf").glob("report-*.json")) == []


def test_prediction_reads_the_steps_measurement_reads(lowered, rows):
    from dcaccel.costmodel.models import CostModel
    from dcaccel.costmodel.predict import predict_steps

    model = CostModel.train(rows)
    predicted = predict_steps(lowered, model, "boosted")
    assert list(predicted["label"]) == [r.label for r in rows]
    assert list(predicted["analytic"]) == [r.analytic for r in rows]
    assert list(predicted["implementation"]) == [r.features["implementation"] for r in rows]
    assert (predicted["predicted_ns"] > 0).all()


def test_copies_are_what_code_generation_makes_and_the_program_bytes_are_one(rows):
    copies = [r for r in rows if r.features["kind"] == "copy"]
    assert copies and {r.features["implementation"] for r in copies} <= {"MemcpyCPU", "MappedTasklet", "Tasklet"}
    assert all(r.tokens[:2] == ["COPY", r.features["implementation"].upper()] for r in copies)
    moved = sum(r.features["bytes_in"] + r.features["bytes_out"] for r in rows)
    assert {r.features["program_bytes"] for r in rows} == {moved}


def test_strides_of_the_accesses(rows):
    # MV reads X_col (27 x 576) a column at a time: neighbouring elements 576 floats apart, 2,304 = 9 x 2^8 bytes;
    # the result's copy to __return has the shape of its source
    mv = next(r for r in rows if r.label == "MV")
    assert (mv.features["stride_bytes"], mv.features["stride_twos"]) == (2304.0, 8.0)
    returned = next(r for r in rows if r.label == "output->__return")
    assert (returned.features["same_shape"], returned.features["stride_bytes"]) == (1.0, 4.0)


def test_refeature_reads_the_measured_features_again(lowered, rows):
    assert measuring.refeature(lowered, rows) == rows
    renamed = [dataclasses.replace(rows[0], label="other")]
    with pytest.raises(DcaccelError, match=f"conv-seed {rows[0].step}: the program has no step other"):
        measuring.refeature(lowered, renamed)


def test_fresh_processes_pool_their_samples(lowered, rows):
    pooled = measuring.measure(lowered, family="conv-seed", repeat=3, processes=2)
    assert [(r.step, r.label, r.features) for r in pooled] == [(r.step, r.label, r.features) for r in rows]
    assert {r.timing.n for r in pooled} == {6}
    assert all(0 < r.timing.min_ns <= r.timing.median_ns for r in pooled)
    timed_sdfg, _ = measuring._timed_steps(lowered, lowered.workload.bind_symbols(lowered.workload.random_inputs(0)))
    folder = Path(measuring.dace.Config.get("default_build_folder")) / timed_sdfg.name
    assert list((folder / "perf").glob("report-*.json")) == []


def test_assignments_of_one_workload_build_apart(lowered, lowered_workload):
    # a worker process loads a program from its build folder, which DaCe names after the program
    symbols = lowered.workload.bind_symbols(lowered.workload.random_inputs(0))
    other = lowered_workload("conv-seed", {"Conv": "lmv"})
    names = {measuring._timed_steps(item, symbols)[0].name for item in (lowered, other)}
    assert len(names) == 2 and all(name.startswith(lowered.sdfg.name) for name in names)


def test_repeat_and_processes_are_bounded(lowered):
    with pytest.raises(DcaccelError, match="processes must be 1 to 64, got 0"):
        measuring.measure(lowered, family="conv-seed", processes=0)
    with pytest.raises(DcaccelError, match="repeat must be 1 to 10000, got 0"):
        measuring.measure(lowered, family="conv-seed", repeat=0)


def test_the_thread_clock_is_read_in_the_generated_code(lowered, cpu_rows):
    symbols = lowered.workload.bind_symbols(lowered.workload.random_inputs(0))
    name = measuring._timed_steps(lowered, symbols, "thread-cpu")[0].name
    folder = Path(measuring.dace.Config.get("default_build_folder"), name)
    code = "".join(path.read_text() for path in folder.glob("src/cpu/*.cpp"))
    assert "clock_gettime(CLOCK_THREAD_CPUTIME_ID" in code and "steady_clock" in code


def test_a_row_records_its_clock(rows, cpu_rows):
    assert {r.provenance.clock for r in rows} == {"wall"}  # two OpenMP threads in this test process
    assert [(r.step, r.label) for r in cpu_rows] == [(r.step, r.label) for r in rows]
    mv = next(r for r in cpu_rows if r.label == "MV")  # 250 k multiply-adds: tens of µs at least
    assert mv.provenance.clock == "thread-cpu"
    assert all(r.timing.median_ns < measuring.WALL_BELOW_NS for r in cpu_rows if r.provenance.clock == "wall")
    assert all(0 < r.timing.min_ns <= r.timing.median_ns for r in cpu_rows)
    # plausible for one core: 0.05 to 50 ns a multiply-add (the wall clock of this test process is not a
    # reference: on two OpenMP threads of a loaded 2-core machine it read MV at 16 ms, 360 times this)
    assert 0.05 < mv.timing.median_ns / mv.features["macs"] < 50
