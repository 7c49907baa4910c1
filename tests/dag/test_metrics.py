"""DAG metrics: work, depth, I/O volume and streaming depth, concrete and symbolic."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy

from dcaccel.dag import NodeKind, TaskDAG, depth, io_volume, streaming_depth, task_costs, work
from dcaccel.dag import generators as gen
from tests.scheduler.conftest import load_vector, vector_files

N, K = sympy.symbols("N K", positive=True, integer=True)


@pytest.mark.parametrize("path", vector_files(), ids=lambda p: p.stem)
def test_metrics_match_reference(path):
    data, dag = load_vector(path.stem)
    expected = data["results"][0]
    assert work(dag) == expected["work"]
    assert depth(dag) == expected["depth"]
    assert io_volume(dag) == expected["io_buffer"]
    assert float(streaming_depth(dag)) == pytest.approx(expected["streaming_depth"], abs=1e-9)


@pytest.mark.parametrize(
    ("volumes", "costs", "expected_depth", "expected_streaming_depth"),
    [
        # T0 reads 4 writes 8 (R=2, level 2); T1 reads 8 writes 2 (level 3); largest volume 8
        ([4, 8, 2], [8, 8], 16, 11),
        # element-wise: levels 1, 2, 3; volume 5
        ([5, 5, 5, 5], [5, 5, 5], 15, 8),
        # one task: reads 7, writes 1 to the sink: level 1
        ([7, 1], [7], 7, 8),
        # an upsampler by 3/2: level 3/2
        ([2, 3], [3], 3, Fraction(9, 2)),
    ],
    ids=["up-down", "elementwise", "single-task", "fractional"],
)
def test_chain_metrics(volumes, costs, expected_depth, expected_streaming_depth):
    dag = gen.chain(volumes)
    assert task_costs(dag)[1:-1] == costs
    assert work(dag) == sum(costs)
    assert depth(dag) == expected_depth
    assert streaming_depth(dag) == expected_streaming_depth
    assert io_volume(dag) == 0


def test_exit_task_costs_its_input():
    dag = TaskDAG("one")
    s = dag.add_node(NodeKind.SOURCE, "s")
    t = dag.add_node(NodeKind.TASK, "t")
    dag.add_edge(s, t, 9)
    assert task_costs(dag) == [0, 9]
    assert (work(dag), depth(dag)) == (9, 9)
    # the exit's level is 1 (R = -1/I counts as 1); it reads 9 elements
    assert streaming_depth(dag) == 10


@pytest.mark.parametrize(
    ("shape", "size", "tasks", "io"),
    [
        # A out 6; B out 12; _b in 12, out 4 columns x 6; C in 8
        ("mv", (2, 3, 4), 4 + 2, 6 + 12 + 12 + 4 * 6 + 8),
        # A out 6; B out 12; _a in 6, out 3 x 8; _b in 12, out 3 x 8; C in 8
        ("op", (2, 3, 4), 3 + 1, 6 + 12 + 6 + 3 * 8 + 12 + 3 * 8 + 8),
        # A out 6; B out 12; _a in 6, out 2 rows x 12; C in 8
        ("lmv", (2, 3, 4), 2 + 2, 6 + 12 + 6 + 2 * 12 + 8),
        ("mv", (1, 1, 1), 1 + 2, 1 + 1 + 1 + 1 + 1),
    ],
    ids=["mv", "op", "lmv", "mv-1x1x1"],
)
def test_mmm_io_volume(shape, size, tasks, io):
    """Σ over buffers (A, B, operand copies, C) of volume in + out, pseudo-source edges excluded."""
    dag = gen.mmm(shape, *size)
    dag.validate()
    assert len(dag.tasks) == tasks
    assert io_volume(dag) == io


def symbolic_dag() -> TaskDAG:
    """source -> A (buffer, N·K) -> T (reads N·K, writes N) -> U (reads N, writes K) -> C (buffer, exit)."""
    dag = TaskDAG("symbolic")
    s = dag.add_node(NodeKind.SOURCE, "s")
    a = dag.add_node(NodeKind.BUFFER, "A")
    t, u = dag.add_node(NodeKind.TASK, "T"), dag.add_node(NodeKind.TASK, "U")
    c = dag.add_node(NodeKind.BUFFER, "C")
    dag.add_edge(s, a, N * K)
    dag.add_edge(a, t, N * K)
    dag.add_edge(t, u, N)
    dag.add_edge(u, c, K)
    return dag


def test_symbolic_metrics_are_expressions():
    dag = symbolic_dag()
    assert work(dag) == sympy.Max(N * K, N) + sympy.Max(N, K)
    assert io_volume(dag) == N * K + K
    assert depth(dag).free_symbols == {N, K}


@pytest.mark.parametrize("values", [{"N": 1, "K": 1}, {"N": 2, "K": 3}, {"N": 5, "K": 1}, {"N": 7, "K": 9}])
def test_symbolic_metrics_evaluate_to_concrete_ones(values):
    dag = symbolic_dag()
    concrete = dag.evaluate(**values)
    subs = {N: values["N"], K: values["K"]}
    for metric in (work, depth, io_volume, streaming_depth):
        assert sympy.nsimplify(metric(dag).subs(subs)) == metric(concrete), metric.__name__
