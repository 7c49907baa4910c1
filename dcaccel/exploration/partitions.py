"""The partition stage: each assignment split between an architecture's host and its accelerator
(:func:`dcaccel.partition`, ``docs/partitioning.md``) for every (policy, architecture, P) of the grid, handed
to the schedule stage as the placed DAG (:class:`~dcaccel.exploration.dags.LoweredDAG`) and its
:class:`~dcaccel.partitioning.Partition`. The partitions of one assignment share their lowerings
(:class:`~dcaccel.partitioning.Lowerings`): a program with a given set of host nodes is lowered and extracted
once for every policy, architecture and P that give it, and the ``cost`` policy lowers each split it tries
once (its chosen split is not lowered again); every lowering reuses the sweep's expansions.
"""

import time
import warnings
from collections.abc import Iterator, Sequence

from dcaccel.architecture import Architecture
from dcaccel.dag.walk import Granularity
from dcaccel.exploration.assignments import Assignment
from dcaccel.exploration.dags import LoweredDAG, expansions_for
from dcaccel.exploration.grid import Grid, partition_runs
from dcaccel.exploration.load import nodes_by_op_type
from dcaccel.exploration.reporting import warn_once
from dcaccel.partitioning import Lowerings, Partition, partition


def partitioned_dags(
    workload,
    assignment: Assignment,
    grid: Grid,
    archs: Sequence[Architecture],
    granularity: Granularity,
    edge_volume: str,
) -> Iterator[tuple[LoweredDAG, Partition, int]]:
    """Per partition of :func:`~dcaccel.exploration.grid.partition_runs`: the placed DAG of ``workload`` under
    ``assignment`` (its label says what each node was lowered with, a node kept on the host ``NAME@HOST``;
    ``lower_seconds`` the whole partition's time, nothing for a program an earlier partition lowered), the
    partition, and the P it was made for."""
    lowerings = Lowerings(expansions_for(workload))
    for policy, arch, pes in partition_runs(grid, archs):
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            split = partition(
                workload,
                arch,
                policy,
                choices=assignment.as_dict(),
                pes=pes,
                min_nodes=grid.min_nodes,
                min_work_share=grid.min_work_share,
                granularity=granularity,
                edge_volume=edge_volume,
                objective=grid.partition_objective,
                lowerings=lowerings,
            )
        warn_once(workload.name, caught)
        label = str(assignment.lowered(_placed_implementations(split, assignment), nodes_by_op_type(workload)))
        yield LoweredDAG(assignment, label, split.dag, time.perf_counter() - start, 0.0), split, pes


def _placed_implementations(split: Partition, assignment: Assignment) -> dict[str, str]:
    """The implementation per node of ``split``'s lowering, a node kept on the host written ``NAME@HOST``
    with NAME the one ``assignment`` asked for (its host task is costed with that lowering's MACs, see
    :func:`dcaccel.partition`), so that two assignments never share a label."""
    choices = assignment.as_dict()
    implementations = dict(split.lowered.implementations)
    for node in split.nodes:
        asked = choices.get(node.name, choices.get(node.op))
        if not node.offloaded and asked is not None:
            implementations[node.name] = f"{asked}@{split.host}"
    return implementations
