"""The SDFG builder of every canonical implementation, and the index and literal helpers they share.

A canonical implementation expands one node into a nested SDFG made of *flat* maps (one
multi-dimensional map around one tasklet, WCR for reductions) and *task maps* (an outer map over
the task index whose body is the per-task map), so that after inlining every map is one task, or
one task per outer iteration, of the canonical DAG (contract 2 in ``docs/architecture.md``).
:class:`ExpansionBuilder` builds that nested SDFG: steps are added in dataflow order to one compute
state, reduction identities are written by :meth:`~ExpansionBuilder.init` maps into a preceding
initialisation state (the idiom of DaCe's own ``Reduce`` expansion).

**The operand-buffer rule.** A step that reads an input more than once, or in another order than
the input is produced, reads it from a buffer. An input that another task produces (it streams)
is written into a new buffer container of the expansion, ``<input>_copy``, by a plain
container-to-container copy: an edge from the input's container into the buffer, **not a task**.
A buffer node is the storage the producer's stream is written into, so filling it costs no work:
the producer sends its stream to the buffer (in the seed's DAGs ``Xr → _b_copy`` and
``W_col → _a_copy``). Inputs that no task produces (program inputs and weights, which the lowering
marks as buffers) are read directly (:meth:`ExpansionBuilder.operand`). Every implementation —
the MMM shapes, Conv, Gemm and the ONNX ops — follows this one rule.
"""

import ast
import copy
import math
from collections.abc import Mapping, Sequence

import dace
import numpy as np
from dace import SDFG, SDFGState
from dace.sdfg import nodes

from dcaccel.buffers import BufferReason, mark_buffer

FLOAT_TYPES = (dace.float16, dace.float32, dace.float64)

WCR_SUM = "lambda a, b: a + b"
WCR_MAX = "lambda a, b: max(a, b)"


# ---------------------------------------------------------------------------------------------
# Shapes, indices and literals


def index_params(rank: int, prefix: str = "__i") -> list[str]:
    """Map parameter names for a ``rank``-dimensional index space: ``__i0, __i1, ...``.

    (Double underscores keep them apart from the container names of the program an expansion is
    inlined into.)
    """
    return [f"{prefix}{d}" for d in range(rank)]


def index_ranges(params: Sequence[str], shape: Sequence) -> dict[str, str]:
    """Map ranges iterating ``shape`` row-major with ``params``; a rank-0 shape gets one iteration."""
    if not params:
        return {"__unit": "0:1"}
    return {p: f"0:{s}" for p, s in zip(params, shape, strict=True)}


def subscript(indices: Sequence) -> str:
    """A memlet subscript from per-dimension index expressions (``0`` for a scalar)."""
    return ", ".join(str(i) for i in indices) if indices else "0"


def at_axis(values: Sequence, axis: int, value) -> list:
    """``values`` (indices, sizes) with the one of ``axis`` replaced by ``value``."""
    return [value if d == axis else v for d, v in enumerate(values)]


def whole(shape: Sequence) -> str:
    """The subset of every element of a container of ``shape``."""
    return subscript([f"0:{size}" for size in shape])


def broadcast_indices(in_shape: Sequence, out_shape: Sequence, out_indices: Sequence) -> list:
    """Indices into an input of ``in_shape`` read at output position ``out_indices`` (numpy broadcasting).

    Dimensions are aligned from the right; an input dimension of size 1 facing a larger output
    dimension is read at index 0.
    """
    offset = len(out_shape) - len(in_shape)
    if offset < 0:
        raise ValueError(f"cannot broadcast shape {tuple(in_shape)} to {tuple(out_shape)}")
    return [
        0 if size == 1 and out_shape[offset + d] != 1 else out_indices[offset + d] for d, size in enumerate(in_shape)
    ]


def is_broadcast(in_shape: Sequence, out_shape: Sequence) -> bool:
    """Whether broadcasting ``in_shape`` to ``out_shape`` reads some input element more than once (sizes may be
    symbolic: ``N`` against ``N`` is not a broadcast, ``()`` against ``N`` is)."""
    return math.prod(in_shape) != math.prod(out_shape)


