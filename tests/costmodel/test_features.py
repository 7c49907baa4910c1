"""The features of a step: its innermost loop, where its accesses miss, its place in its program."""

import numpy as np
import pytest

from dcaccel.costmodel.features import CACHE, program_context


@pytest.mark.parametrize(
    ("moved", "program_bytes"),
    [([(4.0, 8.0), (8.0, 16.0), (20.0, 2.0)], 58.0), ([(0.0, 4.0)], 4.0), ([], 0.0)],
)
def test_the_program_bytes_are_every_steps(moved, program_bytes):
    features = [{"bytes_in": bytes_in, "bytes_out": bytes_out, "kind": "map"} for bytes_in, bytes_out in moved]
    assert program_context(features) == {"program_bytes": program_bytes}


def _map_features(lowered) -> dict[str, dict]:
    import copy

    from dcaccel.costmodel.measure import read_steps, step_places

    sdfg, symbols = copy.deepcopy(lowered.sdfg), dict(lowered.workload.symbols)
    program = read_steps(lowered, sdfg, symbols)
    places = step_places(sdfg, program, symbols)
    return {step.label: f for step, (_, f, _) in zip(program.steps, places, strict=True) if f and f["kind"] == "map"}


@pytest.mark.slow  # lowers a program (seconds, once per session)
@pytest.mark.parametrize(
    ("rows", "op", "reduce"),
    [
        # one row of A: the loop over rows runs once, so the loop over the 16 columns is the innermost, along
        # which the partial sums and C lie
        (1, (2 / 3, 16.0), (1.0, 16.0)),
        # four rows: the loop over them is the innermost, a column of C apart
        (4, (0.0, 4.0), (0.0, 4.0)),
    ],
)
def test_a_loop_of_one_iteration_is_no_innermost_loop(lowered_workload, rows, op, reduce):
    features = _map_features(lowered_workload("mmm", {"MatMul": "op"}, N=rows, K=8, M=16))
    for label, expected in (("OP", op), ("Reduce", reduce)):
        assert (features[label]["unit_stride"], features[label]["inner_iterations"]) == pytest.approx(expected)


@pytest.mark.slow
def test_the_cache_features_are_misses_per_access(lowered_workload):
    features = _map_features(lowered_workload("mmm", {"MatMul": "op"}, N=4, K=8, M=16))
    for step in features.values():
        rates = [step[name] for name in CACHE]
        assert all(0.0 <= rate <= 1.0 for rate in rates)
        assert step["l2_misses"] <= step["l1_misses"] and step["stlb_misses"] <= step["dtlb_misses"]
    # OP writes 8 x 4 x 16 partial sums and reads A (4 x 8) and B (8 x 16): each line missed once, in 1,536
    # accesses; 4 KiB pages: one each of A's and B's copies, two of the partial sums' (the third container, it
    # starts 2 x 1,088 bytes into a page: cachesim.container_base)
    assert features["OP"]["l1_misses"] == pytest.approx((32 + 2 + 8) / 1536)
    assert features["OP"]["dtlb_misses"] == pytest.approx(4 / 1536)


def test_a_feature_not_read_is_missing_to_the_models():
    from dcaccel.costmodel.features import NUMERIC, UNREAD, feature_matrix

    features = {"kind": "map", "op": "Conv", "implementation": "mv", **dict.fromkeys(NUMERIC, 1.0)}
    unread = {**features, **dict.fromkeys(UNREAD, -1.0)}
    matrix = feature_matrix([features, unread], {"kind": ["map"], "op": ["Conv"], "implementation": ["mv"]})
    columns = [NUMERIC.index(name) for name in UNREAD]
    assert not np.isnan(matrix[0]).any()
    assert np.isnan(matrix[1, columns]).all() and not np.isnan(np.delete(matrix[1], columns)).any()


