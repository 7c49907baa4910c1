"""Extraction of the canonical task DAG (dcaccel.dag.extract; rules in docs/dag.md).

The seed anchor: ``conv-seed`` under the three MMM shapes must give the reference tool's DAGs
(``tests/data/vectors/seedconv_*.json``, written down below in our container names) and the seed
table's I/O volumes 129,474 / 222,936 / 150,936; scheduled, the "reference" DAGs give the seed's
makespans. Nothing here compiles an SDFG.
"""

import json
from collections import Counter
from types import SimpleNamespace

import dace
import pytest

from dcaccel import workloads
from dcaccel.dag import metrics
from dcaccel.dag.extract import Granularity, extract
from dcaccel.dag.task import TaskInfo
from dcaccel.dag.taskdag import NodeKind, TaskDAG
from dcaccel.errors import DAGContractError, DcaccelError
from dcaccel.frontend.ops import nodes_by_op_type
from dcaccel.scheduler import schedule
from tests.dag import programs

SHAPES = ("mv", "op", "lmv")

#: The seed table's I/O volumes (Σ over buffer nodes of volume in + out), architecture.md Contract 3.
SEED_IO = {"mv": 129_474, "op": 222_936, "lmv": 150_936}

#: Work and depth of the reference tool's DAGs (the vectors' ``work`` / ``depth`` fields).
SEED_WORK = {"mv": 2_015_724, "op": 2_267_862, "lmv": 125_718}
SEED_DEPTH = {"mv": 28_224, "op": 194_112, "lmv": 53_568}

#: Streaming makespans of the reference tool at 16 and 128 PEs (the seed table, vectors/README.md).
SEED_MAKESPAN = {"mv": (145_730, 35_138), "op": (194_113, 107_713), "lmv": (35_715, 35_715)}

#: The edges of the vectors seedconv_mv_noxycolbuf / seedconv_op_noxcolbuf / seedconv_lmv as
#: (source, target, volume, count), task-map iterations under their map label. Names are ours: the
#: vectors' X, W, B, Y are the program containers (renamed by ``seed_names``), ``_a_bn``/``_b_bn`` are
#: the MMM operand buffers ``_a_copy``/``_b_copy``, and ``<name>_bn`` is the buffer ``<name>``.
SEED_EDGES = {
    "mv": [
        ("pseudo-source", "X", 14400, 1),
        ("pseudo-source", "W", 150, 1),
        ("pseudo-source", "B", 3456, 1),
        ("X", "Xr", 14400, 1),
        ("Xr", "_b_copy", 14400, 1),
        ("_b_copy", "MV", 150, 576),
        ("W", "Wr", 150, 1),
        ("Wr", "W_col", 150, 1),
        ("W_col", "BcastA", 150, 1),
        ("BcastA", "MV", 150, 576),
        ("MV", "Gather", 3456, 576),
        ("Gather", "AddBias", 3456, 1),
        ("B", "AddBias", 3456, 1),
        ("AddBias", "Y_col_bias", 3456, 1),
        ("Y_col_bias", "ReshapeOut", 3456, 1),
        ("ReshapeOut", "Y", 3456, 1),
    ],
    "op": [
        ("pseudo-source", "X", 14400, 1),
        ("pseudo-source", "W", 150, 1),
        ("pseudo-source", "B", 3456, 1),
        ("X", "Xr", 14400, 1),
        ("Xr", "_b_copy", 14400, 1),
        ("W", "Wr", 150, 1),
        ("Wr", "W_col", 150, 1),
        ("W_col", "_a_copy", 150, 1),
        ("_a_copy", "OP", 3456, 25),
        ("_b_copy", "OP", 3456, 25),
        ("OP", "Reduce", 86400, 25),
        ("Reduce", "Y_col", 3456, 1),
        ("Y_col", "AddBias", 3456, 1),
        ("B", "AddBias", 3456, 1),
        ("AddBias", "Y_col_bias", 3456, 1),
        ("Y_col_bias", "ReshapeOut", 3456, 1),
        ("ReshapeOut", "Y", 3456, 1),
    ],
    "lmv": [
        ("pseudo-source", "X", 14400, 1),
        ("pseudo-source", "W", 150, 1),
        ("pseudo-source", "B", 3456, 1),
        ("X", "Xr", 14400, 1),
        ("Xr", "X_col", 14400, 1),
        ("X_col", "BcastB", 14400, 1),
        ("BcastB", "LMV", 14400, 6),
        ("W", "Wr", 150, 1),
        ("Wr", "W_col", 150, 1),
        ("W_col", "_a_copy", 150, 1),
        ("_a_copy", "LMV", 14400, 6),
        ("LMV", "Gather", 3456, 6),
        ("Gather", "Y_col", 3456, 1),
        ("Y_col", "AddBias", 3456, 1),
        ("B", "AddBias", 3456, 1),
        ("AddBias", "Y_col_bias", 3456, 1),
        ("Y_col_bias", "ReshapeOut", 3456, 1),
        ("ReshapeOut", "Y", 3456, 1),
    ],
}