def literal(value, dtype: dace.typeclass) -> str:
    """A tasklet expression for the constant ``value`` converted to ``dtype``."""
    if dtype == dace.bool_:
        return "True" if bool(value) else "False"
    if is_complex(dtype):
        value = complex(value)
        return f"dace.{dtype.to_string()}({value.real!r}, {value.imag!r})"
    number = int(value) if np.issubdtype(dtype.type, np.integer) else float(value)
    return f"dace.{dtype.to_string()}({number!r})"


def lowest(dtype: dace.typeclass) -> str:
    """A Python tasklet expression for the lowest finite value of ``dtype``."""
    if dtype == dace.bool_:
        return "False"
    info = np.iinfo(dtype.type) if np.issubdtype(dtype.type, np.integer) else np.finfo(dtype.type)
    return literal(info.min, dtype)


def max_identity(dtype: dace.typeclass) -> str:
    """A C++ expression for the identity of a max reduction over ``dtype``: -infinity, or the lowest value."""
    if np.issubdtype(dtype.type, np.floating):
        return f"-std::numeric_limits<{dtype.ctype}>::infinity()"
    return f"std::numeric_limits<{dtype.ctype}>::lowest()"


def is_complex(dtype: dace.typeclass) -> bool:
    """Whether ``dtype`` is a complex number type."""
    return dtype in (dace.complex64, dace.complex128)


def connector(name: str) -> str:
    """The tasklet connector of the operand a step calls ``name`` (``__`` + name)."""
    return f"__{name}"


def _renamed(code: str, names: Mapping[str, str]) -> str:
    """Python tasklet ``code`` with the identifiers in ``names`` replaced."""

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            node.id = names.get(node.id, node.id)
            return node

    return ast.unparse(Rename().visit(ast.parse(code)))


# ---------------------------------------------------------------------------------------------
# The nested SDFG of an expansion


