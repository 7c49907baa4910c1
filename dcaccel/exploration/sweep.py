"""``dcaccel.explore``: the front door of an exploration. It builds the :class:`~dcaccel.exploration.study.Study`
of its arguments and runs it (:func:`dcaccel.exploration.run.run_study`) through the stages of the pipeline:
load (:mod:`~dcaccel.exploration.load`) → lower or compose and extract (:mod:`~dcaccel.exploration.dags`) →
partition and schedule and cost (:mod:`~dcaccel.exploration.evaluation`, :mod:`~dcaccel.exploration.scheduling`)
→ record (:mod:`~dcaccel.exploration.store`), each assignment where the study's executor runs it
(:mod:`~dcaccel.exploration.executors`).
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from dcaccel.exploration.load import LoadedModel
from dcaccel.exploration.run import run_study
from dcaccel.exploration.study import Study

#: The Study fields :func:`explore` takes by position after the workload.
POSITIONAL = ("implementations", "pes", "scheduler", "onchip_memory", "granularity", "strategy")


def explore(
    workload=None,
    implementations: Mapping[str, Sequence[str]] | None = None,
    pes: int | Iterable[int] | None = None,
    scheduler: str | Iterable[str] | None = None,
    onchip_memory: int | Iterable[int] | None = None,
    granularity: str | tuple | None = None,
    strategy: str | None = None,
    *,
    study: Study | None = None,
    progress: bool | None = None,
    **options: Any,
) -> pd.DataFrame:
    """Explore ``workload`` (a Workload, a built-in name, an ONNX file or ``path/to/file.py:attribute``) and
    return one row per design point: the :class:`~dcaccel.exploration.study.Study` of the arguments, run.

    ``study`` is a study to start from (its models explored when ``workload`` is None); the arguments and
    ``options`` are fields of :class:`~dcaccel.exploration.study.Study` named flat (``executor="process"``),
    each validated there (an unknown one is refused naming it); left out, they keep the study's values or
    its defaults. The fields:

    :param implementations: op type or node name → implementation names to try (default: every op
        type of the workload with more than one dcaccel implementation, with all of them). A node name
        wins over its op type. Keys that name no op type or node are ignored with one warning; the
        ``assignment`` column always says what the nodes were lowered with.
    :param strategy: ``"per-op-type"`` (the product over the keys: every node of an op type gets the
        same implementation unless named itself), ``"per-node"`` (full product over the nodes the keys
        cover, at most ``max_assignments``) or ``"greedy"`` (one node at a time, keeping the
        implementation that minimises the mean ``objective`` over the grid; the candidates of one node
        are evaluated in parallel), or ``"mapping"``: the mapping search (:func:`dcaccel.map` with
        ``objective`` ``makespan``, ``energy`` or ``edp`` and the PE counts ``pes``) for each architecture
        and on-chip size, one row per layer and one for the whole network
        (:mod:`dcaccel.exploration.mapping` says what each column holds; the implementations, schedulers
        and DAG options are the search's own).
    :param progress: show a progress bar over assignments (None: when the sweep runs longer than a second).
    :param executor: ``"local"`` (this process), ``"process"`` (a pool of ``workers`` processes on this
        machine) or ``"dask"`` (the ``dask.distributed`` scheduler at ``address``; a ``LocalCluster`` of
        ``workers`` single-threaded processes on loopback when ``address`` is None). A workload given by
        a built-in name is rebuilt by name on the workers; any other is shipped pickled.
    :param results: a result file (SQLite) that every finished assignment's points are written to.
    :param resume: continue ``results``: assignments whose points are all stored are not evaluated
        again (without ``resume``, a result file that holds points is refused; so is, with it, a file
        written for another program or sizes under the workload's name, or with other settings).
    :param strict: refuse a workload with an op that dcaccel has no canonical implementation of
        (:class:`UnsupportedOpError`, before anything is lowered). Without it such an op is lowered as an
        opaque task (one warning names every such node) and the ``opaque_tasks`` and
        ``opaque_work_share`` columns count them.
    :param scheduler: ``"streaming"``, ``"list"`` and/or ``"heft"`` (the heterogeneous list scheduler:
        each task on a unit of a kind that runs it, at that kind's speed; its ``pes`` column is the
        number of the architecture's units, P for an open count).
    :param arch: the accelerators every point is costed on, one or several (an
        :class:`~dcaccel.architecture.Architecture`, a shipped name or a YAML file; default
        ``"abstract"``): a dimension of the sweep, whose ``architecture`` column names the description,
        and the columns from ``makespan_cycles`` on (re-timed makespan, energy by level, area, power,
        utilisation per unit kind) depend on it. The other columns do not (but under ``"heft"``): the
        DAG of an assignment is built once and each (P, scheduler) scheduled once for all of them.
    :param arch_params: parameter path → values (``{"units.pe.count": [16, 64]}``, paths of
        :mod:`dcaccel.architecture.parameters`): every architecture of ``arch`` is swept over the
        product of the values, each variant labelled ``name[path=value,...]``.
    :param compose: compose each assignment's DAG from the fragments of the nodes lowered in earlier
        assignments (:mod:`dcaccel.dag.compose`: the same DAG, without lowering the whole program again);
        False lowers every assignment whole. A workload composition does not apply to is lowered whole
        with one warning saying why.
    :param partition_policy: None (the plain pipeline) or one or several of ``"none"`` (the plain
        pipeline's points), ``"greedy"``, ``"min-region"``, ``"cost"``: a dimension of the sweep. Each
        policy partitions every assignment between each architecture's host and its accelerator
        (:func:`dcaccel.partition`, the assignment as its choices, ``min_nodes`` and ``min_work_share``
        for ``min-region``, ``partition_objective`` — ``makespan``, ``energy`` or ``edp`` — for ``cost``)
        and schedules the placed DAG with HEFT (``scheduler`` must include
        ``"heft"``) for each number of the architecture's units P gives; the ``partition_policy``,
        ``offloaded_work_share``, ``transfer_volume`` and host/accelerator/transfer energy columns
        describe the split (``docs/partitioning.md``).
    :raises SweepError: after the whole sweep, when assignments failed; it carries the finished points
        (``results``) and the failures. Every executor returns the same rows in the same order (the
        order of the assignments, then P, scheduler, architecture, on-chip memory; the partition policies'
        points after the plain ones, by policy, architecture, P), timing columns aside.
    :return: a DataFrame whose columns are the fields of :class:`ExplorationPoint`.
    """
    given = zip(POSITIONAL, (implementations, pes, scheduler, onchip_memory, granularity, strategy), strict=True)
    fields = {name: value for name, value in given if value is not None} | options
    loaded = None
    if workload is not None:
        from dcaccel.frontend.workload import Workload

        loaded = LoadedModel(workload) if isinstance(workload, Workload) else None
        fields["models"] = (workload.name if loaded else str(workload),)
    if study is None:
        study = Study.of("explore", **fields)
    else:
        study = study.replace(**fields)
    return run_study(study, loaded, progress)
