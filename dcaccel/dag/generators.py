"""Synthetic canonical task DAGs for tests and benchmarks.

Every generator returns a DAG that passes :meth:`TaskDAG.validate`: one pseudo source feeding the
nodes without predecessors (each edge carries what the node reads), every task reading the same
volume on all in-edges and writing the same volume on all out-edges.

* :func:`chain` — tasks one after the other;
* :func:`fork_join` — stages of parallel tasks between fork and join tasks;
* :func:`layered` — random layered DAGs with random production rates and optional buffer nodes;
* :func:`mmm` — the canonical matrix-multiply shapes ``mv``, ``op``, ``lmv`` of
  ``docs/architecture.md`` Contract 3, ending in the output buffer (a real exit).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from dcaccel.dag.task import Role, TaskInfo
from dcaccel.dag.taskdag import NodeKind, TaskDAG
from dcaccel.errors import DcaccelError


def _buffer(reason: str) -> TaskInfo:
    """The record of a buffer node marked for ``reason`` (docs/dag.md)."""
    return TaskInfo(role=Role.BUFFER, reason=reason)


def _iteration(parameter: str, value: int) -> TaskInfo:
    """The record of the task that is iteration ``value`` of the canonical map over ``parameter``."""
    return TaskInfo(iteration=value, index=((parameter, value),))


def chain(volumes: Sequence[int], name: str = "") -> TaskDAG:
    """source -> T0 -> ... -> T(k-1) -> pseudo sink, where the edge into ``Ti`` carries
    ``volumes[i]`` elements and the edge into the sink ``volumes[k]`` (so ``k = len(volumes) - 1``
    tasks)."""
    if len(volumes) < 2:
        raise DcaccelError(f"a chain needs at least two volumes (one task), got {list(volumes)}")
    dag = TaskDAG(name or f"chain_{len(volumes) - 1}")
    previous = dag.add_node(NodeKind.SOURCE, "source")
    for i, volume in enumerate(volumes[:-1]):
        task = dag.add_node(NodeKind.TASK, f"T{i}")
        dag.add_edge(previous, task, volume)
        previous = task
    sink = dag.add_node(NodeKind.SINK, "sink")
    dag.add_edge(previous, sink, volumes[-1])
    return dag


def fork_join(width: int, stages: int, volume: int, name: str = "") -> TaskDAG:
    """``stages`` times: a fork task feeding ``width`` parallel tasks joined by one task; all
    volumes equal (element-wise)."""
    if width < 1 or stages < 1:
        raise DcaccelError(f"fork_join needs width >= 1 and stages >= 1, got {width}, {stages}")
    dag = TaskDAG(name or f"forkjoin_{width}_{stages}")
    source = dag.add_node(NodeKind.SOURCE, "source")
    fork = dag.add_node(NodeKind.TASK, "F0")
    dag.add_edge(source, fork, volume)
    for stage in range(stages):
        branches = [dag.add_node(NodeKind.TASK, f"S{stage}_{i}") for i in range(width)]
        join = dag.add_node(NodeKind.TASK, f"J{stage}")
        for branch in branches:
            dag.add_edge(fork, branch, volume)
            dag.add_edge(branch, join, volume)
        fork = join
    sink = dag.add_node(NodeKind.SINK, "sink")
    dag.add_edge(fork, sink, volume)
    return dag


def layered(
    tasks: int,
    width: int,
    seed: int = 0,
    buffer_fraction: float = 0.0,
    max_fan_in: int = 3,
    volumes: Sequence[int] = (4, 8, 16, 32, 64),
    name: str = "",
) -> TaskDAG:
    """A random layered DAG of ``tasks`` tasks, ``width`` per layer.

    All tasks of layer k read ``V[k]`` and write ``V[k + 1]`` elements (random production rates).
    Each task after the first layer reads from 1..``max_fan_in`` tasks of the previous layer; a
    fraction ``buffer_fraction`` of these edges goes through a buffer node. Tasks nobody reads
    feed the pseudo sink.
    """
    if tasks < 1 or width < 1:
        raise DcaccelError(f"layered needs tasks >= 1 and width >= 1, got {tasks}, {width}")
    rng = random.Random(seed)
    dag = TaskDAG(name or f"layered_{tasks}_{width}_{seed}")
    source = dag.add_node(NodeKind.SOURCE, "source")
    layer_volume = [rng.choice(volumes)]
    previous: list[int] = []
    read: set[int] = set()
    placed = 0
    layer = 0
    while placed < tasks:
        count = min(width, tasks - placed)
        layer_volume.append(rng.choice(volumes))
        volume_in = layer_volume[layer]
        current = [dag.add_node(NodeKind.TASK, f"L{layer}_{i}", TaskInfo(layer=layer)) for i in range(count)]
        for task in current:
            if not previous:
                dag.add_edge(source, task, volume_in)
                continue
            for producer in rng.sample(previous, min(len(previous), rng.randint(1, max_fan_in))):
                read.add(producer)
                if rng.random() < buffer_fraction:
                    buffer = dag.add_node(NodeKind.BUFFER, f"B{producer}_{task}")
                    dag.add_edge(producer, buffer, volume_in)
                    dag.add_edge(buffer, task, volume_in)
                else:
                    dag.add_edge(producer, task, volume_in)
        placed += count
        previous = current
        layer += 1
    sink = dag.add_node(NodeKind.SINK, "sink")
    for v in range(dag.num_nodes):
        if dag.kind(v) is NodeKind.TASK and v not in read:
            dag.add_edge(v, sink, layer_volume[dag.info(v).layer + 1])
    return dag


def mmm(shape: str, n: int, k: int, m: int, name: str = "") -> TaskDAG:
    """C[N×M] = A[N×K]·B[K×M] in the canonical shape ``mv``, ``op`` or ``lmv`` (Contract 3).

    A and B are program inputs and C the program output (buffer nodes); ``_a``/``_b`` are the
    operand copies that are re-read (buffers). ``mv``: M tasks MV_j, A broadcast by BcastA,
    columns gathered by Gather. ``op``: K outer products OP_k accumulated by Reduce. ``lmv``: N
    tasks LMV_i, B broadcast by BcastB, rows gathered by Gather.
    """
    if min(n, k, m) < 1:
        raise DcaccelError(f"mmm needs positive sizes, got N={n}, K={k}, M={m}")
    dag = TaskDAG(name or f"mmm_{shape}_{n}_{k}_{m}")
    source = dag.add_node(NodeKind.SOURCE, "source")
    a = dag.add_node(NodeKind.BUFFER, "A", _buffer("program-io"))
    b = dag.add_node(NodeKind.BUFFER, "B", _buffer("program-io"))
    if shape == "mv":
        copy_b = dag.add_node(NodeKind.BUFFER, "_b", _buffer("reuse"))
        bcast = dag.add_node(NodeKind.TASK, "BcastA")
        workers = [dag.add_node(NodeKind.TASK, f"MV{j}", _iteration("j", j)) for j in range(m)]
        gather = dag.add_node(NodeKind.TASK, "Gather")
        c = dag.add_node(NodeKind.BUFFER, "C", _buffer("program-io"))
        dag.add_edge(source, a, n * k)
        dag.add_edge(source, b, k * m)
        dag.add_edge(b, copy_b, k * m)
        dag.add_edge(a, bcast, n * k)
        for worker in workers:
            dag.add_edge(bcast, worker, n * k)
            dag.add_edge(copy_b, worker, n * k)
            dag.add_edge(worker, gather, n)
        dag.add_edge(gather, c, n * m)
    elif shape == "op":
        copy_a = dag.add_node(NodeKind.BUFFER, "_a", _buffer("reuse"))
        copy_b = dag.add_node(NodeKind.BUFFER, "_b", _buffer("reuse"))
        workers = [dag.add_node(NodeKind.TASK, f"OP{i}", _iteration("k", i)) for i in range(k)]
        reduce = dag.add_node(NodeKind.TASK, "Reduce")
        c = dag.add_node(NodeKind.BUFFER, "C", _buffer("accumulate"))
        dag.add_edge(source, a, n * k)
        dag.add_edge(source, b, k * m)
        dag.add_edge(a, copy_a, n * k)
        dag.add_edge(b, copy_b, k * m)
        for worker in workers:
            dag.add_edge(copy_a, worker, n * m)
            dag.add_edge(copy_b, worker, n * m)
            dag.add_edge(worker, reduce, n * m)
        dag.add_edge(reduce, c, n * m)
    elif shape == "lmv":
        copy_a = dag.add_node(NodeKind.BUFFER, "_a", _buffer("reuse"))
        bcast = dag.add_node(NodeKind.TASK, "BcastB")
        workers = [dag.add_node(NodeKind.TASK, f"LMV{i}", _iteration("i", i)) for i in range(n)]
        gather = dag.add_node(NodeKind.TASK, "Gather")
        c = dag.add_node(NodeKind.BUFFER, "C", _buffer("reorder"))
        dag.add_edge(source, a, n * k)
        dag.add_edge(source, b, k * m)
        dag.add_edge(a, copy_a, n * k)
        dag.add_edge(b, bcast, k * m)
        for worker in workers:
            dag.add_edge(bcast, worker, k * m)
            dag.add_edge(copy_a, worker, k * m)
            dag.add_edge(worker, gather, m)
        dag.add_edge(gather, c, n * m)
    else:
        raise DcaccelError(f"unknown MMM shape '{shape}' (expected mv, op or lmv)")
    return dag