class ExpansionBuilder:
    """The nested SDFG of an expansion, built step by step in dataflow order.

    Containers: :meth:`argument` (a connector of the nested SDFG), :meth:`transient` (marked as a
    buffer when given a reason). Steps: :meth:`flat_map` (one task), :meth:`task_map` (one task per
    outer iteration), :meth:`library_node` (a node expanded later), :meth:`copy` (a plain copy
    between two containers, not a task) and :meth:`init` (identities of reductions, in a state
    before the compute state). A step reads the latest version of each container in the compute
    state, so steps added later see the results of earlier ones; it writes into the container's
    latest access node while no step has read that node yet, else into a new one.

    Map labels are ``label``, or ``<prefix>_<label>_map`` with a prefix (see :meth:`label`). Tasklet connectors are
    the keys of a step's inputs and outputs prefixed with ``__`` (see :func:`connector`); Python
    code is rewritten accordingly, C++ code must use the prefixed names.
    """

    def __init__(self, name: str, prefix: str = ""):
        self.sdfg = SDFG(name)
        self.prefix = prefix
        self.state = self._new_state(self.sdfg.add_state(name))
        self._init_state: SDFGState | None = None
        self._latest: dict[str, nodes.AccessNode] = {}
        self._streamed: set[str] = set()

    @staticmethod
    def _new_state(state: SDFGState) -> SDFGState:
        # Nodes get this debug information instead of DaCe inspecting the Python stack for each one.
        state.set_default_lineinfo(dace.dtypes.DebugInfo(1, 0, 1, 0, state.sdfg.name))
        return state

    def label(self, label: str) -> str:
        """The map label of step ``label``: ``label`` itself, or with a prefix ``<prefix>_<label>_map`` (the
        label DaCe's ``add_mapped_tasklet`` gives the map of tasklet ``<prefix>_<label>``)."""
        return f"{self.prefix}_{label}_map" if self.prefix else label

    # -- containers
    def argument(self, name: str, desc: dace.data.Data, streamed: bool = False) -> str:
        """Add a non-transient container ``name`` shaped like ``desc`` (a connector of the nested SDFG).

        ``streamed``: another task produces it (see :meth:`operand`).
        """
        arg = copy.deepcopy(desc)
        arg.transient = False
        self.sdfg.add_datadesc(name, arg)
        if streamed:
            self._streamed.add(name)
        return name

    def desc(self, name: str) -> dace.data.Data:
        """The descriptor of container ``name`` in the nested SDFG."""
        return self.sdfg.arrays[name]

    def transient(self, name: str, shape: Sequence, dtype: dace.typeclass, reason: BufferReason | None = None) -> str:
        """Add a transient (a scalar for a rank-0 shape, else an array on the heap), marked as a buffer for
        ``reason`` if given; returns its name (made unique)."""
        if len(shape) == 0:
            name, desc = self.sdfg.add_scalar(name, dtype, transient=True, find_new_name=True)
        else:
            name, desc = self.sdfg.add_array(
                name, tuple(shape), dtype, storage=dace.StorageType.CPU_Heap, transient=True, find_new_name=True
            )
        if reason is not None:
            mark_buffer(desc, reason)
        return name

    def is_streamed(self, name: str) -> bool:
        """Whether argument ``name`` is produced by another task."""
        return name in self._streamed

    def operand(self, name: str, reused: bool, reason: BufferReason = BufferReason.REUSE) -> str:
        """The container a step reads input ``name`` from (the operand-buffer rule of the module docstring).

        If the step reads it more than once or out of order (``reused``) and another task produces it,
        it is copied whole into a new buffer ``<name>_copy`` marked ``reason`` (a plain copy, not a task)
        and the copy is returned; otherwise the input itself.
        """
        if not reused or not self.is_streamed(name):
            return name
        desc = self.desc(name)
        shape = tuple(desc.shape) if isinstance(desc, dace.data.Array) else ()
        buffer = self.transient(f"{name}_copy", shape, desc.dtype, reason)
        self.copy(name, whole(shape), buffer, whole(shape))
        return buffer

    # -- access nodes
    def read_node(self, name: str) -> nodes.AccessNode:
        """The access node steps read ``name`` from: its latest version in the compute state."""
        if name not in self._latest:
            self._latest[name] = self.state.add_read(name)
        return self._latest[name]

    def write_node(self, name: str) -> nodes.AccessNode:
        """The access node a step writes ``name`` into: the latest one while nothing has read it, else a new one."""
        latest = self._latest.get(name)
        if latest is None or self.state.out_degree(latest) > 0:
            latest = self._latest[name] = self.state.add_access(name)
        return latest

    # -- steps
    def copy(self, source: str, source_subset: str, target: str, target_subset: str) -> None:
        """Copy ``source[source_subset]`` into ``target[target_subset]``: an edge between two containers."""
        self.state.add_nedge(
            self.read_node(source),
            self.write_node(target),
            dace.Memlet(data=source, subset=source_subset, other_subset=target_subset),
        )

    def flat_map(
        self,
        label: str,
        ranges: Mapping[str, str],
        inputs: Mapping[str, dace.Memlet],
        code: str,
        outputs: Mapping[str, dace.Memlet],
        language: dace.Language = dace.Language.Python,
    ) -> nodes.Tasklet:
        """Add one flat map step (a task): ``ranges`` (iterated in the given order) around a tasklet ``code``.

        Returns the tasklet.
        """
        return self._mapped_tasklet(self.state, [(self.label(label), ranges)], inputs, code, outputs, language)

    def task_map(
        self,
        label: str,
        task_ranges: Mapping[str, str],
        body_label: str,
        body_ranges: Mapping[str, str],
        inputs: Mapping[str, dace.Memlet],
        code: str,
        outputs: Mapping[str, dace.Memlet],
    ) -> nodes.Tasklet:
        """Add a task map: an outer map ``label`` over ``task_ranges`` whose body is the per-task map over
        ``body_ranges`` with a tasklet. Each outer iteration is one task (contract 2).

        The memlets (subsets in the indices of both maps) are propagated out of both maps, so the memlets at
        the body map's entry are the accesses of one task. Returns the tasklet.
        """
        maps = [(self.label(label), task_ranges), (body_label, body_ranges)]
        return self._mapped_tasklet(self.state, maps, inputs, code, outputs, dace.Language.Python)

    def library_node(
        self, node: nodes.LibraryNode, inputs: Mapping[str, dace.Memlet], outputs: Mapping[str, dace.Memlet]
    ) -> nodes.LibraryNode:
        """Add ``node`` reading ``inputs`` and writing ``outputs`` (connector -> memlet)."""
        self.state.add_node(node)
        for conn, memlet in inputs.items():
            self.state.add_edge(self.read_node(memlet.data), None, node, conn, memlet)
        for conn, memlet in outputs.items():
            self.state.add_edge(node, conn, self.write_node(memlet.data), None, memlet)
        return node

    def init(self, name: str, value: str, language: dace.Language = dace.Language.Python) -> None:
        """Write ``value`` (an expression in ``language``) to every element of ``name``, before the compute state."""
        if self._init_state is None:
            self._init_state = self._new_state(self.sdfg.add_state_before(self.state, f"{self.sdfg.name}_init"))
        desc = self.desc(name)
        params = index_params(len(desc.shape) if isinstance(desc, dace.data.Array) else 0)
        shape = tuple(desc.shape) if params else ()
        code = f"__out = {value};" if language == dace.Language.CPP else "out = " + value
        self._mapped_tasklet(
            self._init_state,
            [(self.label(f"init_{name}"), index_ranges(params, shape))],
            {},
            code,
            {"out": dace.Memlet(f"{name}[{subscript(params)}]")},
            language,
        )

    def row_max(self, source: str, ranges: Mapping[str, str], element: str, row: str, row_shape: Sequence) -> str:
        """The maximum of every row of ``source``: a REUSE buffer ``row_max`` (``row_shape``) initialised to
        the lowest value, then a ``max`` flat map over ``ranges`` that reads ``source[element]`` in
        row-major order and accumulates into ``row_max[row]`` with a WCR max. Returns the buffer's name."""
        dtype = self.desc(source).dtype
        row_max = self.transient("row_max", row_shape, dtype, BufferReason.REUSE)
        self.init(row_max, max_identity(dtype), dace.Language.CPP)
        self.flat_map(
            "max",
            ranges,
            {"v": dace.Memlet(f"{source}[{element}]")},
            "m = v",
            {"m": dace.Memlet(f"{row_max}[{row}]", wcr=WCR_MAX)},
        )
        return row_max

    def _mapped_tasklet(self, state, maps, inputs, code, outputs, language) -> nodes.Tasklet:
        """A tasklet inside the nest of ``maps`` (label, ranges), outermost first, connected to the
        containers of ``inputs`` and ``outputs``; the memlets outside the tasklet are DaCe's propagation
        of ``inputs`` and ``outputs`` through the nest (:class:`PropagatedNests`)."""
        names = {name: connector(name) for name in (*inputs, *outputs)}
        if language == dace.Language.Python:
            code = _renamed(code, names)
        tasklet = state.add_tasklet(
            maps[0][0].removesuffix("_map") if self.prefix else maps[0][0],
            {names[n] for n in inputs},
            {names[n] for n in outputs},
            code,
            language=language,
        )
        scopes = [state.add_map(label, dict(ranges)) for label, ranges in maps]
        entries = [entry for entry, _ in scopes]
        exits = [exit_ for _, exit_ in reversed(scopes)]
        in_state = state is self.state
        key = PROPAGATED.key(self.sdfg, maps, inputs, outputs)
        propagated = PROPAGATED.get(key)
        paths = []
        for name, memlet in inputs.items():
            source = self.read_node(memlet.data) if in_state else state.add_read(memlet.data)
            state.add_memlet_path(
                source, *entries, tasklet, dst_conn=names[name], memlet=memlet, propagate=propagated is None
            )
            paths.append(state.memlet_path(next(state.in_edges_by_connector(tasklet, names[name])))[:-1])
        for entry, inner in zip(entries, [*entries[1:], tasklet], strict=True):
            if state.out_degree(entry) == 0:
                state.add_nedge(entry, inner, dace.Memlet())
        for name, memlet in outputs.items():
            target = self.write_node(memlet.data) if in_state else state.add_write(memlet.data)
            state.add_memlet_path(
                tasklet, *exits, target, src_conn=names[name], memlet=memlet, propagate=propagated is None
            )
            paths.append(state.memlet_path(next(state.out_edges_by_connector(tasklet, names[name])))[1:])
        if propagated is None:
            PROPAGATED.put(key, [[edge.data for edge in path] for path in paths])
        else:
            for path, memlets in zip(paths, propagated, strict=True):
                for edge, memlet in zip(path, memlets, strict=True):
                    edge.data = copy.deepcopy(memlet)
                    edge.data.try_initialize(state.sdfg, state, edge)
        return tasklet


