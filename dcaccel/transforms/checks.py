"""Checks that an SDFG is fully lowered: maps only, in the form the task DAG extraction reads.

Fully lowered means: no library node anywhere (ONNX nodes included), and at the top level of the
program (outside every map) no nested SDFG left after inlining and no tasklet that moves whole arrays
(an opaque tasklet standing for a whole op); a tasklet outside any map that reads and writes single
elements is allowed. Inside a map, a nested SDFG that cannot be inlined (a map body with loops, e.g.
a per-subcarrier solver) is part of that map's tasks. An opaque task (a nested SDFG or tasklet carrying
the mark of :mod:`dcaccel.transforms.opaque`: an op dcaccel has no canonical implementation of, kept
whole on purpose) is allowed at the top level; what it holds inside is DaCe's business, not the DAG's.
"""

import dace
from dace.libraries.onnx.nodes.onnx_op import ONNXOp
from dace.sdfg import nodes

from dcaccel.transforms.opaque_mark import is_opaque


def _moves_arrays(state: dace.SDFGState, tasklet: nodes.Tasklet) -> bool:
    """Whether a memlet of ``tasklet`` moves more than one element."""
    return any(
        not edge.data.is_empty() and (edge.data.volume != 1 or edge.data.subset.num_elements() != 1)
        for edge in state.all_edges(tasklet)
    )


def lowering_violations(sdfg: dace.SDFG) -> list[str]:
    """One line per node of ``sdfg`` that keeps it from being fully lowered."""
    violations = []
    for node, parent in _outside_opaque_tasks(sdfg):
        if isinstance(node, ONNXOp):
            violations.append(f"ONNX node '{node.label}' ({node.schema.name}) in state '{parent.label}'")
        elif isinstance(node, nodes.LibraryNode):
            violations.append(f"library node '{node.label}' ({type(node).__name__}) in state '{parent.label}'")
    for state in sdfg.states():
        for node in state.nodes():
            if state.entry_node(node) is not None or is_opaque(node):
                continue
            if isinstance(node, nodes.NestedSDFG):
                violations.append(f"nested SDFG '{node.label}' outside a map in state '{state.label}'")
            elif isinstance(node, nodes.Tasklet) and _moves_arrays(state, node):
                violations.append(f"tasklet '{node.label}' outside a map moves whole arrays in state '{state.label}'")
    return violations


def _outside_opaque_tasks(sdfg: dace.SDFG):
    """(node, parent) for every node of ``sdfg`` and its nested SDFGs, except inside opaque tasks."""
    for state in sdfg.states():
        for node in state.nodes():
            yield node, state
            if isinstance(node, nodes.NestedSDFG) and not is_opaque(node):
                yield from _outside_opaque_tasks(node.sdfg)


def assert_fully_lowered(sdfg: dace.SDFG) -> None:
    """Raise AssertionError listing every violation if ``sdfg`` is not fully lowered."""
    violations = lowering_violations(sdfg)
    if violations:
        raise AssertionError(f"SDFG '{sdfg.name}' is not fully lowered:\n" + "\n".join(violations))
