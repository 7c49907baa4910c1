"""The learned cost model as a cost source (``--cost learned:FILE``, docs/costmodel.md).

A model file of :mod:`dcaccel.costmodel` predicts how long this machine's CPU takes to run each top-level
map and copy of DaCe's code of a lowered program (:func:`~dcaccel.costmodel.predict.predict_steps`). Here
those predictions become the durations of the tasks of the program's task DAG:

* a task map's prediction is spread over its tasks (its iterations or tiles; one task under coarse
  granularity) in proportion to their work (``max(I, O)``, :func:`~dcaccel.dag.metrics.task_costs`);
  a task is found by its record's state, model node and map label;
* a copy's prediction goes onto the buffer nodes of the container it writes (spread equally over them);
  a copy into a container that is no node of the DAG (an edge forwarded between tasks) has no place in
  the schedule and is added to the makespan, as the CPU runs it between its tasks;
* a task of no map the model reads (an opaque task, a host-side library node) takes the model file's
  scaled analytic time (ns per element of work, fitted on the same rows), times the scale of the model
  that costs the maps when the file is calibrated (:meth:`~dcaccel.costmodel.models.CostModel.calibrated`):
  that scale follows the machine, the analytic model's own also makes up for its error on the rows.

The schedule keeps its placement and order and is re-timed with these durations in nanoseconds
(:func:`~dcaccel.cost.schedule.retimed_runs`), giving the learned makespan in seconds. It predicts the
CPU, not the modelled accelerator: it ranks the assignments as this machine would run them.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dcaccel.costmodel.models import KINDS, CostModel
from dcaccel.dag.metrics import task_costs
from dcaccel.dag.task import Role
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.errors import DcaccelError

#: The cost source of the analytic model only.
ANALYTIC = "analytic"
#: The prefix of a learned cost source: ``learned:FILE``.
LEARNED = "learned:"
#: The learned model of the file a cost source uses.
KIND = KINDS[0]


def check_cost(text: str) -> str:
    """``text`` if it names a cost source (``analytic`` or ``learned:FILE``), else a ValueError saying so."""
    if text == ANALYTIC or (text.startswith(LEARNED) and text[len(LEARNED) :]):
        return text
    raise ValueError(
        f"cost {text!r} is neither {ANALYTIC} nor {LEARNED}FILE (a model of dcaccel costmodel train or calibrate)"
    )


@dataclass(frozen=True)
class LearnedCost:
    """A model file read as a cost source: its path, the SHA-256 of its bytes and the model."""

    path: str
    sha256: str
    model: CostModel = field(compare=False, repr=False)

    @property
    def setting(self) -> str:
        """What a result store keeps of it (its ``cost`` setting): the file's content, not its path, so
        that a changed file is another model and a moved one the same."""
        return f"learned model sha256 {self.sha256}"


def cost_source(text: str) -> LearnedCost | None:
    """The cost source ``text`` names: None for ``analytic``, the model file read and checked for
    ``learned:FILE`` (refused in one line naming the file and what is wrong)."""
    check_cost(text)
    if text == ANALYTIC:
        return None
    path = Path(text[len(LEARNED) :])
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DcaccelError(f"costmodel model {path}: cannot be read ({err.strerror})") from None
    return _read(str(path), hashlib.sha256(data).hexdigest())


@functools.lru_cache(maxsize=4)
def _read(path: str, sha256: str) -> LearnedCost:
    """The model of ``path`` whose bytes have ``sha256`` (read once per process and content)."""
    return LearnedCost(path, sha256, CostModel.load(path))


@dataclass(frozen=True)
class TaskTimes:
    """Predicted durations: per node of a DAG (0 for the pseudo nodes) and the copies placed on none."""

    node_ns: np.ndarray
    unplaced_ns: float


def task_times(lowered, dag: TaskDAG, cost: LearnedCost) -> TaskTimes:
    """The durations in nanoseconds of the nodes of ``dag`` (extracted from ``lowered``) by ``cost``'s model
    (see the module docstring)."""
    from dcaccel.costmodel.predict import predict_steps

    steps = predict_steps(lowered, cost.model, KIND)
    work = np.asarray(task_costs(dag), dtype=np.float64)
    maps = steps[steps["kind"] == "map"]
    keys = list(zip(maps["state"], maps["node"], maps["label"], strict=True))
    if len(set(keys)) < len(keys):
        state, node, label = next(key for key in keys if keys.count(key) > 1)
        raise DcaccelError(
            f"learned cost of DAG '{dag.name}': node {node} has two maps labelled {label!r} in state {state!r}: "
            "its tasks cannot be told apart"
        )
    predicted = dict(zip(keys, maps["predicted_ns"], strict=True))
    members: dict[tuple[str, str, str], list[int]] = {}
    node_ns = np.zeros(dag.num_nodes)
    for v in dag.tasks:
        info = dag.info(v)
        key = (info.state, info.node, info.map)
        if key in predicted:
            members.setdefault(key, []).append(v)
        elif info.map is not None:
            raise DcaccelError(
                f"learned cost of DAG '{dag.name}': task {dag.label(v)!r} (node {info.node}) comes from map "
                f"{info.map!r} of state {info.state!r}, which the lowered program does not have"
            )
        elif info.role is not Role.PSEUDO:
            node_ns[v] = cost.model.analytic.factor * cost.model.scales[KIND] * max(work[v], 1.0)
    for key, nodes in members.items():
        shares = work[nodes]
        total = shares.sum()
        node_ns[nodes] = predicted[key] * (shares / total if total else 1.0 / len(nodes))
    holders: dict[str, list[int]] = {}
    for b in dag.buffers:
        holders.setdefault(dag.info(b).container, []).append(b)
    unplaced = 0.0
    copies = steps[steps["kind"] == "copy"]
    for label, ns in zip(copies["label"], copies["predicted_ns"], strict=True):
        nodes = holders.get(label.rsplit("->", 1)[1], [])
        if nodes:
            node_ns[nodes] += ns / len(nodes)
        else:
            unplaced += ns
    return TaskTimes(node_ns, unplaced)


def lowered_of(dag: TaskDAG):
    """The lowered program a DAG file was extracted from, lowered again: the built-in workload its name
    names at its default sizes, each node with the implementation its task records name."""
    from dcaccel import workloads
    from dcaccel.transforms.lower import lower

    if dag.name not in workloads.names():
        raise DcaccelError(
            f"learned cost of DAG '{dag.name}': the model reads the lowered program, and '{dag.name}' is no "
            f"built-in workload ({', '.join(workloads.names())})"
        )
    choices = {}
    for v in dag.tasks:
        info = dag.info(v)
        if info.node is not None and info.implementation is not None:
            choices[info.node] = info.implementation
    return lower(workloads.get(dag.name), choices)


def learned_makespan(schedule, times: TaskTimes) -> float:
    """The makespan in seconds of ``schedule`` re-timed with the durations ``times`` (its placement and
    order kept; a streaming task emits its first output after the same share of its run as scheduled),
    plus the copies placed on no node."""
    from dcaccel.cost.schedule import retimed_runs

    _, start, end, first = schedule.timing.arrays
    run = np.rint(times.node_ns).astype(np.int64)
    span = end - start
    lead = np.where(span > 0, np.rint(run * (first - start) / np.maximum(span, 1)), 0).astype(np.int64)
    _, finished, _ = retimed_runs(schedule, run.tolist(), np.minimum(lead, run).tolist())
    return (max(finished, default=0) + times.unplaced_ns) * 1e-9
