"""Building blocks shared by the MMM expansions: the nested SDFG skeleton, the batch indices, operand
buffers, flat single-task maps and task maps (an outer map over the batch and task indices whose body is
the per-task map).
"""

from dataclasses import dataclass

import dace

from dcaccel.buffers import BufferReason, mark_buffer
from dcaccel.expansions.mmm.operands import CONNECTORS, MatrixView, MMMOperands


@dataclass(frozen=True)
class Batch:
    """The batch dimensions of a product (sizes, possibly none) as map parameters ``__b0, __b1, ...``,
    which come first in every map range and every subset of a per-batch-element transient."""

    sizes: tuple

    @property
    def params(self) -> list[str]:
        return [f"__b{d}" for d in range(len(self.sizes))]

    def ranges(self, **inner: str) -> dict[str, str]:
        """Map ranges over the batch, then over ``inner`` (parameter -> range)."""
        return {**{p: f"0:{size}" for p, size in zip(self.params, self.sizes, strict=True)}, **inner}

    def shape(self, *inner) -> tuple:
        """The shape of a transient holding one ``inner``-shaped array per batch element."""
        return (*self.sizes, *inner)

    def index(self, *inner: str) -> str:
        """The subset of batch element (``__b0``, ...) and ``inner`` in a transient of :meth:`shape`."""
        return ", ".join([*self.params, *inner])


def expansion_state(sdfg: dace.SDFG, name: str, source: str) -> dace.SDFGState:
    """A new state of ``sdfg`` whose nodes name ``source`` (the building module's file) as their debug
    information, which also spares DaCe inspecting the Python stack for every node it adds."""
    state = sdfg.add_state(name)
    state.set_default_lineinfo(dace.dtypes.DebugInfo(1, 0, 1, 0, source))
    return state


def mmm_sdfg(name: str, operands: MMMOperands, source: str) -> tuple[dace.SDFG, dace.SDFGState]:
    """A one-state SDFG with the non-transient operand containers ``_a``, ``_b``, ``_c`` of ``operands``;
    ``source`` is the file of the building module (see :func:`expansion_state`)."""
    sdfg = dace.SDFG(name)
    for connector in CONNECTORS:
        view = operands.view(connector)
        sdfg.add_array(connector, view.shape, view.dtype, strides=view.strides)
    return sdfg, expansion_state(sdfg, name, source)


def add_transient_matrix(sdfg: dace.SDFG, name: str, shape, dtype, reason: BufferReason | None) -> str:
    """Add a transient of ``shape`` on the heap (a whole operand or result: never a register array); mark it
    as a buffer for ``reason`` unless it streams (None)."""
    name, desc = sdfg.add_transient(name, shape, dtype, storage=dace.StorageType.CPU_Heap, find_new_name=True)
    if reason is not None:
        mark_buffer(desc, reason)
    return name


def add_operand_buffer(
    state: dace.SDFGState, operands: MMMOperands, operand: str, name: str
) -> tuple[dace.nodes.AccessNode, MatrixView]:
    """Copy the matrices on ``operand`` whole into a new transient ``name``, a REUSE buffer (the tasks
    re-read it): one rows × columns matrix per batch element the operand is not broadcast over. The copy
    is an access-node-to-access-node memlet: an edge between two containers, not a task. Returns the
    buffer's access node and its view (indexed like the operand)."""
    view = operands.view(operand)
    compact = view.compact(operands.batch)
    buffer = add_transient_matrix(state.sdfg, name, compact.shape, view.dtype, BufferReason.REUSE)
    source, target = state.add_read(operand), state.add_access(buffer)
    state.add_nedge(
        source,
        target,
        dace.Memlet(data=operand, subset=view.whole(operands.batch), other_subset=compact.whole(operands.batch)),
    )
    return target, compact


def _memlet(node: dace.nodes.AccessNode, access: str | dace.Memlet) -> dace.Memlet:
    return access if isinstance(access, dace.Memlet) else dace.Memlet(data=node.data, subset=access)


def add_flat_map(
    state: dace.SDFGState,
    label: str,
    ranges: dict[str, str],
    inputs: dict[str, tuple[dace.nodes.AccessNode, str | dace.Memlet]],
    code: str,
    outputs: dict[str, tuple[dace.nodes.AccessNode, str | dace.Memlet]],
    language: dace.Language = dace.Language.Python,
) -> dace.nodes.MapEntry:
    """A single task: one multi-dimensional map ``label`` over ``ranges`` (iterated in the given order)
    with a tasklet body. ``inputs`` / ``outputs`` map a tasklet connector to (access node, subset
    expression or memlet)."""
    entry, exit_ = state.add_map(label, ranges)
    tasklet = state.add_tasklet(label, dict.fromkeys(inputs), dict.fromkeys(outputs), code, language=language)
    for conn, (node, access) in inputs.items():
        state.add_memlet_path(node, entry, tasklet, dst_conn=conn, memlet=_memlet(node, access))
    for conn, (node, access) in outputs.items():
        state.add_memlet_path(tasklet, exit_, node, src_conn=conn, memlet=_memlet(node, access))
    return entry


def add_task_map(
    state: dace.SDFGState,
    label: str,
    task_ranges: dict[str, str],
    body_label: str,
    body_ranges: dict[str, str],
    inputs: dict[str, tuple[dace.nodes.AccessNode, str]],
    code: str,
    outputs: dict[str, tuple[dace.nodes.AccessNode, str]],
) -> dace.nodes.MapEntry:
    """A task map: an outer map over ``task_ranges`` (the batch indices, then the task index) whose body is
    the per-task map over ``body_ranges`` with a tasklet. Each outer iteration is one task (Contract 2).

    ``inputs`` / ``outputs`` map a tasklet connector to (access node, subset expression in the indices of
    both maps); the memlets on the maps are propagated from them, so the memlets at the body map's entry
    are the accesses of one task.
    """
    task_entry, task_exit = state.add_map(label, task_ranges)
    body_entry, body_exit = state.add_map(body_label, body_ranges)
    tasklet = state.add_tasklet(label, dict.fromkeys(inputs), dict.fromkeys(outputs), code)
    for conn, (node, subset) in inputs.items():
        state.add_memlet_path(
            node, task_entry, body_entry, tasklet, dst_conn=conn, memlet=dace.Memlet(data=node.data, subset=subset)
        )
    for conn, (node, subset) in outputs.items():
        state.add_memlet_path(
            tasklet, body_exit, task_exit, node, src_conn=conn, memlet=dace.Memlet(data=node.data, subset=subset)
        )
    return task_entry


def dot_product_code(length, dtype: dace.typeclass) -> str:
    """Tasklet code for ``__c = Σ_t __a[t]·__b[t]`` over ``t < length`` (``__a``, ``__b`` are vector
    connectors, scalars when ``length`` is 1)."""
    if length == 1:
        return "__c = __a * __b"
    return (
        f"__acc = dace.{dtype.to_string()}(0)\n"
        f"for __t in range({length}):\n"
        "    __acc = __acc + __a[__t] * __b[__t]\n"
        "__c = __acc"
    )


def sum_code(length, dtype: dace.typeclass) -> str:
    """Tasklet code for ``__c = Σ_t __p[t]`` over ``t < length`` (``__p`` is a vector connector, a scalar
    when ``length`` is 1)."""
    if length == 1:
        return "__c = __p"
    return (
        f"__acc = dace.{dtype.to_string()}(0)\nfor __t in range({length}):\n    __acc = __acc + __p[__t]\n__c = __acc"
    )
