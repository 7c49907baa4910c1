"""Small fully lowered SDFGs for the DAG tests, built by hand so that each shows one extraction rule.

Every builder returns an SDFG that follows Contract 2 (flat maps are tasks, a map with a nested map
is a task map) with its program inputs and outputs marked PROGRAM_IO, as the lowering marks them.
"""

import dace
from dace.transformation.passes.fusion_inline import InlineSDFGs

from dcaccel.buffers import BufferReason, mark_buffer
from dcaccel.expansions.mmm import MMM


def _program_io(sdfg: dace.SDFG, *names: str) -> None:
    for name in names:
        mark_buffer(sdfg.arrays[name], BufferReason.PROGRAM_IO)


def mmm_program(shape: str, n, k, m) -> dace.SDFG:
    """C = A·B through one MMM node expanded in ``shape`` and inlined (sizes may be symbols)."""
    sdfg = dace.SDFG(f"mmm_{shape}")
    for name, dims in (("A", (n, k)), ("B", (k, m)), ("C", (n, m))):
        sdfg.add_array(name, dims, dace.float32)
    _program_io(sdfg, "A", "B", "C")
    state = sdfg.add_state("mmm")
    node = MMM("mmm")
    node.implementation = shape
    state.add_node(node)
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet.from_array("A", sdfg.arrays["A"]))
    state.add_edge(state.add_read("B"), None, node, "_b", dace.Memlet.from_array("B", sdfg.arrays["B"]))
    state.add_edge(node, "_c", state.add_write("C"), None, dace.Memlet.from_array("C", sdfg.arrays["C"]))
    sdfg.expand_library_nodes()
    InlineSDFGs().apply_pass(sdfg, {})
    return sdfg


def elementwise(state, label: str, size, inputs: dict, code: str, outputs: dict, nodes: dict, written=None):
    """A flat element-wise map ``label`` over ``i < size``; ``inputs``/``outputs`` map a connector to
    (container, index expression); ``nodes`` holds the access node of each container in ``state``
    (``written``, when given, those of the outputs: a container updated in place needs two nodes)."""
    written = nodes if written is None else written
    for known, accesses in ((nodes, inputs), (written, outputs)):
        for data, _ in accesses.values():
            if data not in known:
                known[data] = state.add_access(data)
    state.add_mapped_tasklet(
        label,
        {"i": f"0:{size}"},
        {conn: dace.Memlet(f"{data}[{index}]") for conn, (data, index) in inputs.items()},
        code,
        {conn: dace.Memlet(f"{data}[{index}]") for conn, (data, index) in outputs.items()},
        external_edges=True,
        input_nodes={data: nodes[data] for data, _ in inputs.values()},
        output_nodes={data: written[data] for data, _ in outputs.values()},
    )


def chain_program(size: int = 8) -> dace.SDFG:
    """B = ((A + 1) · 2) − 3 as three element-wise tasks through the streamed transients t1, t2."""
    sdfg = dace.SDFG("chain")
    sdfg.add_array("A", (size,), dace.float32)
    sdfg.add_array("B", (size,), dace.float32)
    sdfg.add_transient("t1", (size,), dace.float32)
    sdfg.add_transient("t2", (size,), dace.float32)
    _program_io(sdfg, "A", "B")
    state, nodes = sdfg.add_state("chain"), {}
    elementwise(state, "Inc", size, {"a": ("A", "i")}, "b = a + 1", {"b": ("t1", "i")}, nodes)
    elementwise(state, "Double", size, {"a": ("t1", "i")}, "b = a * 2", {"b": ("t2", "i")}, nodes)
    elementwise(state, "Dec", size, {"a": ("t2", "i")}, "b = a - 3", {"b": ("B", "i")}, nodes)
    return sdfg


def two_state_program(size: int = 8) -> dace.SDFG:
    """A producer in one state and its consumer in the next, through the streamed transient t."""
    sdfg = dace.SDFG("two_states")
    sdfg.add_array("A", (size,), dace.float32)
    sdfg.add_array("B", (size,), dace.float32)
    sdfg.add_transient("t", (size,), dace.float32)
    _program_io(sdfg, "A", "B")
    first = sdfg.add_state("first")
    second = sdfg.add_state_after(first, "second")
    elementwise(first, "Produce", size, {"a": ("A", "i")}, "b = a + 1", {"b": ("t", "i")}, {})
    elementwise(second, "Consume", size, {"a": ("t", "i")}, "b = a * 2", {"b": ("B", "i")}, {})
    return sdfg


def in_place_program(size: int = 8) -> dace.SDFG:
    """``Scale`` updates the buffer A in place (read and written), ``Copy`` reads the new content."""
    sdfg = dace.SDFG("in_place")
    sdfg.add_array("A", (size,), dace.float32)
    sdfg.add_array("B", (size,), dace.float32)
    _program_io(sdfg, "A", "B")
    first = sdfg.add_state("scale")
    second = sdfg.add_state_after(first, "copy")
    elementwise(first, "Scale", size, {"a": ("A", "i")}, "b = a * 2", {"b": ("A", "i")}, {}, {})
    elementwise(second, "Copy", size, {"a": ("A", "i")}, "b = a", {"b": ("B", "i")}, {})
    return sdfg


