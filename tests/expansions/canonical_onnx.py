"""Helpers of the canonical-implementation tests: ONNX models of many independent ops, run twice.

A test module lists its cases (:class:`OpCase`: one ONNX node with its inputs), builds one model
holding all of them (tensors prefixed per case) and runs it once through onnxruntime and once
through DaCe with every ONNX node expanded by dcaccel's canonical implementation, so that one
compile checks every case of the module.
"""

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

OPSET = 20
IR_VERSION = 9  # the newest onnxruntime here reads


@dataclass(frozen=True)
class OpCase:
    """One ONNX node under test: its op, attributes, graph inputs (random data) and constant inputs.

    ``inputs`` maps each input name to its shape (float32 data, or ``dtype``); ``constants`` maps
    names to arrays bound as initializers; ``node_inputs`` lists the node's inputs in order (""
    for an absent optional input); ``outputs`` the node's outputs.
    """

    name: str
    op_type: str
    node_inputs: Sequence[str]
    inputs: Mapping[str, tuple] = field(default_factory=dict)
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)
    attributes: Mapping[str, object] = field(default_factory=dict)
    outputs: Sequence[str] = ("y",)
    dtype: type = np.float32

    def tensor(self, name: str) -> str:
        """The name of this case's tensor ``name`` in the merged model."""
        return f"{self.name}__{name}" if name else ""