#: Number of nodes of the vectors' DAGs (pseudo source included).
SEED_NODES = {"mv": 590, "op": 40, "lmv": 22}

#: Task maps of each shape: map label and number of iterations (Contract 3).
TASK_MAPS = {"mv": ("MV", 576), "op": ("OP", 25), "lmv": ("LMV", 6)}


@pytest.fixture(scope="module")
def seed():
    return workloads.get("conv-seed")


@pytest.fixture(scope="module")
def seed_lowered(seed):
    return {shape: seed.lower({"Conv": shape}) for shape in SHAPES}


@pytest.fixture(scope="module")
def seed_dags(seed_lowered):
    return {
        (shape, rule): extract(seed_lowered[shape], edge_volume=rule)
        for shape in SHAPES
        for rule in ("exact", "reference")
    }


def seed_names(seed) -> dict[str, str]:
    """Our program containers → the vectors' names X, W, B, Y."""
    weight, bias = seed.weights
    return {seed.inputs[0].container: "X", weight: "W", bias: "B", seed.outputs[0].container: "Y"}


def edge_table(dag: TaskDAG, rename: dict[str, str]) -> Counter:
    """(source, target, volume) → count, tasks of a task map under the map's label."""

    def name(v):
        node = dag.node(v)
        return rename.get(node.label, node.info.map or node.label if node.kind is NodeKind.TASK else node.label)

    return Counter((name(s), name(d), vol) for s, d, vol in dag.edges)


# -- the seed convolution ----------------------------------------------------------------------


@pytest.mark.parametrize("rule", ["exact", "reference"])
@pytest.mark.parametrize("shape", SHAPES)
def test_seed_io_volume(seed_dags, shape, rule):
    assert metrics.io_volume(seed_dags[shape, rule]) == SEED_IO[shape]


@pytest.mark.parametrize("shape", SHAPES)
def test_seed_reference_dag_is_the_vector(seed, seed_dags, shape):
    dag = seed_dags[shape, "reference"]
    expected = Counter({(s, d, v): n for s, d, v, n in SEED_EDGES[shape]})
    assert edge_table(dag, seed_names(seed)) == expected
    assert dag.num_nodes == SEED_NODES[shape]