def _one_map_features(
    inputs: dict, code: str, loop: str = "0:64", write: str = "out[i]", cpp: bool = False, wcr: str | None = None
) -> dict:
    """The features of one map over i in ``loop`` (a range, ``0:64``) writing ``write`` (``out[i]``, with the
    write-conflict resolution ``wcr`` if given) of a hand-built SDFG (``inp``, ``out``: 128 floats), its
    tasklet Python or C++."""
    import dace

    sdfg = dace.SDFG("window")
    for name in ("inp", "out"):
        sdfg.add_array(name, [128], dace.float32)
    state = sdfg.add_state()
    language = dace.Language.CPP if cpp else dace.Language.Python
    outputs = {"b": dace.Memlet(write, wcr=wcr)}
    state.add_mapped_tasklet("m", {"i": loop}, inputs, code, outputs, external_edges=True, language=language)
    return _top_map_features(sdfg)


def _top_map_features(sdfg) -> dict:
    """The features of the one top-level map of the hand-built ``sdfg`` (one state)."""
    import dace

    from dcaccel.costmodel.measure import step_places
    from dcaccel.dag.scopes import read_program
    from dcaccel.dag.task import TaskInfo

    state = sdfg.start_state
    entry = next(n for n in state.nodes() if isinstance(n, dace.nodes.MapEntry) and state.entry_node(n) is None)
    program = read_program(sdfg, {}, sources={entry.guid: TaskInfo().derive(guid=entry.guid)})
    return next(features for _, features, _ in step_places(sdfg, program, {}) if features is not None)


LOOP = "b = 0\nfor t in range({}):\n    b = b + a[t]"


@pytest.mark.parametrize(
    ("read", "code", "loop", "write", "vectorised"),
    [
        ("inp[i]", "b = a", "0:64", "out[i]", 1.0),
        # a read of the same element for every iteration is one value for every lane
        ("inp[3]", "b = a", "0:64", "out[i]", 1.0),
        # a dot product of 16 is unrolled completely: the loop over i is the innermost
        ("inp[0:16]", LOOP.format(16), "0:64", "out[i]", 1.0),
        # of 17 it stays the innermost loop, a sum the compiler may not reorder; loops of 4 x 5 or 10 + 10 are
        # unrolled each
        ("inp[0:17]", LOOP.format(17), "0:64", "out[i]", 0.0),
        (
            "inp[0:20]",
            "b = 0\nfor s in range(4):\n    for t in range(5):\n        b = b + a[5 * s + t]",
            "0:64",
            "out[i]",
            1.0,
        ),
        ("inp[0:10]", LOOP.format(10) + "\n" + LOOP.format(10).replace("b = 0\n", ""), "0:64", "out[i]", 1.0),
        # backwards, reads and writes alike
        ("inp[63 - i]", "b = a", "0:64", "out[63 - i]", 1.0),
        # a function the compiler calls one element at a time, and ones it has vector instructions for
        ("inp[i]", "b = math.exp(a)", "0:64", "out[i]", 0.0),
        ("inp[i]", "b = max(a, 0.0)", "0:64", "out[i]", 1.0),
        ("inp[i]", "b = math.sqrt(a)", "0:64", "out[i]", 1.0),
        # a conditional expression is a select; an if statement a branch
        ("inp[i]", "b = a if a > 0 else 0.0", "0:64", "out[i]", 1.0),
        ("inp[i]", "if a > 0:\n    b = a\nelse:\n    b = 0.0", "0:64", "out[i]", 0.0),
        # a read two elements apart per iteration, by its index or by the map's step; a write that does not
        # move; four iterations fill a vector of four floats, three do not
        ("inp[2 * i]", "b = a", "0:64", "out[i]", 0.0),
        ("inp[3]", "b = a", "0:128:2", "out[i]", 0.0),
        ("inp[i]", "b = a", "0:64", "out[0]", 0.0),
        ("inp[i]", "b = a", "0:4", "out[i]", 1.0),
        ("inp[i]", "b = a", "0:3", "out[i]", 0.0),
    ],
)
def test_the_vector_loop(read, code, loop, write, vectorised):
    import dace

    assert _one_map_features({"a": dace.Memlet(read)}, code, loop, write)["vector_loop"] == vectorised