def build_model(cases: Sequence[OpCase], opset: int = OPSET) -> onnx.ModelProto:
    """One model with the node of every case (disjoint tensors), shapes inferred."""
    nodes, inputs, initializers, outputs = [], [], [], []
    for case in cases:
        nodes.append(
            helper.make_node(
                case.op_type,
                [case.tensor(n) for n in case.node_inputs],
                [case.tensor(n) for n in case.outputs],
                name=case.name,
                **case.attributes,
            )
        )
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(case.dtype))
        inputs += [helper.make_tensor_value_info(case.tensor(n), elem, shape) for n, shape in case.inputs.items()]
        initializers += [onnx.numpy_helper.from_array(np.asarray(v), case.tensor(n)) for n, v in case.constants.items()]
        outputs += [onnx.ValueInfoProto(name=case.tensor(n)) for n in case.outputs if n]  # "": absent
    graph = helper.make_graph(nodes, "cases", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    output_names = {o.name for o in inferred.graph.output}
    kept = [v for v in inferred.graph.value_info if v.name not in output_names]
    del inferred.graph.value_info[:]
    inferred.graph.value_info.extend(kept)
    return inferred


def random_feed(cases: Sequence[OpCase], seed: int = 0) -> dict[str, np.ndarray]:
    """Random data for every graph input of ``cases`` (standard normal, or small integers)."""
    rng = np.random.default_rng(seed)
    feed = {}
    for case in cases:
        for name, shape in case.inputs.items():
            if np.issubdtype(case.dtype, np.integer):
                value = rng.integers(-5, 6, size=shape)
            else:
                value = rng.standard_normal(shape)
            feed[case.tensor(name)] = np.asarray(value, dtype=case.dtype)
    return feed


def arg_case(op: str, label: str, shape: tuple, axis: int, keepdims: int, last: int, dtype=np.float32) -> OpCase:
    """An ArgMax or ArgMin (``op``) case of input ``x`` of ``shape`` along ``axis``, with ``keepdims`` and
    ``select_last_index`` (``last``), named by op, ``label`` and attributes."""
    name = f"{op}_{label}_axis{axis}_keep{keepdims}_last{last}".replace("-", "m").lower()
    attributes = {"axis": axis, "keepdims": keepdims, "select_last_index": last}
    return OpCase(name, op, ["x"], {"x": shape}, {}, attributes, dtype=dtype)


#: The inputs of the ArgMax and ArgMin cases: (label, shape, axis, dtype); small integers have many ties, where
#: select_last_index matters.
ARG_INPUTS = [
    ("float", (2, 3, 4), 1, np.float32),
    ("float", (2, 3, 4), -1, np.float32),
    ("ties", (3, 5), 0, np.int32),
    ("ties", (3, 5), 1, np.int32),
    ("size_one_axis", (3, 1, 2), 1, np.float32),
    ("rank_one", (6,), 0, np.int32),
]


def arg_cases(op: str) -> list[OpCase]:
    """The cases of ArgMax or ArgMin (``op``): every input of :data:`ARG_INPUTS`, with and without ``keepdims``
    and ``select_last_index``."""
    return [
        arg_case(op, label, shape, axis, keepdims, last, dtype)
        for (label, shape, axis, dtype), keepdims, last in itertools.product(ARG_INPUTS, (0, 1), (0, 1))
    ]


def batchnorm_case(name: str, shape: tuple, seed: int, parameter_shape=None, outputs=("y",), **attributes) -> OpCase:
    """A BatchNormalization case of input ``x`` of ``shape``: constants ``scale``, ``bias``, ``mean`` (standard
    normal) and ``var`` (uniform in [0.5, 2)) of ``parameter_shape`` (default: the channels), float32, drawn in
    that order from ``seed``."""
    parameter_shape = parameter_shape or shape[1:2]
    rng = np.random.default_rng(seed)
    constants = {
        "scale": rng.standard_normal(parameter_shape).astype(np.float32),
        "bias": rng.standard_normal(parameter_shape).astype(np.float32),
        "mean": rng.standard_normal(parameter_shape).astype(np.float32),
        "var": rng.uniform(0.5, 2, parameter_shape).astype(np.float32),
    }
    inputs = ["x", "scale", "bias", "mean", "var"]
    return OpCase(name, "BatchNormalization", inputs, {"x": shape}, constants, attributes, outputs)


def run_reference(model: onnx.ModelProto, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs of ``model`` computed by onnxruntime, by output name."""
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, session.run(names, dict(feed)), strict=True))


def canonical_model(model: onnx.ModelProto, name: str, implementations: Mapping[str, str] | None = None):
    """``model`` imported into DaCe with every ONNX node expanded by its canonical implementation, or by
    ``implementations[label]`` where given (e.g. an MMM shape)."""
    from dace.libraries.onnx.nodes.onnx_op import ONNXOp
    from dace.ml import ONNXModel

    from dcaccel.expansions import register

    register()

    imported = ONNXModel(name, model, onnx_simplify=False)
    for node, _ in imported.sdfg.all_nodes_recursive():
        if isinstance(node, ONNXOp):
            node.implementation = (implementations or {}).get(node.label, "canonical")
    imported.sdfg.expand_library_nodes()
    return imported


def run_canonical(
    model: onnx.ModelProto,
    feed: Mapping[str, np.ndarray],
    name: str,
    implementations: Mapping[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """The outputs of ``model`` run with dcaccel's canonical implementations (or ``implementations`` by node
    label, :func:`canonical_model`), one compile, by output name."""
    imported = canonical_model(model, name, implementations)
    results = imported(**{k: v.copy() for k, v in feed.items()})
    results = results if isinstance(results, tuple) else (results,)
    names = [o.name for o in model.graph.output]
    return {n: np.asarray(r) for n, r in zip(names, results, strict=True)}


def lowered_dag(model: onnx.ModelProto, name: str):
    """The task DAG of ``model`` imported into DaCe as ``name`` (without constant folding) and lowered
    canonically, nothing compiled."""
    from dace.ml import ONNXModel

    from dcaccel.dag import extract
    from dcaccel.expansions import register
    from dcaccel.transforms.lower import lower

    register()
    return extract(lower(ONNXModel(name, model, onnx_simplify=False).sdfg))


def task_volumes(dag, prefix: str) -> dict[str, tuple[int, int]]:
    """Per task of ``dag`` (its label without ``prefix_``, a case's name, and the map's ``_map``): its total volume
    in and out."""
    return {
        dag.label(t).removeprefix(f"{prefix}_").removesuffix("_map"): (
            sum(dag.volume(p, t) for p in dag.predecessors(t)),
            sum(dag.volume(t, s) for s in dag.successors(t)),
        )
        for t in dag.tasks
    }


def assert_node_tasks(dag, name: str, expected: Sequence[str]) -> None:
    """The tasks of node ``name`` in ``dag`` are ``expected`` (labels without ``name_`` and ``_map``, in any
    order) and none is opaque."""
    ours = [t for t in dag.tasks if dag.info(t).node == name]
    assert not any(dag.info(t).opaque for t in ours)
    labels = sorted(dag.label(t).removeprefix(f"{name}_").removesuffix("_map") for t in ours)
    assert labels == sorted(expected)


#: How many cases a task-DAG test lowers in one model: DaCe inlines each expanded node by walking its whole
#: state, so lowering n independent nodes in one state grows as n² (105 element-wise cases: 6.8 s in one
#: model, 2.4 s in groups of 15).
LOWERING_GROUP = 15


class LoweredDags(Mapping):
    """The task DAG of each case's model, by case name: ``cases`` lowered canonically in models of ``group``
    cases (nothing compiled), imported without constant folding. A group is lowered when one of its cases is
    first read, so that a session running a few of the cases lowers only their groups."""

    def __init__(self, cases: Sequence[OpCase], name: str, group: int = LOWERING_GROUP):
        self._name = name
        self._groups = {
            case.name: start for start in range(0, len(cases), group) for case in cases[start : start + group]
        }
        self._chunks = {start: cases[start : start + group] for start in range(0, len(cases), group)}
        self._lowered = {}

    def __getitem__(self, case_name: str):
        start = self._groups[case_name]
        if start not in self._lowered:
            self._lowered[start] = lowered_dag(build_model(self._chunks[start]), f"{self._name}_{start}")
        return self._lowered[start]

    def __iter__(self):
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)


def lowered_dags(cases: Sequence[OpCase], name: str, group: int = LOWERING_GROUP) -> LoweredDags:
    """The task DAG of each case's model, by case name, lowered a group at a time on first use."""
    return LoweredDags(cases, name, group)


@dataclass(frozen=True)
class TopLevelScope:
    """A top-level node of an inlined state: a map (with what its body holds) or another node."""

    state: str
    label: str
    kind: str
    body: frozenset[str] = frozenset()


def reference_and_canonical(cases: Sequence[OpCase], name: str) -> tuple[dict, dict]:
    """Outputs of ``cases`` merged into one model, from onnxruntime and from dcaccel's canonical
    implementations (one compile), on the seeded random feed."""
    model = build_model(cases)
    feed = random_feed(cases)
    return run_reference(model, feed), run_canonical(model, feed, name)


def outputs_per_opset(
    models: Mapping[int, Sequence[OpCase]],
    name: str,
    model: Callable[[Sequence[OpCase], int], onnx.ModelProto] = build_model,
    feed: Callable[[Sequence[OpCase], int], dict[str, np.ndarray]] = random_feed,
) -> dict[int, tuple[dict, dict]]:
    """Per opset of ``models``, the outputs of its cases merged into one model (``model(cases, opset)``) from
    onnxruntime and from dcaccel's canonical implementations (one compile per opset, named ``name_opset``), on
    ``feed(cases, opset)`` (the random feed seeded by the opset)."""
    outputs = {}
    for opset, cases in models.items():
        merged, values = model(cases, opset), feed(cases, opset)
        outputs[opset] = run_reference(merged, values), run_canonical(merged, values, f"{name}_{opset}")
    return outputs


def opset_cases(models: Mapping[int, Sequence[OpCase]]) -> list[tuple[int, OpCase]]:
    """Every (opset, case) of ``models``, to parametrize a test over with :func:`opset_case_id`."""
    return [(opset, case) for opset, cases in models.items() for case in cases]


def opset_case_id(value) -> str:
    """The test id of an opset (``opset18``) or a case (its name)."""
    return value.name if isinstance(value, OpCase) else f"opset{value}"


def assert_output_matches(
    outputs: tuple[dict, dict],
    name: str,
    *,
    rtol: float | None = None,
    atol: float = 0.0,
    same_dtype: bool = False,
    finite: bool = False,
) -> None:
    """Output ``name`` of ``outputs`` (onnxruntime's, canonical) has onnxruntime's shape (and dtype, with
    ``same_dtype``; only finite values, with ``finite``) and values: within ``rtol``/``atol``, or exactly
    equal when ``rtol`` is None."""
    reference, canonical = outputs
    assert canonical[name].shape == reference[name].shape
    if same_dtype:
        assert canonical[name].dtype == reference[name].dtype
    if finite:
        assert np.isfinite(canonical[name]).all()
    if rtol is None:
        np.testing.assert_array_equal(canonical[name], reference[name])
    else:
        np.testing.assert_allclose(canonical[name], reference[name], rtol=rtol, atol=atol)


def top_level_scopes(sdfg) -> list[TopLevelScope]:
    """The top-level scopes of ``sdfg`` after inlining every nested SDFG (the tasks of contract 2), in program order."""
    from dace.sdfg import nodes
    from dace.sdfg.utils import dfs_topological_sort, inline_sdfgs

    inline_sdfgs(sdfg, multistate=True)
    scopes = []
    for state in sdfg.bfs_nodes(sdfg.start_block):
        parents = state.scope_dict()
        for node in dfs_topological_sort(state):
            if parents[node] is not None or isinstance(node, (nodes.AccessNode, nodes.ExitNode)):
                continue
            if isinstance(node, nodes.MapEntry):
                inner = state.scope_subgraph(node, include_entry=False, include_exit=False).nodes()
                body = frozenset(type(n).__name__ for n in inner)
                scopes.append(TopLevelScope(state.label, node.map.label, "map", body))
            else:
                scopes.append(TopLevelScope(state.label, node.label, type(node).__name__))
    return scopes


def assert_flat_maps(sdfg) -> list[TopLevelScope]:
    """Assert that ``sdfg`` (expanded) is made of flat maps only: each top-level scope a map around one tasklet."""
    scopes = top_level_scopes(sdfg)
    assert scopes, "no top-level scope"
    for scope in scopes:
        assert scope.kind == "map", f"{scope.label} is a top-level {scope.kind}, not a map"
        assert scope.body == {"Tasklet"}, f"map {scope.label} holds {sorted(scope.body)}, not one tasklet"
    return scopes


def buffer_copies(sdfg) -> list[tuple[str, str, str]]:
    """The plain copies (access node to access node, no task) into a buffer of ``sdfg``: (source, buffer, reason)."""
    from dace.sdfg import nodes

    from dcaccel.buffers import buffer_reason

    return [
        (edge.src.data, edge.dst.data, buffer_reason(sdfg.arrays[edge.dst.data]).value)
        for state in sdfg.states()
        for edge in state.edges()
        if isinstance(edge.src, nodes.AccessNode)
        and isinstance(edge.dst, nodes.AccessNode)
        and buffer_reason(sdfg.arrays[edge.dst.data]) is not None
    ]
