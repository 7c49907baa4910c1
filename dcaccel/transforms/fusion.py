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

from collections import Counter
from dataclasses import dataclass

import dace
from dace.sdfg import nodes
from dace.sdfg.propagation import propagate_memlets_scope
from dace.transformation.dataflow import MapFusionVertical
from dace.transformation.passes.pattern_matching import match_patterns

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
        if not _equal_reads(graph, (first_entry, self.second_map_entry), self.array.data):
            return False
        return super().can_be_applied(graph, expr_index, sdfg, permissive)


def _equal_reads(state: dace.SDFGState, entries, intermediate: str) -> bool:
    """Whether the maps of ``entries`` fused would read every container other than ``intermediate`` the same
    number of times per iteration (the contract's equal in-volumes: two gates of an LSTM reading the one
    gate-product container at two offsets, fused with a task reading the cell state once, would not)."""
    reads = Counter(
        edge.data.data
        for entry in entries
        for edge in state.out_edges(entry)
        if not edge.data.is_empty() and edge.data.data != intermediate
    )
    return len(set(reads.values())) <= 1


@dataclass(frozen=True)
class Fusion:
    """One fusion: the guid of the map entry that remains and of the one merged into it (DaCe keeps
    guids through copies and inlining, so tables keyed by them, like the lowering's origins, follow)."""

    kept: str
    merged: str


def fuse_elementwise(sdfg: dace.SDFG) -> list[Fusion]:
    """Fuse the chains of element-wise tasks of ``sdfg`` in place, one match at a time until none is
    left; returns the fusions in the order they were applied."""
    fusions = []
    while True:
        match = next(match_patterns(sdfg, ElementwiseMapFusion, options=[{"only_toplevel_maps": True}]), None)
        if match is None:
            return fusions
        state = sdfg.cfg_list[match.cfg_id].node(match.state_id)
        first, second = state.entry_node(match.first_map_exit), match.second_map_entry
        match.apply_pattern(append=False, annotate=False)
        kept, merged = (first, second) if first in state.nodes() else (second, first)
        # Re-propagate the memlets of the fused map only (not of the whole SDFG, as annotate=True does).
        propagate_memlets_scope(sdfg, state, state.scope_tree()[kept])
        fusions.append(Fusion(kept.guid, merged.guid))