@pytest.mark.parametrize(
    ("write", "wcr", "atomic"),
    [
        # a sum of 64 iterations into one element: DaCe makes each update atomic
        ("out[0]", "lambda x, y: x + y", 64.0),
        ("out[0]", "lambda x, y: max(x, y)", 64.0),
        # each iteration updates its own element: no conflict, no atomic
        ("out[i]", "lambda x, y: x + y", 0.0),
        ("out[i]", None, 0.0),
    ],
)
def test_the_atomic_writes_are_dace_code_generations(write, wcr, atomic):
    import dace

    assert _one_map_features({"a": dace.Memlet("inp[i]")}, "b = a", write=write, wcr=wcr)["atomic_writes"] == atomic


@pytest.mark.parametrize(
    ("write", "local", "atomic"),
    [
        # the inner map runs sequentially in the code: out[i] is one parallel iteration's alone
        ("out[i]", False, 0.0),
        ("out[0]", False, 64.0),
        # the inner map sums into a container of the outer iteration, added to out[0] atomically once per i
        ("out[0]", True, 4.0),
    ],
)
def test_the_atomic_writes_of_a_nested_map(write, local, atomic):
    """A map over i in 0:4 around a map over j in 0:16 (one of i's iterations writes 16 elements)."""
    import dace

    sdfg = dace.SDFG("nested_wcr")
    sdfg.add_array("inp", [4, 16], dace.float32)
    sdfg.add_array("out", [4], dace.float32)
    state = sdfg.add_state()
    outer_entry, outer_exit = state.add_map("outer", {"i": "0:4"})
    inner_entry, inner_exit = state.add_map("inner", {"j": "0:16"})
    tasklet = state.add_tasklet("t", {"a"}, {"b"}, "b = a")
    read = dace.Memlet("inp[i, j]")
    state.add_memlet_path(state.add_read("inp"), outer_entry, inner_entry, tasklet, dst_conn="a", memlet=read)
    out, wcr = state.add_write("out"), "lambda x, y: x + y"
    if local:
        sdfg.add_transient("acc", [1], dace.float32)
        acc = state.add_access("acc")
        state.add_memlet_path(tasklet, inner_exit, acc, src_conn="b", memlet=dace.Memlet("acc[0]", wcr=wcr))
        state.add_memlet_path(acc, outer_exit, out, memlet=dace.Memlet(write, wcr=wcr))
    else:
        state.add_memlet_path(tasklet, inner_exit, outer_exit, out, src_conn="b", memlet=dace.Memlet(write, wcr=wcr))
    assert _top_map_features(sdfg)["atomic_writes"] == atomic


def test_the_atomic_writes_out_of_a_nested_sdfg():
    """A map over i in 0:64 around a nested SDFG whose tasklet adds inp[i] to out[0]: 64 atomic updates."""
    import dace

    inner = dace.SDFG("inner")
    inner.add_array("a", [64], dace.float32)
    inner.add_array("o", [1], dace.float32)
    inner.add_symbol("i", dace.int64)
    inner_state = inner.add_state()
    tasklet = inner_state.add_tasklet("t", {"x"}, {"y"}, "y = x")
    inner_state.add_edge(inner_state.add_read("a"), None, tasklet, "x", dace.Memlet("a[i]"))
    wcr = "lambda x, y: x + y"
    inner_state.add_edge(tasklet, "y", inner_state.add_write("o"), None, dace.Memlet("o[0]", wcr=wcr))
    sdfg = dace.SDFG("nested_sdfg_wcr")
    sdfg.add_array("inp", [64], dace.float32)
    sdfg.add_array("out", [1], dace.float32)
    state = sdfg.add_state()
    entry, exit_ = state.add_map("m", {"i": "0:64"})
    nested = state.add_nested_sdfg(inner, {"a"}, {"o"}, symbol_mapping={"i": "i"})
    state.add_memlet_path(state.add_read("inp"), entry, nested, dst_conn="a", memlet=dace.Memlet("inp[0:64]"))
    out = state.add_write("out")
    state.add_memlet_path(nested, exit_, out, src_conn="o", memlet=dace.Memlet("out[0]", wcr=wcr))
    assert _top_map_features(sdfg)["atomic_writes"] == 64.0


