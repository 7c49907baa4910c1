"""Closed-form metrics of programs with symbolic sizes (dcaccel.dag.symbolic).

The closed forms are checked against the concrete extraction (dcaccel.dag.extract with the sizes
substituted, then dcaccel.dag.metrics) at several sizes, degenerate ones included, and for every
built-in workload (at its default sizes, or smaller ones where those are large) under every granularity
and both edge-volume rules: the two back-ends of the one walk must give the same DAG.
"""

import dace
import pytest
import sympy

from dcaccel import workloads
from dcaccel.dag import metrics
from dcaccel.dag.extract import extract
from dcaccel.dag.symbolic import SymbolicMetrics, symbolic_metrics
from dcaccel.errors import DAGContractError, DcaccelError
from tests.dag import programs

SHAPES = ("mv", "op", "lmv")
SIZES = [
    {"N": 6, "K": 25, "M": 576},
    {"N": 8, "K": 6, "M": 4},
    {"N": 3, "K": 1, "M": 7},
    {"N": 1, "K": 4, "M": 1},
    {"N": 1, "K": 1, "M": 1},
]
N, K, M = sympy.symbols("N K M")


@pytest.fixture(scope="module")
def mmm_lowered():
    workload = workloads.get("mmm")
    return {shape: workload.lower({"MatMul": shape}) for shape in SHAPES}


def concrete_metrics(dag) -> dict:
    """What the closed form predicts, measured on a concrete DAG (pseudo-source edges not counted)."""
    return {
        "tasks": len(dag.tasks),
        "buffers": len(dag.buffers),
        "edges": sum(1 for s, _, _ in dag.edges if s != dag.source),
        "work": metrics.work(dag),
        "io_volume": metrics.io_volume(dag),
    }


@pytest.mark.filterwarnings("ignore:extract. container")
@pytest.mark.parametrize("rule", ["exact", "reference"])
@pytest.mark.parametrize("granularity", ["task", "coarse"])
@pytest.mark.parametrize("shape", SHAPES)
def test_closed_form_equals_concrete_extraction(mmm_lowered, shape, granularity, rule):
    closed = symbolic_metrics(mmm_lowered[shape], granularity, rule)
    assert closed.symbols == {N, K, M}
    for sizes in SIZES:
        dag = extract(mmm_lowered[shape], granularity, rule, symbols=sizes)
        inserted = [b for b in dag.buffers if dag.node(b).info.inserted_buffer is not None]
        try:
            evaluated = closed.evaluate(**sizes)
        except DcaccelError:
            # The closed form assumes a re-read the concrete sizes do not make: no buffer inserted.
            assert closed.assumptions and not inserted
            continue
        assert concrete_metrics(dag) == {name: getattr(evaluated, name) for name in concrete_metrics(dag)}


def test_io_volume_of_mv_is_a_polynomial(mmm_lowered):
    """A read once by BcastA (N·K), B copied into ``_b_copy`` (K·M out of B, K·M into the copy), every
    MV task re-reads a column of ``_b_copy`` N times (N·K·M in all), C written once (N·M)."""
    closed = symbolic_metrics(mmm_lowered["mv"])
    assert sympy.expand(closed.io_volume - (N * K + 2 * K * M + N * K * M + N * M)) == 0
    assert closed.tasks == M + 2 and closed.buffers == 4 and closed.assumptions == ()


def test_tasks_of_each_shape(mmm_lowered):
    counts = {shape: symbolic_metrics(mmm_lowered[shape]).tasks for shape in SHAPES}
    assert counts == {"mv": M + 2, "op": K + 1, "lmv": N + 2}


def test_coarse_mv_assumes_the_broadcast_is_reread(mmm_lowered):
    closed = symbolic_metrics(mmm_lowered["mv"], "coarse")
    assert closed.buffers == 5 and len(closed.assumptions) == 1
    with pytest.raises(DcaccelError, match="assumes"):
        closed.evaluate(N=2, K=3, M=1)


def test_partial_evaluation_keeps_the_other_symbols(mmm_lowered):
    closed = symbolic_metrics(mmm_lowered["op"])
    partial = closed.evaluate(K=5)
    assert partial.tasks == 6 and partial.symbols == {N, M}
    assert partial.evaluate(N=2, M=3) == closed.evaluate(N=2, K=5, M=3)


def test_fixed_sizes_give_numbers(mmm_lowered):
    closed = symbolic_metrics(mmm_lowered["lmv"], symbols={"N": 2, "K": 3, "M": 4})
    assert closed == SymbolicMetrics(tasks=4, buffers=4, edges=9, work=4 * (6 + 3 + 2), io_volume=24 + 12 + 12 + 8)


def test_unknown_symbol(mmm_lowered):
    with pytest.raises(DcaccelError, match="unknown symbol"):
        symbolic_metrics(mmm_lowered["mv"]).evaluate(P=3)


def test_tiles_need_concrete_sizes(mmm_lowered):
    with pytest.raises(DcaccelError, match="tiles"):
        symbolic_metrics(mmm_lowered["mv"], ("tiles", 2))