def reread_program(size: int = 8) -> dace.SDFG:
    """``Mirror`` reads every element of the unmarked transient t twice (t[i] and t[size-1-i])."""
    sdfg = dace.SDFG("reread")
    sdfg.add_array("A", (size,), dace.float32)
    sdfg.add_array("B", (size,), dace.float32)
    sdfg.add_transient("t", (size,), dace.float32)
    _program_io(sdfg, "A", "B")
    state, nodes = sdfg.add_state("reread"), {}
    elementwise(state, "Inc", size, {"a": ("A", "i")}, "b = a + 1", {"b": ("t", "i")}, nodes)
    elementwise(
        state, "Mirror", size, {"x": ("t", "i"), "y": ("t", f"{size - 1} - i")}, "b = x + y", {"b": ("B", "i")}, nodes
    )
    return sdfg


def halves_program(size: int = 8) -> dace.SDFG:
    """Two tasks write one half of t each; ``Sum`` reads t and the transient u (from ``Inc``) whole.

    Under the exact rule Sum's in-edges from the halves carry size/2 and the one from Inc size:
    unequal in-volumes, repaired by making t a buffer node.
    """
    half = size // 2
    sdfg = dace.SDFG("halves")
    sdfg.add_array("A", (size,), dace.float32)
    sdfg.add_array("B", (size,), dace.float32)
    sdfg.add_transient("t", (size,), dace.float32)
    sdfg.add_transient("u", (size,), dace.float32)
    _program_io(sdfg, "A", "B")
    state, nodes = sdfg.add_state("halves"), {}
    elementwise(state, "Low", half, {"a": ("A", "i")}, "b = a", {"b": ("t", "i")}, nodes)
    elementwise(state, "High", half, {"a": ("A", f"i + {half}")}, "b = a", {"b": ("t", f"i + {half}")}, nodes)
    elementwise(state, "Inc", size, {"a": ("A", "i")}, "b = a + 1", {"b": ("u", "i")}, nodes)
    elementwise(state, "Sum", size, {"x": ("t", "i"), "y": ("u", "i")}, "b = x + y", {"b": ("B", "i")}, nodes)
    return sdfg


def two_outputs_program(size: int = 8) -> dace.SDFG:
    """Two independent tasks writing two program outputs: the DAG has two exits."""
    sdfg = dace.SDFG("two_outputs")
    for name in ("A", "B", "C"):
        sdfg.add_array(name, (size,), dace.float32)
    _program_io(sdfg, "A", "B", "C")
    state, nodes = sdfg.add_state("outputs"), {}
    elementwise(state, "Inc", size, {"a": ("A", "i")}, "b = a + 1", {"b": ("B", "i")}, nodes)
    elementwise(state, "Dec", size, {"a": ("A", "i")}, "b = a - 1", {"b": ("C", "i")}, nodes)
    return sdfg


def loop_program(size: int = 8) -> dace.SDFG:
    """An element-wise task inside a sequential loop region (no static task structure)."""

    @dace.program
    def looped(A: dace.float32[size], B: dace.float32[size]):
        for _ in range(3):
            B[:] = A + B

    sdfg = looped.to_sdfg(simplify=True)
    _program_io(sdfg, "A", "B")
    return sdfg


def prefix_program(n, k) -> dace.SDFG:
    """``Inc`` writes C[i] and the transient t[i] (i < n); ``Head`` reads only the prefix t[0:k] (k <= n)
    into D. Inc's out-edges carry n (into C) and k (to Head through t), equal only when k = n."""
    sdfg = dace.SDFG("prefix")
    sdfg.add_array("A", (n,), dace.float32)
    sdfg.add_array("C", (n,), dace.float32)
    sdfg.add_array("D", (k,), dace.float32)
    sdfg.add_transient("t", (n,), dace.float32)
    _program_io(sdfg, "A", "C", "D")
    state, nodes = sdfg.add_state("prefix"), {}
    elementwise(state, "Inc", n, {"a": ("A", "i")}, "b = a + 1\nc = a + 1", {"b": ("C", "i"), "c": ("t", "i")}, nodes)
    elementwise(state, "Head", k, {"a": ("t", "i")}, "b = a", {"b": ("D", "i")}, nodes)
    return sdfg


def split_program(n, k) -> dace.SDFG:
    """``Low`` writes t[0:n], ``High`` t[n:n+k]; ``Sum`` reads all of t: its in-edges carry n and k."""
    sdfg = dace.SDFG("split")
    sdfg.add_array("A", (n + k,), dace.float32)
    sdfg.add_array("B", (n + k,), dace.float32)
    sdfg.add_transient("t", (n + k,), dace.float32)
    _program_io(sdfg, "A", "B")
    state, nodes = sdfg.add_state("split"), {}
    elementwise(state, "Low", n, {"a": ("A", "i")}, "b = a", {"b": ("t", "i")}, nodes)
    elementwise(state, "High", k, {"a": ("A", f"i + {n}")}, "b = a", {"b": ("t", f"i + {n}")}, nodes)
    elementwise(state, "Sum", n + k, {"a": ("t", "i")}, "b = a", {"b": ("B", "i")}, nodes)
    return sdfg
