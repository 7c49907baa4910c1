"""The concrete back-end's vectorised arithmetic (dcaccel.dag.extract): exact volumes, the merge of the
edges a pass adds, and the contract-repair faults, each against the rule written out edge by edge."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from dcaccel.dag import volume as vol
from dcaccel.dag.extract import _INT64_MAX, ConcreteGraph, EdgeLog, Granularity, TaskGroup, _exact_volumes
from dcaccel.dag.task import Role, TaskInfo
from dcaccel.dag.taskdag import NodeKind
from dcaccel.dag.walk import Rows
from dcaccel.errors import DcaccelError


def rounded_share(reads: int, written: int, overlap: int, box: int, read: int) -> int:
    """The exact rule for one edge, as docs/dag.md states it: reads · (written · overlap / box) / read."""
    return vol.rounded(Fraction(reads * written * overlap, box * read))


# (reads, written, overlap, box, read) per row
CASES = {
    "empty": [],
    "whole quotients": [(6, 6, 6, 6, 6), (3456, 576, 576, 576, 3456), (0, 4, 2, 4, 8)],
    "half up": [(1, 1, 1, 2, 1), (5, 1, 1, 2, 1), (7, 3, 5, 9, 4)],
    "below one half is one": [(1, 1, 1, 1000, 1), (1, 2, 1, 7, 3)],
    "products beyond int64": [(2_359_296, 2_359_296, 2_359_296, 2_359_296, 2_359_296), (2**40, 2**20, 2**10, 3, 2**30)],
    "volumes beyond int64": [(2**40, 2**40, 2**20, 3, 7), (10**12, 10**6, 10**6, 10**6 + 1, 3)],
}


@pytest.mark.parametrize("case", CASES)
def test_exact_volumes_are_the_rounded_shares(case):
    rows = CASES[case]
    columns = [np.array(column, dtype=np.int64) for column in zip(*rows, strict=True)] or [
        np.zeros(0, dtype=np.int64)
    ] * 5
    expected = [rounded_share(*row) for row in rows]
    safe = all(2 * r * w * o + b * e <= _INT64_MAX for r, w, o, b, e in rows)
    for wide in (True, False) if safe else (True,):
        volumes = _exact_volumes(*columns, wide)
        assert [int(v) for v in volumes] == expected
        # int64 whenever the volumes fit, even where their products did not
        assert volumes.dtype == (object if case == "volumes beyond int64" else np.int64)


def test_a_zero_element_count_is_refused():
    one = np.array([1], dtype=np.int64)
    with pytest.raises(DcaccelError, match="reads no element"):
        _exact_volumes(one, one, one, one, np.array([0], dtype=np.int64), False)


def box_rows(boxes, elements=None, volume=None) -> Rows:
    """Rows of 1-d boxes ``(lo, hi)``; elements default to the box size, volumes to the elements."""
    lo = np.array([[a] for a, _ in boxes], dtype=np.int64)
    hi = np.array([[b] for _, b in boxes], dtype=np.int64)
    elements = np.array(elements if elements is not None else [b - a + 1 for a, b in boxes], dtype=np.int64)
    return Rows(lo, hi, elements, np.array(volume if volume is not None else elements, dtype=np.int64))


def graph_with(n: int) -> ConcreteGraph:
    graph = ConcreteGraph(Granularity.parse("task"), {})
    for i in range(n):
        graph.add_buffer(f"b{i}", TaskInfo(role=Role.BUFFER))
    return graph


@pytest.mark.parametrize(("k", "scale"), [(1, 1), (1, 10**7), (2**20, 1), (2**21, 3)])
def test_link_edges_and_rereads_edge_by_edge(k, scale):
    """Two producers writing [0, 4k) and [4k, 8k) once (``scale`` times), three consumers reading overlapping
    windows; from k = 2**20 the products of the exact rule overflow int64 and the wide path must give the
    same rule."""
    written = [(0, 4 * k - 1), (4 * k, 8 * k - 1)]
    windows = [(0, 8 * k - 1), (2 * k, 6 * k - 1), (6 * k, 8 * k - 1)]
    w = box_rows(written, volume=[4 * k * scale] * 2)
    r = box_rows(windows, volume=[8 * k * scale, 8 * k * scale, 2 * k * scale])
    graph = graph_with(5)
    reread = graph.link(np.array([0, 1]), w, np.array([2, 3, 4]), r, "X")
    table = graph.edges()
    expected = []
    for c, (lo, hi) in enumerate(windows):
        for p, (plo, phi) in enumerate(written):
            overlap = max(0, min(hi, phi) - max(lo, plo) + 1)
            if overlap:
                e_r, v_r = hi - lo + 1, int(r.volume[c])
                expected.append((p, 2 + c, rounded_share(v_r, 4 * k, overlap, 4 * k, e_r), v_r))
    got = list(zip(table.src.tolist(), table.dst.tolist(), table.exact.tolist(), table.reference.tolist(), strict=True))
    assert sorted(got) == sorted(expected)
    assert table.exact.dtype == np.int64
    assert table.through.all()
    assert all(table.via(e) == ["X"] for e in range(len(got)))
    # the second consumer reads its 4k elements twice as often as they were written
    assert bool(reread) is True


def test_link_without_reread():
    w = box_rows([(0, 3)])
    r = box_rows([(0, 1), (2, 3)])
    graph = graph_with(3)
    assert bool(graph.link(np.array([0]), w, np.array([1, 2]), r, "X")) is False


# batches of (src, dst, exact, reference, via)
LOGS = {
    "empty": [],
    "distinct": [([0, 0], [1, 2], [3, 3], [5, 5], "A"), ([1], [3], [2], [2], None)],
    "repeated across batches": [
        ([0, 1], [2, 2], [1, 2], [4, 4], "B"),
        ([3], [0], [7], [7], None),
        ([1, 0], [2, 2], [5, 6], [8, 8], "A"),
    ],
    "buffer edge and stream edge on one pair": [([0], [1], [2], [2], None), ([0], [1], [3], [9], "C")],
}


@pytest.mark.parametrize("log", LOGS)
def test_edge_table_merges_repeated_pairs_at_their_first_place(log):
    edges = EdgeLog()
    reference: dict[tuple[int, int], list] = {}  # the merge written out: first place kept, volumes summed
    for src, dst, exact, reference_volume, via in LOGS[log]:
        edges.add(*(np.array(a, dtype=np.int64) for a in (src, dst, exact, reference_volume)), via)
        for s, d, e, r in zip(src, dst, exact, reference_volume, strict=True):
            known = reference.setdefault((s, d), [0, 0, set()])
            known[0] += e
            known[1] += r
            if via is not None:
                known[2].add(via)
    table = edges.table(4)
    assert list(zip(table.src.tolist(), table.dst.tolist(), strict=True)) == list(reference)
    assert table.exact.tolist() == [known[0] for known in reference.values()]
    assert table.volume("reference").tolist() == [known[1] for known in reference.values()]
    assert table.through.tolist() == [bool(known[2]) for known in reference.values()]
    assert [table.via(e) for e in range(len(reference))] == [sorted(known[2]) for known in reference.values()]


def test_edge_table_sums_beyond_int64_exactly():
    edges = EdgeLog()
    big = np.array([_INT64_MAX], dtype=np.int64)
    edges.add(np.array([0]), np.array([1]), big, big, "A")
    edges.add(np.array([0]), np.array([1]), big, big, "A")
    assert edges.table(2).exact.tolist() == [2 * _INT64_MAX]


def reference_faults(graph: ConcreteGraph, rule: str) -> dict:
    """The contract-repair rule written out edge by edge (the walk's per-edge formulation)."""
    table = graph.edges()
    columns = zip(table.src.tolist(), table.dst.tolist(), table.volume(rule).tolist(), strict=True)
    edges = {(s, d): (int(v), table.via(e)) for e, (s, d, v) in enumerate(columns)}
    found: dict = {}
    first: tuple[dict, dict] = ({}, {})
    mixed: tuple[set, set] = (set(), set())
    for pair, (key, _) in edges.items():
        for side in (0, 1):
            node = pair[1 - side]
            if first[side].setdefault(node, key) != key:
                mixed[side].add(node)
    tasks = set(graph.tasks)
    for side, what in ((0, "unequal in-volumes into"), (1, "non-uniform output of")):
        suspects = mixed[side] & tasks
        grouped: dict = {node: [] for node in suspects}
        for pair, edge in edges.items():
            if pair[1 - side] in grouped:
                grouped[pair[1 - side]].append(edge)
        for node, pairs in grouped.items():
            fixed = [key for key, via in pairs if not via]
            target = Counter(fixed).most_common(1)[0][0] if fixed else max(key for key, _ in pairs)
            for key, via in pairs:
                if via and key != target:
                    for data in via:
                        found.setdefault(data, f"{what} task {graph.labels[node]}")
    return found


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("rule", ["exact", "reference"])
def test_faults_follow_the_rule_edge_by_edge(seed, rule):
    """Random graphs of buffers and tasks with edges through a few containers, some pairs repeated."""
    rng = np.random.default_rng(seed)
    graph = graph_with(0)
    n = int(rng.integers(2, 40))
    for i in range(n):
        if rng.random() < 0.3:
            graph.add_buffer(f"b{i}", TaskInfo(role=Role.BUFFER))
        else:
            graph.add_tasks(TaskGroup([f"T{i}"], [TaskInfo()], {}, {}))
    for _ in range(int(rng.integers(0, 12))):
        m = int(rng.integers(1, 30))
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        volumes = rng.integers(1, 4, m)
        via = [None, "A", "B", "C"][int(rng.integers(0, 4))]
        graph.log.add(src, dst, volumes, volumes * int(rng.integers(1, 3)), via)
    found = graph.faults(rule)
    assert {data: fault.reason for data, fault in found.items()} == reference_faults(graph, rule)
    assert list(found) == list(reference_faults(graph, rule))


def test_nodes_are_columns():
    graph = graph_with(2)
    tasks = graph.add_tasks(TaskGroup(["T0", "T1"], [TaskInfo(op="Relu"), TaskInfo()], {}, {}))
    assert tasks.tolist() == [2, 3]
    assert graph.kinds == [NodeKind.BUFFER, NodeKind.BUFFER, NodeKind.TASK, NodeKind.TASK]
    assert graph.labels == ["b0", "b1", "T0", "T1"]
    assert graph.tasks == [2, 3]
