"""Sweeps on the seed convolution: one row per point, the seed table's I/O and makespans.

The seed table (seed 003) lists, for Conv(1→6, 5×5) on 1×1×28×28: I/Os MV 129,474, OP 222,936,
LMV 150,936 and streaming makespans at 16/128 PEs MV 145,730/35,138, OP 194,113/107,713,
LMV 35,715/35,715 — exact outputs of the reference tool (tests/data/vectors/seedconv_*.json). The
makespans are reproduced under the reference edge-volume rule; the default "exact" rule gives
smaller MV/OP makespans (docs/dag.md explains why).
"""

import dataclasses
import warnings

import pytest

from dcaccel.errors import DcaccelError
from dcaccel.exploration.points import ExplorationPoint
from dcaccel.exploration.sweep import explore

SHAPES = {"Conv": ["mv", "op", "lmv"]}
SEED_IO = {"Conv=mv": 129_474, "Conv=op": 222_936, "Conv=lmv": 150_936}
SEED_MAKESPAN = {
    ("Conv=mv", 16): 145_730,
    ("Conv=mv", 128): 35_138,
    ("Conv=op", 16): 194_113,
    ("Conv=op", 128): 107_713,
    ("Conv=lmv", 16): 35_715,
    ("Conv=lmv", 128): 35_715,
}


@pytest.fixture(scope="module")
def exact(conv_seed):
    return explore(conv_seed, SHAPES, pes=[1, 16, 128], onchip_memory=[0, 4096], progress=False)


@pytest.fixture(scope="module")
def reference(conv_seed):
    return explore(conv_seed, SHAPES, pes=[16, 128], scheduler="streaming", edge_volume="reference", progress=False)


def test_columns_are_the_point_fields(exact):
    assert list(exact.columns) == [field.name for field in dataclasses.fields(ExplorationPoint)]


def test_one_row_per_point(exact):
    assert len(exact) == 3 * 3 * 2 * 2
    assert not exact.duplicated(["assignment", "pes", "scheduler", "onchip_memory"]).any()


@pytest.mark.parametrize("rule", ["exact", "reference"])
def test_io_volume_is_the_seed_table(rule, exact, reference):
    results = exact if rule == "exact" else reference
    io = results.groupby("assignment")["io_volume"].unique()
    assert {name: list(values) for name, values in io.items()} == {name: [v] for name, v in SEED_IO.items()}


def test_reference_rule_reproduces_the_seed_makespans(reference):
    found = {(row.assignment, row.pes): row.makespan for row in reference.itertuples()}
    assert found == SEED_MAKESPAN


def test_task_counts_are_the_seed_structure(exact):
    tasks = exact.groupby("assignment")["tasks"].first().to_dict()
    # 576 MV + Xr, Wr, BcastA, Gather, AddBias, ReshapeOut; 25 OP + Reduce + 4; 6 LMV + BcastB, Gather + 4
    assert tasks == {"Conv=mv": 582, "Conv=op": 30, "Conv=lmv": 12}


def test_metrics_are_consistent(exact):
    assert (exact["makespan"] >= exact["lower_bound"]).all()
    assert exact["speedup"].to_numpy() == pytest.approx((exact["work"] / exact["makespan"]).to_numpy())
    assert exact["utilisation"].to_numpy() == pytest.approx((exact["speedup"] / exact["pes"]).to_numpy())
    one_pe = exact[exact["pes"] == 1]
    assert (one_pe["makespan"] == one_pe["work"]).all()


def test_onchip_memory_moves_io_on_chip(exact):
    none, some = (exact[exact["onchip_memory"] == size] for size in (0, 4096))
    assert (none["onchip_io"] == 0).all()
    assert (some["onchip_io"] > 0).any()
    total = ["offchip_io", "onchip_io", "streamed_io"]
    assert none[total].sum(axis=1).tolist() == some[total].sum(axis=1).tolist()


