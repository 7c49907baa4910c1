"""``pusch-mimo`` as a pipeline of canonical stages: structure, task DAG and closed forms (no compile), and
numbers against numpy's solver (one compile per MMM shape, and one of the unlowered program)."""

import numpy as np
import pytest
from dace.libraries.blas import MatMul
from dace.libraries.linalg import Inv

from dcaccel import workloads
from dcaccel.dag import metrics
from dcaccel.dag.extract import extract
from dcaccel.dag.symbolic import symbolic_metrics
from dcaccel.frontend.execution import run_sdfg
from dcaccel.verification import verify
from dcaccel.workloads import pusch_mimo

SHAPES = ("mv", "op", "lmv")
PRODUCTS = ("HtR", "gram", "W", "detected")
LAYERS = (2, 3)
#: The fast subset lowers the two-layer workload only (three lowerings), the full suite both.
LAYER_PARAMETERS = [LAYERS[0], *(pytest.param(layers, marks=pytest.mark.slow) for layers in LAYERS[1:])]
# (S, A): the defaults, one subcarrier and one antenna, and more antennas than subcarriers
SIZES = [{"S": 4, "A": 8}, {"S": 1, "A": 1}, {"S": 3, "A": 5}]


def mmse_detection(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """x[s] = (H[s]ᵀ R[s] H[s] + I)⁻¹ H[s]ᵀ R[s] y[s] by numpy's solver, subcarrier by subcarrier."""
    H, R, y = inputs["H"], inputs["R"], inputs["y"]
    layers = H.shape[2]
    return np.stack(
        [np.linalg.solve(H[s].T @ R[s] @ H[s] + np.eye(layers), H[s].T @ R[s] @ y[s]) for s in range(H.shape[0])]
    )


def task_count(shape: str, s, a, layers):
    """Tasks of the lowered pipeline. The products are HtR (N, K, M) = (L, A, A), gram (L, A, L),
    W (L, L, A) and detected (L, A, 1); each has a task per subcarrier and column (mv), inner index (op)
    or row (lmv), and two single tasks (BcastA / BcastB and Gather) or one (Reduce). The inverse has a
    task per subcarrier; the transpose, the regularisation and the two reshapes are single tasks."""
    per_subcarrier = {"mv": a + layers + a + 1, "op": a + a + layers + a, "lmv": 4 * layers}[shape]
    single = {"mv": 2, "op": 1, "lmv": 2}[shape]
    return s * (per_subcarrier + 1) + 4 * single + 4


class _Lowered(dict):
    """Each workload lowered with an MMM shape, keyed by (layers, shape), when first read."""

    def __init__(self, pusch: dict):
        super().__init__()
        self._pusch = pusch

    def __missing__(self, key):
        layers, shape = key
        self[key] = self._pusch[layers].lower({"MatMul": shape})
        return self[key]


@pytest.fixture(scope="module")
def pusch():
    """The workload at each number of layers of :data:`LAYERS`."""
    return {layers: workloads.get("pusch-mimo", L=layers) for layers in LAYERS}


@pytest.fixture(scope="module")
def lowered(pusch):
    """Each workload lowered with every MMM shape, keyed by (layers, shape), once for this module."""
    return _Lowered(pusch)


@pytest.mark.slow
def test_program_stages(pusch):
    workload = pusch[2]
    assert workload.symbols == {"S": 4, "A": 8}
    assert [spec.shape for spec in workload.inputs] == [("S", "A", 2), ("S", "A", "A"), ("S", "A")]
    library = {node.label: node for node, _ in workload.sdfg.all_nodes_recursive() if isinstance(node, MatMul | Inv)}
    assert sorted(library) == sorted((*PRODUCTS, "inv"))
    assert library["inv"].implementation == "canonical"


@pytest.mark.parametrize("shape", SHAPES)
def test_choice_applies_to_every_product(lowered, shape):
    assert lowered[2, shape].implementations == {**dict.fromkeys(PRODUCTS, shape), "inv": "canonical"}


@pytest.mark.slow
def test_a_product_is_chosen_by_its_stage_name(pusch):
    mixed = pusch[2].lower({"MatMul": "lmv", "gram": "op"})
    assert mixed.implementations == {"HtR": "lmv", "gram": "op", "W": "lmv", "detected": "lmv", "inv": "canonical"}
    extract(mixed).validate()


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: f"S{s['S']}A{s['A']}")
@pytest.mark.parametrize("layers", LAYER_PARAMETERS)
@pytest.mark.parametrize("shape", SHAPES)
def test_dag_is_canonical(lowered, shape, layers, sizes):
    """The DAG validates (every task's in-edges carry one volume, its out-edges one volume), with the
    expected number of tasks, and the inverse is one task per subcarrier from the L×L regularised Gram
    matrix to its inverse."""
    dag = extract(lowered[layers, shape], symbols=sizes)
    dag.validate()
    assert len(dag.tasks) == task_count(shape, sizes["S"], sizes["A"], layers)
    inverse = [t for t in dag.tasks if dag.node(t).info.map == "inverse"]
    assert [dag.node(t).label for t in inverse] == [f"inverse{s}" for s in range(sizes["S"])]
    assert {dag.volume(p, t) for t in inverse for p in dag.predecessors(t)} == {layers * layers}
    assert {dag.volume(t, q) for t in inverse for q in dag.successors(t)} == {layers * layers}