def test_a_cpp_tasklet_is_not_read_as_vectorised():
    import dace

    assert _one_map_features({"a": dace.Memlet("inp[i]")}, "b = a;", cpp=True)["vector_loop"] == 0.0


def test_an_index_modulo_a_size_is_read():
    import dace

    features = _one_map_features({"a": dace.Memlet("inp[i % 16]")}, "b = a")
    # 128 accesses: inp's 16 elements in one line, out's 64 in four; one page each
    assert (features["l1_misses"], features["dtlb_misses"]) == (5 / 128, 2 / 128)


def test_a_dynamic_memlet_leaves_the_window_unread():
    import dace

    features = _one_map_features({"a": dace.Memlet("inp[0:64]", dynamic=True)}, "b = a[i]")
    assert all(features[name] == -1.0 for name in CACHE)
    assert features["inner_iterations"] == 64.0


@pytest.mark.parametrize(
    ("source", "destination", "l1", "dtlb"),
    [
        # 4,096 floats each way, a line per 16; 4 pages of the source, 5 of the destination (it starts 1,088
        # bytes into a page: cachesim.container_base)
        ("0:64, 0:64", "0:64, 0:64", 1 / 16, 9 / 8192),
        # a column: every element a line of its own, 256 bytes apart (16 KiB: 4 and 5 pages)
        ("0:64, 0:1", "0:64, 0:1", 1.0, 9 / 128),
        # every other row: the copy's elements are not its extent, so the window is not read
        ("0:64:2, 0:64", "0:32, 0:64", -1.0, -1.0),
    ],
)
def test_the_window_of_a_copy(source, destination, l1, dtlb):
    import dace

    from dcaccel.costmodel.measure import step_places
    from dcaccel.dag.scopes import read_program

    sdfg = dace.SDFG("copy")
    for name in ("inp", "out"):
        sdfg.add_array(name, [64, 64], dace.float32)
    state = sdfg.add_state()
    memlet = dace.Memlet(data="inp", subset=source, other_subset=destination)
    state.add_nedge(state.add_read("inp"), state.add_write("out"), memlet)
    (features,) = [f for _, f, _ in step_places(sdfg, read_program(sdfg, {}), {}) if f is not None]
    assert (features["kind"], features["l1_misses"], features["dtlb_misses"]) == ("copy", l1, dtlb)


def test_an_empty_subset_leaves_the_window_unread():
    import dace

    features = _one_map_features({"a": dace.Memlet("inp[0:0]")}, "b = 0")
    assert all(features[name] == -1.0 for name in CACHE)


@pytest.mark.parametrize(("index", "read"), [("i & 15", False), ("(i // 4) % 8", True), ("Max(0, i - 3)", True)])
def test_the_index_operations_the_window_evaluates(index, read):
    import dace

    from dcaccel.costmodel.features import StepPlace, _window_access

    sdfg = dace.SDFG("index")
    sdfg.add_array("inp", [64], dace.float32)
    place = StepPlace(sdfg, sdfg.add_state(), None, {}, {})
    access = _window_access(dace.Memlet(f"inp[{index}]"), ["i"], 0, place)
    assert (access is not None) == read
    if read:  # evaluated on an array of the loop's values, as the window does
        assert len(access.offset(np.arange(8))) == 8