@pytest.mark.parametrize("strategy", ["per-node", "greedy"])
def test_node_strategies_key_the_conv_node(strategy, conv_seed):
    results = explore(conv_seed, SHAPES, pes=[16], scheduler="list", strategy=strategy, progress=False)
    assert len(results) == 3
    assert all(text.split("=")[1] in {"mv", "op", "lmv"} for text in results["assignment"])
    assert all(not text.startswith("Conv=") for text in results["assignment"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"strategy": "random"}, "unknown strategy 'random'"),
        ({"scheduler": "fifo"}, "unknown scheduler 'fifo'"),
        ({"pes": []}, "pes is empty"),
    ],
)
def test_bad_options_are_named(options, message, conv_seed):
    with pytest.raises(DcaccelError, match=message):
        explore(conv_seed, SHAPES, progress=False, **options)


@pytest.fixture
def lowerings(monkeypatch):
    """Records, per point label a sweep writes, the implementation per node of the lowering it came from."""
    from dcaccel.exploration import evaluation as sweep

    found: dict[str, set[tuple]] = {}
    original = sweep.build_dag

    def build_dag(workload, assignment, *options):
        built = original(workload, assignment, *options)
        lowered = workload.lower(assignment.as_dict())
        found.setdefault(built.label, set()).add(tuple(sorted(lowered.implementations.items())))
        return built

    monkeypatch.setattr(sweep, "build_dag", build_dag)
    return found


def _says(label: str, implementations: dict[str, str], nodes_by_op: dict[str, list[str]]) -> bool:
    """Whether ``label`` ("key=name,...") is true of a lowering: a node key names its node's implementation,
    an op-type key the implementation of each of its nodes that is not named itself."""
    if label == "default":
        return True
    choices = dict(item.split("=") for item in label.split(","))
    for key, name in choices.items():
        nodes = [node for node in nodes_by_op.get(key, [key]) if node == key or node not in choices]
        if any(implementations[node] != name for node in nodes):
            return False
    return True


@pytest.mark.parametrize(
    ("implementations", "strategy", "labels"),
    [
        ({"conv": ["mv", "op", "lmv"]}, "per-op-type", ["default"]),
        ({"Conv": ["mv", "op"], "Conv_0": ["lmv", "mv"]}, "per-op-type", ["Conv_0=lmv", "Conv_0=mv"]),
        ({"Conv_0": ["mv", "lmv"]}, "per-node", ["Conv_0=mv", "Conv_0=lmv"]),
        ({"Conv_0": ["op", "lmv"]}, "greedy", ["Conv_0=op", "Conv_0=lmv"]),
        ({"Conv": ["mv", "mv", "op"], "conv": ["lmv"]}, "per-op-type", ["Conv=mv", "Conv=op"]),
    ],
)
def test_labels_are_the_lowering(implementations, strategy, labels, conv_seed, lowerings, recwarn):
    results = explore(conv_seed, implementations, pes=[16], scheduler="list", strategy=strategy, progress=False)
    assert results["assignment"].tolist() == labels
    nodes = {"Conv": ["Conv_0"]}
    for label, lowered in lowerings.items():
        assert len(lowered) == 1 and all(_says(label, dict(one), nodes) for one in lowered)
    assert len(set().union(*lowerings.values())) == len(lowerings)  # different labels, different lowerings
    unknown = [str(w.message) for w in recwarn if "no node or op type" in str(w.message)]
    assert unknown == (
        ["explore conv-seed: no node or op type named 'conv'; ignored"] if "conv" in implementations else []
    )


@pytest.mark.slow
def test_a_node_key_of_its_own_beside_its_op_type(lenet, lowerings):
    results = explore(lenet, {"Conv": ["op"], "conv2": ["mv", "lmv"]}, pes=[4], scheduler="list", progress=False)
    assert results["assignment"].tolist() == ["Conv=op,conv2=mv", "Conv=op,conv2=lmv"]
    nodes = {"Conv": ["conv1", "conv2"]}
    assert all(_says(label, dict(one), nodes) for label, lowered in lowerings.items() for one in lowered)


@pytest.fixture(scope="module")
def opaque_workload():
    """tests/dag/test_opaque.py's model: MatMul, then RandomUniformLike (no implementation: a host task), then Neg."""
    import dcaccel
    from tests.dag.test_opaque import opaque_model

    return dcaccel.load(opaque_model(), name="opaque")


