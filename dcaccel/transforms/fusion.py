"""Fusion of chains of element-wise tasks, with DaCe's own vertical map fusion.

Two consecutive element-wise tasks (flat top-level maps over the same iteration space, the first
writing a container the second reads point by point) become one task: ``MapFusionVertical``
merges the two maps and replaces an intermediate used nowhere else by a per-iteration scalar, so
the task DAG loses a task and the container's traffic. The transformation itself decides whether
the maps cover the same range and the data flows point-wise; :class:`ElementwiseMapFusion` only
narrows where it may match:

* both maps are element-wise: flat (no map nested in their body) and every memlet inside them
  moves one element per iteration, without write-conflict resolution;
* the intermediate streams (no buffer mark) or is a ``LAYER_OUTPUT`` buffer (an operator's result
  materialised only because operators are lowered one by one). Reuse, reorder, accumulate and
  weights buffers and program inputs/outputs are never fused away.
"""

import dace
from dace.sdfg import nodes
from dace.transformation.dataflow import MapFusionVertical

from dcaccel.buffers import BufferReason, buffer_reason

#: Buffer reasons whose containers may disappear into a fused task.
FUSIBLE_REASONS = (None, BufferReason.LAYER_OUTPUT)


def is_elementwise(state: dace.SDFGState, entry: nodes.MapEntry) -> bool:
    """Whether the map of ``entry`` is an element-wise task: a flat map whose inner memlets each move
    one element per iteration, without write-conflict resolution."""
    exit_node = state.exit_node(entry)
    body = state.scope_children()[entry]
    if any(isinstance(node, nodes.EntryNode) for node in body):
        return False
    inner = [*state.out_edges(entry), *state.in_edges(exit_node)]
    return all(e.data.is_empty() or (e.data.volume == 1 and e.data.wcr is None) for e in inner)


class ElementwiseMapFusion(MapFusionVertical):
    """``MapFusionVertical`` restricted to top-level element-wise maps and fusible intermediates."""

    def can_be_applied(self, graph, expr_index, sdfg, permissive=False) -> bool:
        first_entry = graph.entry_node(self.first_map_exit)
        if graph.entry_node(first_entry) is not None or graph.entry_node(self.second_map_entry) is not None:
            return False
        if buffer_reason(self.array.desc(sdfg)) not in FUSIBLE_REASONS:
            return False
        if not (is_elementwise(graph, first_entry) and is_elementwise(graph, self.second_map_entry)):
            return False
        return super().can_be_applied(graph, expr_index, sdfg, permissive)


def fuse_elementwise(sdfg: dace.SDFG) -> int:
    """Fuse the chains of element-wise tasks of ``sdfg`` in place; returns the number of fusions."""
    return sdfg.apply_transformations_repeated(
        ElementwiseMapFusion, options={"only_toplevel_maps": True}, validate=False
    )