@pytest.mark.parametrize("layers", LAYER_PARAMETERS)
@pytest.mark.parametrize("shape", SHAPES)
def test_closed_form_equals_extraction(lowered, shape, layers):
    closed = symbolic_metrics(lowered[layers, shape], symbols={})
    assert {s.name for s in closed.symbols} == {"S", "A"}
    for sizes in SIZES:
        dag = extract(lowered[layers, shape], symbols=sizes)
        evaluated = closed.evaluate(**sizes)
        assert evaluated.tasks == len(dag.tasks) == task_count(shape, sizes["S"], sizes["A"], layers)
        assert evaluated.buffers == len(dag.buffers)
        assert evaluated.edges == sum(1 for src, _, _ in dag.edges if src != dag.source)
        assert evaluated.work == metrics.work(dag)
        assert evaluated.io_volume == metrics.io_volume(dag)


def test_reference_is_the_mmse_detection(pusch):
    inputs = pusch[3].random_inputs(seed=2)
    np.testing.assert_allclose(pusch[3].reference(**inputs), mmse_detection(inputs), rtol=1e-12, atol=1e-12)


def _transmissions(layers: int) -> list[dict[str, np.ndarray]]:
    """Realistic inputs at the sizes of :data:`SIZES` (one compiled program runs them all)."""
    rng = np.random.default_rng(7)
    return [pusch_mimo.sample_inputs(rng, {"H": (sizes["S"], sizes["A"], layers)}) for sizes in SIZES]


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_lowered_program_matches_numpy(pusch, lowered, shape):
    workload, program = pusch[2], lowered[2, shape]
    for inputs in _transmissions(2):
        (output,) = run_sdfg(program.sdfg, workload, inputs).values()
        np.testing.assert_allclose(output, mmse_detection(inputs), rtol=1e-10, atol=1e-12)
    assert verify(workload, program).passed


@pytest.mark.slow
# DaCe's own BatchedMatMul squeezes the A × 1 operand of ``W @ received`` and cannot prove K = K.
@pytest.mark.filterwarnings("ignore:First tensor's last mode")
def test_unlowered_program_matches_numpy(pusch):
    workload = pusch[3]
    for inputs in _transmissions(3):
        (output,) = workload.run(inputs).values()
        np.testing.assert_allclose(output, mmse_detection(inputs), rtol=1e-10, atol=1e-12)