@pytest.mark.slow
def test_opaque_tasks_are_counted_with_their_share_of_the_work_and_one_warning(opaque_workload):
    from dcaccel.transforms.lower import OpaqueOpWarning
    from tests.dag.test_opaque import ELEMENTS

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = explore(opaque_workload, {"MatMul": ["mv", "lmv"]}, pes=[1, 4], progress=False)
    opaque = [w for w in caught if issubclass(w.category, OpaqueOpWarning)]
    assert [str(w.message) for w in opaque] == [
        "explore opaque: 1 node(s) with no canonical implementation lowered as opaque tasks: "
        "randomuniformlike (RandomUniformLike)"
    ]
    assert sorted(results["assignment"].unique()) == ["MatMul=lmv", "MatMul=mv"]
    assert (results["opaque_tasks"] == 1).all()
    assert results["opaque_work_share"].tolist() == pytest.approx((ELEMENTS / results["work"]).tolist(), rel=1e-12)


def test_strict_refuses_an_opaque_workload_before_the_sweep(opaque_workload):
    from dcaccel.errors import UnsupportedOpError

    with pytest.raises(
        UnsupportedOpError, match=r"^unsupported op RandomUniformLike \(node 'randomuniformlike'\): no dcaccel"
    ):
        explore(opaque_workload, {"MatMul": ["mv"]}, pes=[1], progress=False, strict=True)


def test_a_workload_without_opaque_ops_has_none(conv_seed):
    results = explore(conv_seed, {"Conv": ["lmv"]}, pes=[4], scheduler="list", progress=False, strict=True)
    assert results[["tasks", "opaque_tasks", "opaque_work_share"]].values.tolist() == [[12, 0, 0.0]]


@pytest.fixture(scope="module")
def unrunnable_workload(tmp_path_factory):
    """tests/mapping/test_search.py's model: Gemm → Relu → RandomUniformLike → Mul → Gemm (nothing runs its
    RandomUniformLike at opset 22: no dcaccel or DaCe implementation, and onnxruntime has no kernel for it)."""
    import dcaccel
    from tests.mapping.test_search import export_unrunnable_op

    path = tmp_path_factory.mktemp("unrunnable") / "unrunnable.onnx"
    export_unrunnable_op(path)
    return dcaccel.load(str(path), name="unrunnable")


def test_an_op_no_implementation_runs_is_refused_before_the_sweep_and_its_warning(unrunnable_workload, monkeypatch):
    """Every assignment would fail where lowering meets the RandomUniformLike: refused as lower refuses it."""
    from dcaccel.errors import UnsupportedOpError
    from dcaccel.exploration.run import Run
    from tests.mapping.test_search import UNRUNNABLE_REFUSAL

    monkeypatch.setattr(Run, "evaluate", lambda self, batch: pytest.fail("the sweep ran"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(UnsupportedOpError) as refused:
            explore(unrunnable_workload, {"Gemm": ["mv", "op"]}, pes=[1], progress=False)
    assert str(refused.value) == UNRUNNABLE_REFUSAL
    assert [w for w in caught if "opaque" in str(w.message)] == []
    with pytest.raises(UnsupportedOpError) as lowered:
        unrunnable_workload.lower()
    assert str(lowered.value) == str(refused.value)


def test_a_design_without_a_unit_for_an_op_is_refused_before_the_sweep(conv_seed, tmp_path, monkeypatch):
    from dcaccel.exploration.run import Run

    design = tmp_path / "gemm-only.yaml"
    design.write_text(
        "name: gemm-only\nelement_bytes: 4\nclock_mhz: 1000\n"
        "units: {pe: {ops: [Gemm], elements_per_cycle: 1}}\nmemories: {offchip: {level: offchip}}\n"
    )
    monkeypatch.setattr(Run, "evaluate", lambda self, batch: pytest.fail("the sweep ran"))
    for scheduler in ("list", "heft"):
        with pytest.raises(DcaccelError, match=r"^architecture gemm-only: no unit runs op 'Conv'$"):
            explore(conv_seed, SHAPES, pes=[4], scheduler=scheduler, arch=["abstract", str(design)], progress=False)