@pytest.mark.parametrize("shape", SHAPES)
def test_seed_task_maps(seed_dags, shape):
    label, count = TASK_MAPS[shape]
    dag = seed_dags[shape, "exact"]
    iterations = [dag.node(v) for v in dag.tasks if dag.node(v).info.map == label]
    assert [n.label for n in iterations] == [f"{label}{i}" for i in range(count)]
    assert [n.info.iteration for n in iterations] == list(range(count))
    others = Counter(dag.node(v).label for v in dag.tasks if dag.node(v).info.map != label)
    expected_others = {
        "mv": {"Xr", "Wr", "BcastA", "Gather", "AddBias", "ReshapeOut"},
        "op": {"Xr", "Wr", "Reduce", "AddBias", "ReshapeOut"},
        "lmv": {"Xr", "Wr", "BcastB", "Gather", "AddBias", "ReshapeOut"},
    }[shape]
    assert set(others) == expected_others and set(others.values()) == {1}


@pytest.mark.parametrize("shape", SHAPES)
def test_seed_buffers_carry_their_marks(seed_dags, shape):
    dag = seed_dags[shape, "exact"]
    reasons = {dag.node(b).label: dag.node(b).info.reason for b in dag.buffers}
    assert reasons["W_col"] == "weights" and reasons["Y_col_bias"] == "layer-output"
    assert ("Y_col" in reasons) == (shape != "mv") and ("X_col" in reasons) == (shape == "lmv")
    assert not any(dag.node(b).info.inserted_buffer is not None for b in dag.buffers)


@pytest.mark.parametrize("shape", SHAPES)
def test_seed_reference_work_and_depth(seed_dags, shape):
    dag = seed_dags[shape, "reference"]
    assert metrics.work(dag) == SEED_WORK[shape]
    assert metrics.depth(dag) == SEED_DEPTH[shape]


def test_seed_exact_volumes_split_the_gathered_stream(seed_dags):
    """Under "exact", MV task j sends Gather only the N = 6 elements of column j it wrote (the
    reference rule puts Gather's whole read volume, 3456, on each of the 576 edges); the OP tasks
    send Reduce their N·M = 3456 partial products (reference: K·N·M = 86,400)."""
    mv = edge_table(seed_dags["mv", "exact"], {})
    assert mv[("MV", "Gather", 6)] == 576
    op = edge_table(seed_dags["op", "exact"], {})
    assert op[("OP", "Reduce", 3456)] == 25


@pytest.mark.parametrize("rule", ["exact", "reference"])
@pytest.mark.parametrize("shape", SHAPES)
def test_seed_dag_meets_the_contract(seed_dags, shape, rule):
    dag = seed_dags[shape, rule]
    dag.validate()
    exit_node = dag.node(dag.exit)
    assert dag.sink is None and exit_node.kind is NodeKind.BUFFER and exit_node.info.reason == "program-io"


@pytest.mark.parametrize("shape", SHAPES)
def test_seed_reference_makespans(seed_dags, shape):
    dag = seed_dags[shape, "reference"]
    assert tuple(schedule(dag, pes).makespan for pes in (16, 128)) == SEED_MAKESPAN[shape]


@pytest.mark.parametrize("shape", SHAPES)
def test_seed_json_round_trip(seed_dags, shape, tmp_path):
    dag = seed_dags[shape, "exact"]
    path = tmp_path / "dag.json"
    path.write_text(json.dumps(dag.to_json()))
    again = TaskDAG.from_json(path)
    assert again.edges == dag.edges

    def described(d):
        return [(n.kind, n.label, n.info) for n in d.nodes]

    assert described(again) == described(dag)


# -- granularity -------------------------------------------------------------------------------


def test_coarse_mv_buffers_the_rebroadcast_operand(seed_lowered, caplog):
    """One MV task for the whole map re-reads the stream of A M = 576 times: ``_a_stream`` becomes
    an inserted buffer (in 150, out N·K·M = 86,400), which adds 86,550 to the I/O volume."""
    with caplog.at_level("DEBUG", logger="dcaccel.dag.extract"):
        dag = extract(seed_lowered["mv"], "coarse")
    assert "container '_a_stream' made a buffer node" in caplog.text
    dag.validate()
    assert [dag.label(v) for v in dag.tasks] == ["Xr", "Wr", "BcastA", "MV", "Gather", "AddBias", "ReshapeOut"]
    inserted = [dag.node(b) for b in dag.buffers if dag.node(b).info.inserted_buffer is not None]
    assert [n.label for n in inserted] == ["_a_stream"]
    assert metrics.io_volume(dag) == SEED_IO["mv"] + 150 + 86_400
    mv = dag.tasks[3]
    assert dag.node(mv).info.iterations == 576


