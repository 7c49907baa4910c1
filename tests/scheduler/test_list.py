"""The list scheduler: hand-computed schedules, the placement structure against the plain insertion
rule, priorities and communication cost."""

from __future__ import annotations

import random

import pytest

from dcaccel.dag import NodeKind, TaskDAG
from dcaccel.dag import generators as gen
from dcaccel.errors import DcaccelError
from dcaccel.scheduler import schedule
from dcaccel.scheduler.graph import CanonicalGraph
from dcaccel.scheduler.list import _Processors, priority_order
from dcaccel.scheduler.timeline import insertion_start


@pytest.mark.parametrize("insertion", [True, False], ids=["insertion", "append"])
@pytest.mark.parametrize(
    ("width", "pes", "expected"),
    [(4, 1, 6 * 10), (4, 2, 4 * 10), (4, 3, 4 * 10), (4, 4, 3 * 10), (4, 16, 3 * 10), (1, 2, 3 * 10)],
)
def test_fork_join_makespan(width, pes, expected, insertion):
    """fork (10) -> width branches (10 each) -> join (10): the branches run ⌈width/P⌉ rounds."""
    dag = gen.fork_join(width, 1, 10)
    result = schedule(dag, pes, "list", insertion=insertion)
    assert result.makespan == expected
    assert result.lower_bound == max(30, -(-(width + 2) * 10 // pes))


@pytest.mark.parametrize("pes", [1, 2, 7, 128])
@pytest.mark.parametrize("volumes", [[3, 9, 1, 4], [5, 5], [1, 1, 1, 1, 1]], ids=["rates", "single", "unit"])
def test_chain_runs_sequentially_on_any_pes(volumes, pes):
    dag = gen.chain(volumes)
    result = schedule(dag, pes, "list")
    assert result.makespan == result.work == result.depth
    assert len({result.timing.pe[v] for v in dag.tasks}) == 1


@pytest.mark.parametrize("shape", ["mv", "op", "lmv"])
def test_enough_pes_reach_the_critical_path(shape):
    dag = gen.mmm(shape, 3, 4, 5)
    result = schedule(dag, len(dag.tasks), "list")
    assert result.makespan == result.depth


def test_communication_cost_keeps_branches_together():
    """With 1 element per cycle between PEs, moving a 10-element branch costs 10 cycles: both branches
    stay on the fork's PE (makespan 40) instead of running in parallel (makespan 30)."""
    dag = gen.fork_join(2, 1, 10)
    assert schedule(dag, 2, "list").makespan == 30
    slow = schedule(dag, 2, "list", bandwidth=1.0)
    assert slow.makespan == 40
    assert len({slow.timing.pe[v] for v in dag.tasks}) == 1
    # 1 cycle per transfer: the second branch runs on PE 1 from 11; the join follows it there and
    # fetches the first branch's result (ready at 20 + 1)
    fast = schedule(dag, 2, "list", bandwidth=10.0)
    assert fast.makespan == 11 + 10 + 10


def test_bad_bandwidth_is_refused():
    with pytest.raises(DcaccelError, match="bandwidth must be positive"):
        schedule(gen.chain([2, 2]), 2, "list", bandwidth=0)


def test_priority_is_rank_descending_and_topological():
    dag = gen.layered(60, 7, seed=3, buffer_fraction=0.3)
    g = CanonicalGraph.from_dag(dag)
    order = priority_order(g)
    position = {v: i for i, v in enumerate(order)}
    assert sorted(order) == list(range(dag.num_nodes))
    assert all(position[u] < position[v] for u, v, _ in dag.edges)
    assert order[0] == dag.source


def _events(rng: random.Random) -> list[tuple[int, int]]:
    """Non-overlapping (start, end) events, some of zero length, in random insertion order."""
    time, events = rng.randint(0, 3), []
    for _ in range(rng.randint(0, 8)):
        length = rng.choice([0, 0, 1, 2, 5])
        events.append((time, time + length))
        time += length + rng.choice([0, 0, 1, 3, 7])
    rng.shuffle(events)
    return events


@pytest.mark.parametrize("seed", range(40))
def test_placement_structure_agrees_with_the_insertion_rule(seed):
    """The gap lists and free-time tree answer what the reference's scan of a PE's events answers."""
    rng = random.Random(seed)
    pes = rng.randint(1, 4)
    processors = _Processors(pes, insertion=True)
    lists: list[list[tuple[int, int]]] = [[] for _ in range(pes)]
    for p in range(pes):
        for start, end in _events(rng):
            processors.place(p, start, end)
            lists[p].append((end, start))
            lists[p].sort()
    for _ in range(30):
        est, duration = rng.randint(0, 40), rng.choice([0, 1, 2, 3, 6, 10])
        expected = min((insertion_start(lists[p], est, duration, duration), p) for p in range(pes))
        assert processors.best(est, duration) == expected
        for p in range(pes):
            assert processors.start_on(p, est, duration) == insertion_start(lists[p], est, duration, duration)


@pytest.mark.parametrize(
    ("est", "duration", "expected"),
    [
        (0, 9, 0),  # ends at 9, strictly before the event at 10: goes first
        (0, 10, 20),  # would end exactly when the first event starts: not before it (strict test)
        (5, 5, 20),  # 5 + 5 = 10 does not end strictly before 10: next gap, 20..30
        (21, 5, 21),  # inside the gap 20..30
        (21, 10, 35),  # too long for the rest of the gap: after the last event
        (31, 3, 35),
    ],
)
def test_insertion_rule(est, duration, expected):
    """Events [10, 20) and [30, 35) on one PE."""
    assert insertion_start([(20, 10), (35, 30)], est, duration, duration) == expected


def test_zero_length_nodes_split_gaps():
    """A buffer placed inside a gap splits it, as in the reference: a task that would have fitted
    the whole gap has to go after it."""
    processors = _Processors(1, insertion=True)
    processors.place(0, 0, 10)
    processors.place(0, 20, 30)
    assert processors.best(10, 10) == (10, 0)
    processors.place(0, 15, 15)  # a zero-length event in the gap 10..20
    assert processors.best(10, 10) == (30, 0)
    assert processors.best(10, 5) == (10, 0)


def test_list_schedule_of_a_buffer_exit():
    dag = TaskDAG("buffer-exit")
    s = dag.add_node(NodeKind.SOURCE, "s")
    a, b = dag.add_node(NodeKind.TASK, "a"), dag.add_node(NodeKind.TASK, "b")
    out = dag.add_node(NodeKind.BUFFER, "out")
    dag.add_edge(s, a, 4)
    dag.add_edge(s, b, 6)
    dag.add_edge(a, out, 3)
    dag.add_edge(b, out, 3)
    result = schedule(dag, 2, "list")
    assert result.makespan == 6
    assert result.timing.start[out] == result.timing.end[out] == 6
