"""The lowered program's validation (``dcaccel.transforms.lower.validate_lowered``): DaCe's ``validate``
with a linear-time cycle check per state, which finds every cycle DaCe's ``find_cycle`` finds."""

from __future__ import annotations

import dace
import pytest
from dace.sdfg import InvalidSDFGError

from dcaccel.transforms.lower import _has_cycles, validate_lowered


def _state(edges: list[tuple[int, int]], nodes: int) -> dace.SDFGState:
    """A state of ``nodes`` access nodes joined by empty memlets along ``edges`` (node index pairs)."""
    sdfg = dace.SDFG("cycles")
    for i in range(nodes):
        sdfg.add_array(f"a{i}", [4], dace.float32)
    state = sdfg.add_state()
    access = [state.add_access(f"a{i}") for i in range(nodes)]
    for src, dst in edges:
        state.add_nedge(access[src], access[dst], dace.Memlet())
    return state


CASES = {
    "empty": ([], 0, False),
    "one node": ([], 1, False),
    "chain": ([(0, 1), (1, 2)], 3, False),
    "diamond with a parallel edge": ([(0, 1), (0, 2), (1, 3), (2, 3), (2, 3)], 4, False),
    "self loop": ([(0, 0)], 1, True),
    "cycle after a source": ([(0, 1), (1, 2), (2, 1)], 3, True),
    "cycle without a source": ([(0, 1), (1, 0)], 2, True),
}


@pytest.mark.parametrize(("edges", "nodes", "cyclic"), CASES.values(), ids=CASES.keys())
def test_has_cycles_agrees_with_dace(edges, nodes, cyclic):
    state = _state(edges, nodes)
    assert _has_cycles(state) is cyclic
    assert state.has_cycles() is cyclic  # DaCe's own answer


def test_cycle_no_source_reaches_is_found_too():
    """A cycle beside a separate source component: DaCe searches from the sources only."""
    state = _state([(0, 1), (2, 3), (3, 2)], 4)
    assert _has_cycles(state)
    assert not state.has_cycles()


@pytest.mark.parametrize("cyclic", [False, True])
def test_validate_lowered_raises_on_a_cycle_and_restores_dace(cyclic):
    state = _state([(0, 1), (1, 0)] if cyclic else [(0, 1)], 2)
    before = dace.SDFGState.has_cycles
    if cyclic:
        with pytest.raises(InvalidSDFGError, match="cycle"):
            validate_lowered(state.sdfg)
    else:
        validate_lowered(state.sdfg)
    assert dace.SDFGState.has_cycles is before
    assert "has_cycles" not in vars(dace.SDFGState)