#: Streams a tile of several iterations re-reads (once per iteration), hence inserted buffers.
TILE_REREADS = {"mv": ["_a_stream"], "op": [], "lmv": ["_b_stream"]}


#: (shape, T, tiles made): the largest divisor of the shape's 576 / 25 / 6 iterations not above T.
TILINGS = [("mv", 1, 1), ("mv", 4, 4), ("mv", 5, 4), ("op", 4, 1), ("op", 5, 5), ("lmv", 4, 3), ("lmv", 6, 6)]


@pytest.mark.filterwarnings("ignore:extract. ")
@pytest.mark.parametrize(("shape", "requested", "tiles"), TILINGS)
def test_tiles_of_consecutive_iterations(seed_lowered, seed_dags, shape, requested, tiles):
    label, count = TASK_MAPS[shape]
    dag = extract(seed_lowered[shape], ("tiles", requested))
    dag.validate()
    tasks = [v for v in dag.tasks if dag.node(v).info.map == label]
    assert [dag.label(v) for v in tasks] == [f"{label}{t}" for t in range(tiles)]
    bounds = [dag.node(v).info.iteration_range for v in tasks]
    assert bounds == [(t * count // tiles, (t + 1) * count // tiles) for t in range(tiles)]
    assert [dag.node(v).info.iterations for v in tasks] == [b - a for a, b in bounds]
    assert [dag.node(v).info.tile for v in tasks] == list(range(tiles))
    inserted = sorted(dag.label(b) for b in dag.buffers if dag.node(b).info.inserted_buffer is not None)
    assert inserted == (TILE_REREADS[shape] if count > tiles else [])
    # The reused operand buffer sends the tiles exactly what it sent the single iterations.
    fine = seed_dags[shape, "exact"]
    operand = "_b_copy" if shape == "mv" else "_a_copy"

    def sent(d):
        return sorted(v for s, _, v in d.edges if d.label(s) == operand)

    assert sum(sent(dag)) == sum(sent(fine))
    assert sent(dag) == sorted(sum(sent(fine)[a:b]) for a, b in bounds)


@pytest.mark.filterwarnings("ignore:extract. container")
def test_fewer_tiles_are_announced(seed_lowered):
    with pytest.warns(UserWarning, match=r"1 task map\(s\) split into fewer than 5 equal tiles .*: MV \(4\)"):
        extract(seed_lowered["mv"], "tiles=5")


@pytest.mark.parametrize("shape", SHAPES)
def test_one_tile_per_iteration_is_the_default_granularity(seed_lowered, seed_dags, shape):
    _, count = TASK_MAPS[shape]
    tiled = extract(seed_lowered[shape], ("tiles", count))
    assert tiled.edges == seed_dags[shape, "exact"].edges


@pytest.mark.parametrize("value", ["tiles=0", ("tiles", 0), "fine", ("tiles",), 3])
def test_bad_granularity(value):
    with pytest.raises(DcaccelError, match="granularity"):
        Granularity.parse(value)


# -- rules on small programs -------------------------------------------------------------------


def labels(dag: TaskDAG) -> list[tuple[str, str]]:
    return [(n.kind.value, n.label) for n in dag.nodes]


def volumes(dag: TaskDAG) -> list[tuple[str, str, int]]:
    return [(dag.label(s), dag.label(d), v) for s, d, v in dag.edges]


@pytest.mark.parametrize("size", [1, pytest.param(8, marks=pytest.mark.slow)])
def test_streamed_transients_are_collapsed(size):
    dag = extract(programs.chain_program(size))
    assert labels(dag) == [
        ("source", "pseudo-source"),
        ("buffer", "A"),
        ("task", "Inc_map"),
        ("task", "Double_map"),
        ("task", "Dec_map"),
        ("buffer", "B"),
    ]
    assert volumes(dag) == [
        ("pseudo-source", "A", size),
        ("A", "Inc_map", size),
        ("Inc_map", "Double_map", size),
        ("Double_map", "Dec_map", size),
        ("Dec_map", "B", size),
    ]
    dag.validate()


@pytest.mark.slow
def test_a_state_boundary_is_a_dependency():
    dag = extract(programs.two_state_program())
    assert ("Produce_map", "Consume_map", 8) in volumes(dag)
    assert [dag.node(v).info.state for v in dag.tasks] == ["first", "second"]


@pytest.mark.slow
def test_a_buffer_written_after_it_was_read_gets_a_new_version():
    dag = extract(programs.in_place_program())
    dag.validate()
    versions = [(dag.label(b), dag.node(b).info.container_version) for b in sorted(dag.buffers)]
    assert versions == [("A", 0), ("A", 1), ("B", 0)]
    assert volumes(dag)[1:4] == [("A", "Scale_map", 8), ("Scale_map", "A", 8), ("A", "Copy_map", 8)]


def test_a_reread_stream_becomes_a_buffer(caplog):
    with caplog.at_level("DEBUG", logger="dcaccel.dag.extract"):
        dag = extract(programs.reread_program())
    assert "container 't' made a buffer node (a consumer re-reads what a producer streams)" in caplog.text
    dag.validate()
    t = next(b for b in dag.buffers if dag.label(b) == "t")
    assert "re-reads" in dag.node(t).info.inserted_buffer
    assert ("Inc_map", "t", 8) in volumes(dag) and ("t", "Mirror_map", 16) in volumes(dag)


@pytest.mark.parametrize("rule", ["exact", pytest.param("reference", marks=pytest.mark.slow)])
def test_unequal_in_volumes_are_repaired_with_a_buffer(rule, caplog):
    if rule == "exact":
        with caplog.at_level("DEBUG", logger="dcaccel.dag.extract"):
            dag = extract(programs.halves_program(), edge_volume=rule)
        assert "unequal in-volumes into task Sum_map" in caplog.text
        assert ("Low_map", "t", 4) in volumes(dag) and ("t", "Sum_map", 8) in volumes(dag)
    else:
        dag = extract(programs.halves_program(), edge_volume=rule)
        assert ("Low_map", "Sum_map", 8) in volumes(dag) and ("High_map", "Sum_map", 8) in volumes(dag)
    dag.validate()


@pytest.mark.parametrize("sink", ["auto", "always"])
def test_pseudo_sink(sink):
    dag = extract(programs.two_outputs_program(), sink=sink)
    assert dag.sink is not None
    assert sum(1 for v in range(dag.num_nodes) if dag.out_degree(v) == 0) == 1
    assert [(dag.label(s), v) for s, d, v in dag.edges if d == dag.sink] == [("B", 8), ("C", 8)]


def test_no_pseudo_sink_on_several_exits_is_refused():
    """extract never returns a DAG that fails validate(): two exits without a pseudo sink raise."""
    with pytest.raises(DAGContractError, match="^extract: DAG 'two_outputs' has 2 exits"):
        extract(programs.two_outputs_program(), sink="never")


@pytest.mark.slow
def test_pseudo_sink_on_a_single_exit():
    dag = extract(programs.chain_program(), sink="always")
    dag.validate()
    assert volumes(dag)[-1] == ("B", "pseudo-sink", 8)


#: (N, K, M) of the matrix-multiply tests: LeNet's first layer, then degenerate sizes (those under mv in the fast
#: subset, every shape in the full suite).
MMM_SIZES = [(6, 25, 576), (1, 1, 1), (3, 1, 5), (1, 4, 1)]


@pytest.mark.parametrize(
    ("shape", "n", "k", "m"),
    [
        pytest.param(shape, *size, marks=[] if shape == "mv" or size == MMM_SIZES[0] else [pytest.mark.slow])
        for size in MMM_SIZES
        for shape in SHAPES
    ],
)
def test_mmm_shapes(shape, n, k, m):
    dag = extract(programs.mmm_program(shape, n, k, m))
    dag.validate()
    tasks = {"mv": m, "op": k, "lmv": n}[shape]
    assert sum(1 for v in dag.tasks if dag.node(v).info.map == shape.upper()) == tasks
    # I/O = the inputs read once (N·K + K·M) + the copies into the operand buffers + the tasks'
    # reads of each reused operand buffer (N·K·M per buffer) + C written once (N·M).
    copies = {"mv": k * m, "op": k * m + n * k, "lmv": n * k}[shape]
    reused = {"mv": n * k * m, "op": 2 * n * k * m, "lmv": n * k * m}[shape]
    reads = n * k + k * m
    assert metrics.io_volume(dag) == reads + copies + reused + n * m


@pytest.mark.slow
def test_symbolic_task_map_needs_sizes():
    n, k, m = (dace.symbol(s) for s in "NKM")
    sdfg = programs.mmm_program("mv", n, k, m)
    with pytest.raises(DcaccelError, match="task map 'MV' has a symbolic number of iterations"):
        extract(sdfg)
    concrete = extract(sdfg, symbols={"N": 2, "K": 3, "M": 4})
    assert sum(1 for v in concrete.tasks if concrete.label(v).startswith("MV")) == 4


@pytest.mark.slow
def test_coarse_keeps_symbolic_volumes(caplog):
    n, k, m = (dace.symbol(s) for s in "NKM")
    with caplog.at_level("DEBUG", logger="dcaccel.dag.extract"):
        dag = extract(programs.mmm_program("mv", n, k, m), "coarse")
        concrete = extract(programs.mmm_program("mv", 6, 25, 576), "coarse")
    assert caplog.text.count("container '_a_stream' made a buffer node") == 2
    assert {s.name for s in dag.symbols} == {"N", "K", "M"}
    sizes = {"N": 6, "K": 25, "M": 576}
    assert metrics.io_volume(dag.evaluate(**sizes)) == metrics.io_volume(concrete)


def test_loops_are_refused():
    with pytest.raises(DcaccelError, match="control-flow block"):
        extract(programs.loop_program())


@pytest.mark.parametrize(("kwargs", "match"), [({"edge_volume": "max"}, "edge_volume"), ({"sink": "x"}, "sink")])
def test_bad_options(kwargs, match):
    with pytest.raises(DcaccelError, match=match):
        extract(programs.chain_program(), **kwargs)


@pytest.mark.parametrize("shape", SHAPES)
def test_every_task_names_the_node_it_lowers(seed, seed_dags, shape):
    dag = seed_dags[shape, "exact"]
    (conv,) = [node.label for node, _ in seed.sdfg.all_nodes_recursive() if isinstance(node, dace.nodes.LibraryNode)]
    origins = {(dag.info(v).op, dag.info(v).node, dag.info(v).implementation) for v in dag.tasks}
    assert origins == {("Conv", conv, shape)}


@pytest.mark.slow
def test_origins_survive_fusion():
    """Origins are keyed by map-entry guid, which DaCe keeps through the copy fusion works on; a
    fused task keeps the first origin and lists all of them under ``fused``."""
    sdfg = programs.chain_program()
    entries = {
        node.map.label: node
        for state in sdfg.states()
        for node in state.nodes()
        if isinstance(node, dace.nodes.MapEntry)
    }
    origins = {
        entries["Inc_map"]: SimpleNamespace(node="inc1", op_type="Add", implementation="canonical"),
        entries["Dec_map"]: SimpleNamespace(node="dec1", op_type="Sub", implementation="canonical"),
    }
    lowered = SimpleNamespace(sdfg=sdfg, origins=origins)
    dag = extract(lowered)
    assert [dag.info(v).node for v in dag.tasks] == ["inc1", None, "dec1"]
    fused = extract(lowered, fusion=True)
    (task,) = fused.tasks
    # and the arithmetic of the three tasklets it holds: a + 1 and a - 3 (ops), a * 2 (a MAC), per element
    assert fused.info(task) == TaskInfo(
        op="Add",
        node="inc1",
        implementation="canonical",
        fused=("inc1", "dec1"),
        macs=8,
        ops=16,
        state="chain",
        map="Dec_map",
    )


#: The built-in workloads with convolutions (name, sizes), small where the default is large: the default
#: MobileNetV2 block's DAG has 608,405 tasks (a minute to extract), ResNet-18's 224×224 input takes 10 s
#: to load. Their lowerings are those of tests/transforms/test_fully_lowered.py (shared per session).
CONV_WORKLOADS = [
    pytest.param("conv-seed", {}, id="conv-seed"),
    pytest.param("lenet", {}, id="lenet"),
    pytest.param("mobilenetv2-block", {"channels": 8, "image": 7}, id="mobilenetv2-block"),
    pytest.param("resnet18", {"image": 64}, id="resnet18", marks=pytest.mark.slow),
]


def _slow_lowering(name: str, implementation: str) -> list:
    """LeNet's and the MobileNetV2 block's lowerings other than mv (a second each): the full suite's, as in
    tests/transforms/test_fully_lowered.py."""
    return [pytest.mark.slow] if name in ("lenet", "mobilenetv2-block") and implementation != "mv" else []


@pytest.mark.filterwarnings("ignore:extract. ")
@pytest.mark.parametrize(
    ("name", "sizes", "implementation"),
    [
        pytest.param(
            *case.values,
            implementation,
            marks=[*case.marks, *_slow_lowering(case.values[0], implementation)],
            id=f"{case.id}-{implementation}",
        )
        for case in CONV_WORKLOADS
        for implementation in ("mv", "op", "lmv", "direct")
    ],
)
def test_every_conv_implementation_extracts_a_valid_dag(
    name, sizes, implementation, builtin_workload, lowered_workload
):
    """extract validates what it returns; every Conv lowering gives a DAG that meets the contract
    (the direct conv with a bias used to read B once per output beside patch-times X and W). A Gemm
    takes the same matrix-multiply shape (``mv`` beside the direct conv)."""
    choices = {"Conv": implementation}
    if "Gemm" in nodes_by_op_type(builtin_workload(name, **sizes).sdfg):
        choices["Gemm"] = "mv" if implementation == "direct" else implementation
    dag = extract(lowered_workload(name, choices, **sizes))
    dag.validate()
    conv_tasks = {dag.node(v).info.implementation for v in dag.tasks if dag.node(v).info.op == "Conv"}
    assert conv_tasks == {implementation}


def test_direct_conv_with_bias_is_a_conv_task_and_a_bias_task(seed):
    """Conv reads the 25-element window of X and W for each of the 3,456 outputs; AddBias reads each
    output once with its bias."""
    dag = extract(seed.lower({"Conv": "direct"}))
    rename = seed_names(seed)
    assert edge_table(dag, rename) == Counter(
        {
            ("pseudo-source", "X", 86400): 1,
            ("pseudo-source", "W", 86400): 1,
            ("pseudo-source", "B", 3456): 1,
            ("X", "Conv", 86400): 1,
            ("W", "Conv", 86400): 1,
            ("Conv", "AddBias", 3456): 1,
            ("B", "AddBias", 3456): 1,
            ("AddBias", "Y", 3456): 1,
        }
    )
