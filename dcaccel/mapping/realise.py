"""Every mapping is a program: a :class:`Mapping` applied to a lowered layer with DaCe's transformations.

``realise(lowered, mapping)`` returns a new ``LoweredWorkload`` whose SDFG is the layer lowered with
``mapping.implementation`` (the expansion chooses the matrix-product shape), then

1. every task map of the node (a top-level map whose body holds a map: ``MV``, ``OP``, ``LMV``) is
   tiled with DaCe's ``MapTiling`` by the mapping's tile of the implementation's task dimension
   (:data:`TASK_DIMENSION`): the tile map becomes the task map, so the node runs as extent / tile tasks
   of tile consecutive iterations each (the task granularity of the mapping);
2. memlets are propagated again, and the origin of each tiled map is given to its new tile map, so the
   tasks keep their ``op``, ``node`` and ``implementation``.

Fusion (``Fuse(yes)``) is applied by :func:`realised_dag` through the extraction's own element-wise
``MapFusion`` (:func:`dcaccel.transforms.fusion.fuse_elementwise`). The realised SDFG is a real
program: it compiles and computes the layer (``tests/mapping/test_realise.py`` checks a sample against
onnxruntime). The loop order (``Stay``) and the tiles of the other dimensions are not realised on
the program (its task structure has no loop over the resident operand); the off-chip stage models them
(:mod:`dcaccel.mapping.offchip`).
"""

from __future__ import annotations

import copy
import dataclasses

from dace.sdfg import nodes
from dace.sdfg.propagation import propagate_memlets_sdfg
from dace.transformation.dataflow import MapTiling

from dcaccel.dag.extract import extract
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.errors import DcaccelError
from dcaccel.mapping.notation import Mapping

#: The loop dimension whose iterations are the tasks of each matrix-product shape.
TASK_DIMENSION = {"mv": "m", "op": "k", "lmv": "n"}


def task_maps(lowered, node: str) -> list[tuple]:
    """The (state, map entry) of every task map of ``node`` in ``lowered.sdfg``."""
    guids = {entry.guid for entry, origin in lowered.origins.items() if origin.node == node}
    found = []
    for state in lowered.sdfg.states():
        children = state.scope_children()
        for entry in children[None]:
            if not isinstance(entry, nodes.MapEntry) or entry.guid not in guids:
                continue
            if any(isinstance(inner, nodes.MapEntry) for inner in children[entry]):
                found.append((state, entry))
    return found


def realise(lowered, mapping: Mapping):
    """A copy of ``lowered`` (lowered with ``mapping.implementation``) with the task maps of
    ``mapping.node`` tiled by the tile of the implementation's task dimension (see the module docstring).

    Raises :class:`DcaccelError` when the tile does not divide the task map's extent.
    """
    implementation = lowered.implementations.get(mapping.node)
    if implementation != mapping.implementation:
        raise DcaccelError(
            f"realise {mapping.node}: the layer is lowered with {implementation!r}, the mapping asks for "
            f"{mapping.implementation!r}"
        )
    sdfg = copy.deepcopy(lowered.sdfg)
    by_guid = {entry.guid: origin for entry, origin in lowered.origins.items()}
    result = dataclasses.replace(lowered, sdfg=sdfg, origins=dict(lowered.origins))
    dimension = TASK_DIMENSION.get(mapping.implementation)
    tile = mapping.tile(dimension) if dimension else None
    if tile is None or tile == 1:
        return result
    for state, entry in task_maps(result, mapping.node):
        extent = entry.map.range.num_elements()
        tasks = entry.map.range.size()[-1]
        if tasks % tile:
            raise DcaccelError(
                f"realise {mapping.node}: tile {dimension}={tile} does not divide the {tasks} tasks of map "
                f"{entry.map.label} ({extent} iterations)"
            )
        sizes = [1] * (len(entry.map.params) - 1) + [tile]
        MapTiling.apply_to(
            sdfg, map_entry=entry, options={"tile_sizes": sizes, "divides_evenly": True, "tile_trivial": True}
        )
        outer = state.entry_node(entry)
        result.origins[outer] = by_guid[entry.guid]
    propagate_memlets_sdfg(sdfg)
    return result


def realised_dag(lowered, mapping: Mapping, edge_volume: str = "exact") -> TaskDAG:
    """The canonical task DAG of ``mapping`` realised on ``lowered`` (fused when ``mapping.fuse``)."""
    return extract(realise(lowered, mapping), edge_volume=edge_volume, fusion=mapping.fuse)