#: Sizes of the workloads whose defaults are large: the default MobileNetV2 block's DAG has 608,405 tasks
#: (a minute per extraction); ResNet-18 loads its 224×224 input in 10 s. The same ops at smaller sizes.
WORKLOAD_SIZES = {"mobilenetv2-block": {"channels": 8, "image": 7}, "resnet18": {"image": 64}}
#: Lowering ResNet-18 takes about 10 s: marked slow. Every workload's matrix multiplies are mv, spelled out as
#: tests/transforms/test_fully_lowered.py and tests/dag/test_extract.py spell them, so that the modules share the
#: lowerings (a second or more each).
SLOW_WORKLOADS = {"resnet18"}
#: The extractions of a quarter of a second or more (the larger workloads' task and tile DAGs): the full suite's.
SLOW_EXTRACTIONS = {
    ("lenet", "task"),
    ("lenet", ("tiles", 3)),
    ("mobilenetv2-block", "task"),
    ("transformer-encoder", "task"),
    ("transformer-encoder", ("tiles", 3)),
    ("pusch-mimo", "task"),
}
WORKLOAD_CHOICES = {
    "conv-seed": {"Conv": "mv"},
    "lenet": {"Conv": "mv", "Gemm": "mv"},
    "resnet18": {"Conv": "mv", "Gemm": "mv"},
    "mobilenetv2-block": {"Conv": "mv"},
    "transformer-encoder": {"MatMul": "mv"},
    "mmm": {"MatMul": "mv"},
    "pusch-mimo": {"MatMul": "mv"},
}
GRANULARITIES = ["task", "coarse", ("tiles", 3)]


def _workload_cases():
    for name in workloads.names():
        for granularity in GRANULARITIES:
            if name == "resnet18" and granularity != "coarse":
                continue
            marks = [pytest.mark.slow] if name in SLOW_WORKLOADS or (name, granularity) in SLOW_EXTRACTIONS else []
            yield pytest.param(name, granularity, marks=marks, id=f"{name}-{granularity}")


@pytest.mark.filterwarnings("ignore:extract. ")
@pytest.mark.parametrize("rule", ["exact", "reference"])
@pytest.mark.parametrize(("name", "granularity"), list(_workload_cases()))
def test_closed_form_of_every_workload_equals_its_dag(lowered_workload, name, granularity, rule):
    """The closed form evaluated at the workload's sizes gives the metrics of the DAG ``extract`` builds
    (tiles need concrete iteration counts: the sizes are then fixed before the walk)."""
    lowered = lowered_workload(name, WORKLOAD_CHOICES[name], **WORKLOAD_SIZES.get(name, {}))
    sizes = lowered.workload.symbols
    closed = symbolic_metrics(lowered, granularity, rule, symbols=sizes if isinstance(granularity, tuple) else None)
    evaluated = closed.evaluate(**{s.name: sizes[s.name] for s in closed.symbols})
    dag = extract(lowered, granularity, rule)
    assert {name: getattr(evaluated, name) for name in concrete_metrics(dag)} == concrete_metrics(dag)


@pytest.mark.filterwarnings("ignore:extract. container")
@pytest.mark.parametrize("rule", ["exact", pytest.param("reference", marks=pytest.mark.slow)])
@pytest.mark.parametrize(
    "build",
    [
        programs.chain_program,
        programs.two_state_program,
        programs.in_place_program,
        programs.reread_program,
        programs.halves_program,
        programs.two_outputs_program,
        lambda: programs.prefix_program(6, 4),
        lambda: programs.split_program(4, 4),
    ],
    ids=["chain", "two-states", "in-place", "reread", "halves", "two-outputs", "prefix", "split"],
)
def test_closed_form_of_each_rule_equals_its_dag(build, rule):
    """Every extraction rule (collapsed streams, versions, re-reads, unequal volumes repaired, the pseudo
    sink) gives the same metrics in both back-ends."""
    closed = symbolic_metrics(build(), edge_volume=rule)
    assert closed.assumptions == ()
    concrete = concrete_metrics(extract(build(), edge_volume=rule))
    assert {name: getattr(closed, name) for name in concrete} == concrete


@pytest.mark.filterwarnings("ignore:extract. container")
@pytest.mark.parametrize(
    ("n", "k", "repaired"),
    [
        (6, 4, True),
        pytest.param(6, 1, True, marks=pytest.mark.slow),
        pytest.param(6, 6, False, marks=pytest.mark.slow),
        (1, 1, False),
    ],
)
def test_non_uniform_output_is_repaired_in_closed_form(n, k, repaired):
    """Inc sends n elements into C and k through t: unequal unless k = n, and then t becomes a buffer.
    The closed form keeps the condition k != n and refuses sizes that break it."""
    closed = symbolic_metrics(programs.prefix_program(dace.symbol("n"), dace.symbol("k")))
    assert len(closed.assumptions) == 1
    dag = extract(programs.prefix_program(n, k))
    assert any(dag.node(b).info.inserted_buffer for b in dag.buffers) == repaired
    if not repaired:
        with pytest.raises(DcaccelError, match="assumes"):
            closed.evaluate(n=n, k=k)
        return
    evaluated = closed.evaluate(n=n, k=k)
    assert {name: getattr(evaluated, name) for name in concrete_metrics(dag)} == concrete_metrics(dag)


def test_an_undecidable_repair_is_refused():
    """Sum's in-edges carry n and k: which one the repair keeps depends on the sizes."""
    with pytest.raises(DcaccelError, match="^symbolic metrics: cannot decide .* 'Sum_map' is the largest"):
        symbolic_metrics(programs.split_program(dace.symbol("n"), dace.symbol("k")))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:extract. container")
def test_unequal_volumes_into_a_buffer_are_refused_like_validate():
    """Unequal halves make t a buffer whose in-edges differ: no repair, in closed form as in extract."""
    with pytest.raises(DAGContractError, match="buffer 't' has in-edges with different volumes"):
        symbolic_metrics(programs.split_program(4, 3))
    with pytest.raises(DAGContractError, match="^extract: buffer 3 't' has in-edges with different volumes"):
        extract(programs.split_program(4, 3))