class PropagatedNests:
    """DaCe's propagation of a map nest's memlets, computed once per nest content.

    The memlets outside a tasklet's map nest are DaCe's propagation of the tasklet's memlets through
    the maps (``add_memlet_path``), a sympy computation that dominates building an expansion. It
    reads only what :meth:`key` holds: the maps' parameters and ranges (not their labels), the
    tasklet's memlets in connection order (each is united with the earlier ones of the same container
    in the same scope), the shape and offset of the containers they touch, and the symbols and
    constants the nest may use. Nests of equal key (a model's convolutions of equal shape, the im2col
    every MMM shape of a convolution shares) get copies of the memlets the first one was given. Kept
    per process, at most ``capacity`` nests (the oldest are forgotten first).
    """

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self._nests: dict[tuple, list[list[dace.Memlet]]] = {}

    def __len__(self) -> int:
        return len(self._nests)

    @staticmethod
    def key(sdfg: SDFG, maps, inputs: Mapping[str, dace.Memlet], outputs: Mapping[str, dace.Memlet]) -> tuple:
        """What the propagation of the nest ``maps`` around ``inputs`` and ``outputs`` in ``sdfg`` reads."""

        def accessed(memlet: dace.Memlet) -> tuple:
            return (
                memlet.data,
                str(memlet.subset),
                str(memlet.other_subset),
                memlet.wcr,
                memlet.dynamic,
                str(memlet.volume),
            )

        containers = sorted({memlet.data for memlet in (*inputs.values(), *outputs.values())})
        return (
            tuple(tuple(ranges.items()) for _, ranges in maps),
            tuple((name, accessed(memlet)) for name, memlet in inputs.items()),
            tuple((name, accessed(memlet)) for name, memlet in outputs.items()),
            tuple(
                (name, type(desc).__name__, tuple(map(str, desc.shape)), tuple(map(str, desc.offset)))
                for name, desc in ((name, sdfg.arrays[name]) for name in containers)
            ),
            tuple(sorted(map(str, sdfg.symbols))),
            tuple(sorted(map(str, sdfg.constants))),
        )

    def get(self, key: tuple) -> list[list[dace.Memlet]] | None:
        """The propagated memlets of the nest ``key``, per path (inputs, then outputs; outermost edge
        first for an input, innermost first for an output); None when not computed yet."""
        return self._nests.get(key)

    def put(self, key: tuple, memlets: list[list[dace.Memlet]]) -> None:
        """Keep copies of the propagated ``memlets`` of the nest ``key``."""
        if len(self._nests) >= self.capacity:
            del self._nests[next(iter(self._nests))]
        self._nests[key] = copy.deepcopy(memlets)


#: The propagated nests of every expansion built in this process.
PROPAGATED = PropagatedNests()
