"""Run ONNX's backend node test cases through dcaccel's canonical implementations.

For every ONNX op with a canonical implementation (``dcaccel.expansions.supported_ops()``), the
test cases of that op (``onnx.backend.test.case.node.collect_testcases``: a model and reference
inputs and outputs; ``_expanded`` variants included) go through dcaccel's import as ``dcaccel.load(...,
fold=False)`` does it (:func:`imported_graph`: old opsets converted, control flow and ONNX function bodies
rewritten where dcaccel does so, shape operands folded, every other computed subgraph kept) → DaCe's import
(``dace.ml.ONNXModel``) → ``implementation = "canonical"`` on every ONNX node → library node expansion →
compile → run → comparison with the reference outputs at the case's tolerances. Every case ends as:

- ``pass``: every op lowered canonically, outputs equal to the reference (when the tested op is no longer in
  the imported graph, the reason says what it was lowered as: its function body, or an ``Identity``);
- ``host`` (with ``--fallback``): outputs equal to the reference, a node lowering keeps as an opaque task
  (``dcaccel.transforms.lower.opaque_node``: its op has no canonical implementation, or the canonical
  implementation's check refuses this node) run through lowering's fallback (``dcaccel.transforms.opaque``:
  DaCe's expansion kept as one opaque task, else a host task calling onnxruntime); the reason names op,
  fallback and the refusal if there was one;
- ``skip``, with the reason: the model uses an op dcaccel does not lower, or an attribute the canonical
  implementation refuses (both without ``--fallback``), a tensor type DaCe cannot represent, or what the
  fallback or the import rejects (``UnsupportedOpError``, one line naming the op);
- ``fail``, with the reason (the error, or the largest deviation from the reference); a case that draws random
  values (:func:`draws_random`) and differs from its reference (one draw of onnx's generator) is a ``skip``.

The per-op table merges an op's implementations (``Conv[mv]``, ``Conv[op]``...) into one row and gives the
``_expanded`` cases (the op's function body written out by ONNX's test generator: the op itself is not in their
graph) rows of their own, ``<op> (expanded)``, which are not op types of the coverage measure. An op type is
*canonical* when at least one of its own cases passed (:func:`op_class`).

``--all`` selects every op of the backend tests instead of the ops dcaccel lowers. The cases of sequence,
optional, map and string tensors, of optional ops and of training ops are left out in every selection
(:func:`excluded`).

Shape parameters that the canonical model needs as constants (Reshape's ``shape``, Slice's
``starts``…, the ``axes`` inputs) are graph inputs in the backend tests; they are bound to the
test's values as initializers before import. Cases are imported and expanded one by one (which
finds skips without compiling), then compiled together: the cases with the same opsets are
merged into one model (tensors renamed per case) and one SDFG per batch is compiled. A batch
that fails to compile or run is split in halves until the failing cases are isolated.

Usage: ``python benchmarks/onnx_node_tests.py [--ops Relu,Softmax | --all [--shard K/N]] [--fallback] [--batch 40]
[--json OUT] [--markdown] [--verbose]``; ``--from-json A.json B.json ... [--markdown]`` reports saved outcomes
(e.g. the shards of one run). Set ``DACE_default_build_folder`` to a folder of your own first.
"""

import argparse
import copy
import enum
import json
import multiprocessing
import re
import sys
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, astuple, dataclass, field, fields

import numpy as np
import onnx
from onnx.backend.test.case.node import collect_testcases
from onnx.backend.test.case.test_case import TestCase

from dcaccel.errors import DcaccelError, UnsupportedOpError
from dcaccel.frontend.onnx_import import as_imported, weights_as_arguments
from dcaccel.frontend.onnx_prepare import check_consistent, normalize

PARAMETER_INPUTS = {
    "ConstantOfShape": (0,),
    "Expand": (1,),
    "Pad": (1, 3),
    "Range": (0, 1, 2),
    "Resize": (1, 2, 3),
    "Split": (1,),
    "Upsample": (1,),
    "Reshape": (1,),
    "Slice": (1, 2, 3, 4),
    "Squeeze": (1,),
    "Unsqueeze": (1,),
    "ReduceMean": (1,),
    "ReduceSum": (1,),
    "ReduceMax": (1,),
    "ReduceMin": (1,),
    "ReduceL2": (1,),
    "CumSum": (1,),
    "TopK": (1,),
    "Tile": (1,),
    "ReduceL1": (1,),
    "ReduceLogSum": (1,),
    "ReduceLogSumExp": (1,),
    "ReduceSumSquare": (1,),
    "ReduceProd": (1,),
    "CenterCropPad": (1,),
    "BlackmanWindow": (0,),
    "HammingWindow": (0,),
    "HannWindow": (0,),
    "Trilu": (1,),
    "OneHot": (1,),
    "Col2Im": (1, 2),
    "AffineGrid": (1,),
    "MaxUnpool": (2,),
    "MelWeightMatrix": (0, 1, 2, 3, 4),
    "DFT": (1, 2),
    "STFT": (1, 3),
    "Loop": (0, 1),
    "Dropout": (1, 2),
    "CumProd": (1,),
    "Compress": (1,),
}
"""Input positions per op that the canonical implementations need as constants (shape parameters)."""


EXPANDED = "_expanded"
EXPANDED_LABEL = " (expanded)"
"""An ``_expanded`` case is the op's ONNX function body written out: its table row is the op's name with this
suffix, apart from the op's own cases, and is not an op type of the coverage measure (the op is not in its graph)."""


class Status(enum.StrEnum):
    """How a test case ended."""

    PASS = "pass"
    HOST = "host"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class CaseOutcome:
    """The result of one backend test case."""

    op: str
    case: str
    status: Status
    reason: str = ""


@dataclass(frozen=True)
class OpSummary:
    """Pass, host (fallback), fail and skip counts of the test cases of one op."""

    op: str
    cases: int
    passed: int
    host: int
    failed: int
    skipped: int


@dataclass
class PreparedCase:
    """A test case ready to run: its model (shape parameters bound, nodes named), inputs and expected outputs.

    ``implementation`` is the dcaccel implementation chosen for the nodes of the tested op;
    ``label`` names the case's op in the table (with the implementation when the op has several);
    ``fallbacks`` the fallback implementation of every op without a canonical one (set by :func:`dry_run`).
    """

    label: str
    case: TestCase
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    expected: list[np.ndarray]
    implementation: str
    refusal: DcaccelError | None = None
    """Why dcaccel's import refused the case's model (then ``model`` is the model as the case wrote it)."""
    opset: int = field(init=False)  # of the default domain (0: none)
    opsets: tuple[tuple[str, int], ...] = field(init=False)  # (domain, version) of every domain: cases merge if equal
    fallbacks: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        self.opset = max((o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")), default=0)
        self.opsets = tuple(sorted((o.domain, o.version) for o in self.model.opset_import))

    def choices(self, prefix: str = "") -> dict[str, str]:
        """The implementation of every node of the tested op, by node name (after ``prefix``)."""
        tested = primary_op(self.case)
        return {prefix + n.name: self.implementation for n in self.model.graph.node if n.op_type == tested}


def _normalized(name: str) -> str:
    return name.lower().replace("_", "")


_SCHEMA_NAMES = {_normalized(s.name): s.name for s in onnx.defs.get_all_schemas_with_history()}


_TEST_NAME_ABBREVIATIONS = {
    "nllloss": "NegativeLogLikelihoodLoss",
    "sce": "SoftmaxCrossEntropyLoss",
    "mvn": "MeanVarianceNormalization",
}
"""Test-name prefixes of ONNX's generator that abbreviate the op they test."""


def primary_op(case: TestCase) -> str:
    """The op a test case tests: its only op type, or (an ``_expanded`` graph) the op named by the test."""
    op_types = {node.op_type for node in case.model.graph.node}
    if len(op_types) == 1:
        return op_types.pop()
    prefix = case.name.removeprefix("test_").split("_")[0]
    if prefix in _TEST_NAME_ABBREVIATIONS:
        return _TEST_NAME_ABBREVIATIONS[prefix]
    key = _normalized(case.name.removeprefix("test_"))
    best = max((name for name in _SCHEMA_NAMES if key.startswith(name)), key=len, default=None)
    return _SCHEMA_NAMES[best] if best else "+".join(sorted(op_types))


TRAINING_DOMAIN = "ai.onnx.preview.training"
OPTIONAL_OPS = frozenset({"Optional", "OptionalGetElement", "OptionalHasElement"})
"""The ops of optional values (some of their cases take plain tensors): outside the measure as optional ops."""


def excluded(case: TestCase) -> str | None:
    """Why ``case`` is outside the coverage measure (a training op; a sequence, optional, map or string
    tensor in its graph), else None."""
    graph = case.model.graph
    if any(node.domain == TRAINING_DOMAIN for node in graph.node):
        return "training op"
    if any(node.op_type in OPTIONAL_OPS for node in graph.node):
        return "optional op"
    for value in (*graph.input, *graph.output, *graph.value_info):
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            return f"{kind} value '{value.name}'"
        if value.type.tensor_type.elem_type == onnx.TensorProto.STRING:
            return f"string tensor '{value.name}'"
    return None


def select_cases(ops: Iterable[str] | None) -> list[tuple[str, TestCase]]:
    """The backend node test cases that are not :func:`excluded` and whose primary op is in ``ops`` (None: any),
    with that op, in collection order."""
    selected = []
    with warnings.catch_warnings():  # onnx's generators overflow and divide by zero on purpose (their references)
        warnings.simplefilter("ignore", RuntimeWarning)
        collected = collect_testcases(None)
    for case in collected:
        op = primary_op(case)
        if (ops is None or op in ops) and excluded(case) is None:
            selected.append((op, case))
    return selected


def _as_array(value) -> np.ndarray:
    return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def prepare(label: str, case: TestCase, implementation: str = "canonical") -> PreparedCase:
    """Bind the shape parameters of ``case`` to its test inputs, name its nodes, and return it ready to run."""
    inputs, expected = case.data_sets[0]
    model = copy.deepcopy(case.model)
    graph = model.graph
    for index, node in enumerate(graph.node):
        node.name = node.name or f"node{index}"
    values = {value.name: _as_array(array) for value, array in zip(graph.input, inputs, strict=False)}
    # The inputs at a parameter position: of each node, and, in an _expanded graph (the function body of the tested
    # op, whose inputs are the graph's in the op's order), of the graph
    parameters = [
        node.input[k] for node in graph.node for k in PARAMETER_INPUTS.get(node.op_type, ()) if k < len(node.input)
    ]
    if EXPANDED in case.name:
        names = [value.name for value in graph.input]
        parameters += [names[k] for k in PARAMETER_INPUTS.get(primary_op(case), ()) if k < len(names)]
    bound = set()
    for name in dict.fromkeys(parameters):
        if name in values:
            graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(values[name]), name))
            bound.add(name)
    kept = [value for value in graph.input if value.name not in bound]
    del graph.input[:]
    graph.input.extend(kept)
    refusal = None
    try:
        model = imported_graph(model, case.name)
    except DcaccelError as error:
        refusal = error
    kept = {value.name for value in model.graph.input}
    feed = {name: array.copy() for name, array in values.items() if name not in bound and name in kept}
    return PreparedCase(label, case, model, feed, [_as_array(e) for e in expected], implementation, refusal)


def imported_graph(model: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """``model`` as ``dcaccel.load(..., fold=False)`` gives it to DaCe's importer: normalized (old opsets
    converted), checked, shape operands folded, every other computed subgraph kept as written."""
    model = normalize(model, source)
    check_consistent(model, source)
    return as_imported(model, source, fold=False)


def merge(cases: Sequence[PreparedCase]) -> tuple[onnx.ModelProto, dict[str, np.ndarray], dict[str, str]]:
    """One model running all ``cases`` side by side (same opset): tensors and nodes renamed per case.

    Returns the model, its inputs and the implementation chosen per node name.
    """
    graph = onnx.GraphProto(name="merged")
    feed, choices = {}, {}
    for k, prepared in enumerate(cases):
        prefix = f"case{k}_"

        def rename(name: str, prefix=prefix) -> str:
            return prefix + name if name else name

        source = prepared.model.graph
        for node in source.node:
            renamed = copy.deepcopy(node)
            renamed.name = prefix + node.name
            renamed.input[:] = [rename(n) for n in node.input]
            renamed.output[:] = [rename(n) for n in node.output]
            graph.node.append(renamed)
        for target, values in (
            (graph.input, source.input),
            (graph.output, source.output),
            (graph.value_info, source.value_info),
            (graph.initializer, source.initializer),
        ):
            for value in values:
                renamed = copy.deepcopy(value)
                renamed.name = rename(value.name)
                target.append(renamed)
        feed.update({rename(name): array for name, array in prepared.inputs.items()})
        choices.update(prepared.choices(prefix))
    first = cases[0].model
    model = onnx.helper.make_model(graph, opset_imports=first.opset_import, ir_version=first.ir_version)
    return model, feed, choices


def default_implementation(op: str) -> str:
    """The dcaccel implementation used for an op that is not the tested one: "canonical", else the first."""
    import dcaccel.expansions

    names = dcaccel.expansions.implementations(op)
    return "canonical" if "canonical" in names or not names else names[0]


def _host_calling_model():
    """DaCe's ONNXModel passing the callbacks of the program's host tasks (``dcaccel.transforms.host``) on a run."""
    from dace.ml import ONNXModel

    from dcaccel.transforms.host import host_callbacks

    class HostCallingModel(ONNXModel):
        def compile_and_init(self):
            program = super().compile_and_init()
            self.initialized_parameters.update(host_callbacks(program.sdfg.arglist()))
            return program

    return HostCallingModel


def _import_and_expand(name: str, model: onnx.ModelProto, choices: dict[str, str], fallback: bool = True):
    """Import ``model``, choose dcaccel's implementation of every ONNX node (``choices`` by node name) and expand.

    A node lowering would keep as an opaque task (:func:`dcaccel.transforms.lower.opaque_node`: its op has no
    dcaccel implementation, or the chosen one's check refuses it) is expanded by lowering's fallback
    (:func:`dcaccel.transforms.opaque.fallback_implementation`); without ``fallback`` it raises the refusal
    (:class:`UnsupportedOpError`) instead. Returns the imported model and, per op so expanded, its fallback
    implementation (and the refusal that sent it there).
    """
    from dace.libraries.onnx.nodes.onnx_op import ONNXOp

    import dcaccel.expansions
    from dcaccel.transforms.lower import opaque_node
    from dcaccel.transforms.opaque import expand_opaque, fallback_implementation

    imported = _host_calling_model()(name, model, onnx_simplify=False)
    weights_as_arguments(imported)
    fallbacks, unlowered = {}, []
    for node, state in imported.sdfg.all_nodes_recursive():
        if isinstance(node, ONNXOp):
            if dcaccel.expansions.implementations(node.schema.name):
                node.implementation = choices.get(node.label) or default_implementation(node.schema.name)
            opaque = opaque_node(node, state, {}, strict=not fallback)
            if opaque is not None:
                unlowered.append((node, state, opaque))
    for node, state, opaque in unlowered:
        implementation = fallback_implementation(node, state, refused=opaque.refused_by is not None)
        fallbacks[node.schema.name] = implementation if opaque.refused_by is None else f"{implementation}; {opaque.why}"
        expand_opaque(node, state, implementation)
    imported.sdfg.expand_library_nodes()
    return imported, fallbacks


def _unsupported_types(model: onnx.ModelProto) -> list[str]:
    from dace.libraries.onnx.converters import onnx_tensor_type_to_typeclass

    graph = model.graph
    types = {v.type.tensor_type.elem_type for v in (*graph.input, *graph.output, *graph.value_info)}
    types |= {t.data_type for t in graph.initializer}
    missing = []
    for elem_type in sorted(types):
        try:
            onnx_tensor_type_to_typeclass(elem_type)
        except (ValueError, KeyError, TypeError):
            missing.append(onnx.TensorProto.DataType.Name(elem_type))
    return missing


def dry_run(prepared: PreparedCase, supported: set[str], fallback: bool = False) -> CaseOutcome | None:
    """Import and expand one case without compiling; the outcome if it cannot run, else None (the fallbacks it
    needs recorded in ``prepared``). Without ``fallback``, a case with an op dcaccel does not lower is skipped."""
    name = prepared.case.name
    if isinstance(prepared.refusal, UnsupportedOpError):
        return CaseOutcome(prepared.label, name, Status.SKIP, str(prepared.refusal))
    if prepared.refusal is not None:
        return CaseOutcome(prepared.label, name, Status.FAIL, f"import: {_first_line(prepared.refusal)}")
    unsupported_ops = sorted({n.op_type for n in prepared.model.graph.node} - supported - {"Constant"})
    if unsupported_ops and not fallback:
        return CaseOutcome(
            prepared.label, name, Status.SKIP, f"uses ops without a canonical implementation: {unsupported_ops}"
        )
    if types := _unsupported_types(prepared.model):
        return CaseOutcome(prepared.label, name, Status.SKIP, f"tensor types DaCe cannot represent: {types}")
    try:
        _, prepared.fallbacks = _import_and_expand(f"dry_{name}", prepared.model, prepared.choices(), fallback)
    except UnsupportedOpError as error:
        return CaseOutcome(prepared.label, name, Status.SKIP, str(error))
    except Exception as error:  # noqa: BLE001 - every failure is reported with its reason
        return CaseOutcome(prepared.label, name, Status.FAIL, f"import/expand: {_first_line(error)}")
    return None


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:200]


def run_here(
    label: str, model: onnx.ModelProto, feed: dict[str, np.ndarray], choices: dict[str, str]
) -> tuple[list[np.ndarray] | None, str | None]:
    """Outputs of ``model`` compiled with the chosen implementations, or the error that stopped it."""
    from dcaccel.transforms.host import raising_host_failures

    try:
        imported, _ = _import_and_expand(label, model, choices)
        with raising_host_failures():  # a host task's failed onnxruntime call, not its unwritten outputs
            outputs = imported(**{name: array.copy() for name, array in feed.items()})
    except Exception as error:  # noqa: BLE001 - reported per case
        return None, _first_line(error)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return [np.asarray(o) for o in outputs], None


def _send_result(label: str, model: onnx.ModelProto, feed: dict, choices: dict, connection) -> None:
    connection.send(run_here(label, model, feed, choices))


def compile_and_run(
    label: str, model: onnx.ModelProto, feed: dict[str, np.ndarray], choices: dict[str, str], timeout: float
) -> tuple[list[np.ndarray] | None, str | None]:
    """:func:`run_here` in a forked process.

    A program that crashes (a signal) or hangs then fails its cases instead of ending the run.
    """
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_send_result, args=(label, model, feed, choices, sender))
    process.start()
    sender.close()
    try:
        result = receiver.recv() if receiver.poll(timeout) else (None, f"no result within {timeout:.0f} s")
    except EOFError:
        result = None, None
    process.join(5)
    if process.is_alive():
        process.kill()
        process.join()
    if result == (None, None):
        result = None, f"the process ended with exit code {process.exitcode}"
    return result


#: Ops whose outputs are random draws.
RANDOM_OPS = frozenset(
    {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
)


def draws_random(model: onnx.ModelProto) -> bool:
    """Whether ``model`` computes random values: a node of :data:`RANDOM_OPS`, or a ``Dropout`` in training mode
    (a constant ``training_mode`` true) with a ratio other than 0 (its mask is random)."""
    constants = {tensor.name: _as_array(tensor) for tensor in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type in RANDOM_OPS:
            return True
        inputs = [*node.input, "", ""]
        if node.op_type == "Dropout" and inputs[2] in constants and constants[inputs[2]].item():
            ratio = float(constants[inputs[1]].item()) if inputs[1] in constants else None  # None: data, or 0.5
            if ratio != 0:
                return True
    return False


def compare(prepared: PreparedCase, outputs: Sequence) -> CaseOutcome:
    """The outcome of one case from its outputs (graph output order) and its reference outputs."""
    name = prepared.case.name

    def differs(reason: str) -> CaseOutcome:
        if draws_random(prepared.model):
            return CaseOutcome(prepared.label, name, Status.SKIP, f"random values, no reference to verify: {reason}")
        return CaseOutcome(prepared.label, name, Status.FAIL, reason)

    for index, (actual, expected) in enumerate(zip(outputs, prepared.expected, strict=True)):
        actual = np.asarray(actual)
        if actual.shape != expected.shape:
            return differs(f"output {index}: shape {actual.shape} != {expected.shape}")
        if expected.dtype.kind in "fc":
            deviation = np.abs(actual.astype(np.complex128) - expected) if actual.size else np.zeros(0)
            if not np.allclose(actual, expected, rtol=prepared.case.rtol, atol=prepared.case.atol, equal_nan=True):
                worst = float(np.nanmax(deviation)) if deviation.size else 0.0
                return differs(f"output {index}: max abs deviation {worst:.3g}")
        elif not np.array_equal(actual, expected.astype(actual.dtype) if expected.dtype != object else expected):
            return differs(f"output {index}: values differ")
    if prepared.fallbacks:
        through = ", ".join(f"{op} ({implementation})" for op, implementation in sorted(prepared.fallbacks.items()))
        return CaseOutcome(prepared.label, name, Status.HOST, f"fallback: {through}")
    tested = primary_op(prepared.case)
    if EXPANDED not in name and tested not in {node.op_type for node in prepared.model.graph.node}:
        lowered_as = "+".join(sorted({node.op_type for node in prepared.model.graph.node})) or "no operator"
        return CaseOutcome(prepared.label, name, Status.PASS, f"lowered as {lowered_as}")
    return CaseOutcome(prepared.label, name, Status.PASS)


class Runner:
    """Runs prepared cases in merged batches and counts the compiles.

    With ``isolate``, every batch runs in a forked process (see :func:`compile_and_run`). A process
    that has already run OpenMP code (e.g. a test session) must not fork: it runs batches itself.
    """

    def __init__(
        self, batch: int, verbose: bool = False, timeout: float = 900, isolate: bool = True, fallback: bool = False
    ):
        self.batch = batch
        self.fallback = fallback
        self.verbose = verbose
        self.timeout = timeout
        self.isolate = isolate
        self.compiles = 0

    def run_batch(self, cases: Sequence[PreparedCase]) -> list[CaseOutcome]:
        """Compile and run ``cases`` as one merged model; split the batch in halves if that fails."""
        model, feed, choices = merge(cases)
        label = f"onnx_node_{cases[0].opset}_{self.compiles}"
        self.compiles += 1
        if self.isolate:
            outputs, error = compile_and_run(label, model, feed, choices, self.timeout)
        else:
            outputs, error = run_here(label, model, feed, choices)
        if error is not None:
            if len(cases) == 1:
                return [CaseOutcome(cases[0].label, cases[0].case.name, Status.FAIL, f"compile/run: {error}")]
            half = len(cases) // 2
            return self.run_batch(cases[:half]) + self.run_batch(cases[half:])
        outcomes, start = [], 0
        for prepared in cases:
            count = len(prepared.model.graph.output)
            outcomes.append(compare(prepared, outputs[start : start + count]))
            start += count
        if self.verbose:
            print(f"  batch {label}: {len(cases)} cases", file=sys.stderr)
        return outcomes

    def run(self, selected: Sequence[tuple[str, TestCase]], supported: set[str]) -> list[CaseOutcome]:
        """Outcomes of all ``selected`` cases: dry runs first, then batched compiles per opset."""
        import dcaccel.expansions

        dcaccel.expansions.register()
        outcomes, runnable = [], defaultdict(list)
        for op, case in selected:
            implementations = dcaccel.expansions.implementations(op) or ["canonical"]  # (none: the fallback's)
            for implementation in implementations:
                label = op if implementations == ["canonical"] else f"{op}[{implementation}]"
                if EXPANDED in case.name:
                    label += EXPANDED_LABEL
                prepared = prepare(label, case, implementation)
                outcome = dry_run(prepared, supported, self.fallback)
                if outcome is None:
                    runnable[prepared.opsets].append(prepared)
                else:
                    outcomes.append(outcome)
        for opsets in sorted(runnable):
            group = runnable[opsets]
            for start in range(0, len(group), self.batch):
                outcomes.extend(self.run_batch(group[start : start + self.batch]))
        return outcomes


def summarize(outcomes: Iterable[CaseOutcome]) -> list[OpSummary]:
    """Counts per op, ops in alphabetical order."""
    counts = defaultdict(Counter)
    for outcome in outcomes:
        counts[outcome.op][outcome.status] += 1
    return [
        OpSummary(op, sum(c.values()), c[Status.PASS], c[Status.HOST], c[Status.FAIL], c[Status.SKIP])
        for op, c in sorted(counts.items())
    ]


class OpClass(enum.StrEnum):
    """How an op type's cases ended, as the coverage measure counts it."""

    CANONICAL = "canonical"
    CANONICAL_SOME_FAIL = "canonical, some cases fail"
    HOST = "host fallback"
    HOST_SOME_FAIL = "host fallback, some cases fail"
    FAILS = "fails"
    REFUSED = "refused in one line"


def op_class(summary: OpSummary) -> OpClass:
    """The class of an op from its counts: canonical when a case passed with every op lowered canonically."""
    if summary.passed:
        return OpClass.CANONICAL_SOME_FAIL if summary.failed else OpClass.CANONICAL
    if summary.host:
        return OpClass.HOST_SOME_FAIL if summary.failed else OpClass.HOST
    return OpClass.FAILS if summary.failed else OpClass.REFUSED


def op_type(label: str) -> str | None:
    """The op type a table row counts for (``Conv[mv]`` is ``Conv``), None for an ``_expanded`` row."""
    return None if label.endswith(EXPANDED_LABEL) else label.split("[")[0]


@dataclass(frozen=True)
class OpRow:
    """One op's line of the per-op table: counts, class and the first reason that is not a plain pass."""

    op: str
    cases: int
    passed: int
    host: int
    failed: int
    skipped: int
    op_class: OpClass
    first_failure_refusal_or_route: str


def op_rows(outcomes: Sequence[CaseOutcome]) -> list[OpRow]:
    """The per-op table: an op type's implementations merged into one row, its ``_expanded`` cases in their own."""
    by_row = defaultdict(list)
    for outcome in outcomes:
        by_row[op_type(outcome.op) or outcome.op].append(outcome)
    rows = []
    for label, group in sorted(by_row.items()):
        summary = summarize(CaseOutcome(label, o.case, o.status, o.reason) for o in group)[0]
        rows.append(OpRow(*astuple(summary), op_class(summary), _first_reason(group)))
    return rows


def _first_reason(outcomes: Sequence[CaseOutcome]) -> str:
    """The first failure (else refusal, else fallback or other route) of ``outcomes``, with how many more."""
    for status in (Status.FAIL, Status.SKIP, Status.HOST, Status.PASS):
        reasons = [o for o in outcomes if o.status is status and o.reason]
        if reasons:
            more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
            return f"{status.value}: {reasons[0].case}: {reasons[0].reason}{more}"[:240]
    return ""


@dataclass(frozen=True)
class ClassCount:
    """How many op types of the measure are in one class."""

    op_class: OpClass
    op_types: int
    share: str


def class_counts(rows: Sequence[OpRow]) -> list[ClassCount]:
    """Op types per class (``_expanded`` rows are not op types)."""
    counted = Counter(row.op_class for row in rows if op_type(row.op) is not None)
    total = sum(counted.values())
    return [ClassCount(c, counted[c], f"{counted[c] / total:.0%}" if total else "-") for c in OpClass]


def markdown_table(rows: Sequence) -> str:
    """A markdown table of dataclass rows (header from the dataclass fields)."""
    header = [f.name for f in fields(rows[0])]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [str(v.value if isinstance(v, enum.Enum) else v).replace("|", "\\|") for v in astuple(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_outcomes(path: str, outcomes: Sequence[CaseOutcome]) -> None:
    """Save ``outcomes`` as JSON (a list of objects with the fields of :class:`CaseOutcome`)."""
    with open(path, "w") as file:
        json.dump([{**asdict(o), "status": o.status.value} for o in outcomes], file, indent=0)


def read_outcomes(path: str) -> list[CaseOutcome]:
    """Outcomes saved by :func:`write_outcomes` (each field checked)."""
    with open(path) as file:
        records = json.load(file)
    if not isinstance(records, list):
        raise ValueError(f"{path}: not a list of case outcomes")
    outcomes = []
    for index, record in enumerate(records):
        if not isinstance(record, dict) or set(record) != {f.name for f in fields(CaseOutcome)}:
            raise ValueError(f"{path}: record {index} does not have the fields of a case outcome")
        if not all(isinstance(value, str) for value in record.values()):
            raise ValueError(f"{path}: record {index} has a field that is not text")
        outcomes.append(CaseOutcome(record["op"], record["case"], Status(record["status"]), record["reason"]))
    return outcomes


def format_table(rows: Sequence, header: Sequence[str] | None = None) -> str:
    """A plain-text table of dataclass rows (header from the dataclass fields)."""
    header = list(header or [f.name for f in fields(rows[0])])
    cells = [header] + [[str(v.value if isinstance(v, enum.Enum) else v) for v in astuple(row)] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the cases (or read saved outcomes), print the per-op table and every case that did not pass plainly;
    exit 1 if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--ops", help="comma-separated ops (default: every op with a canonical implementation)")
    chosen.add_argument("--all", action="store_true", help="every op of the backend tests (see excluded())")
    chosen.add_argument(
        "--from-json",
        nargs="+",
        metavar="FILE",
        help="report outcomes saved with --json instead (a later file's outcome of a case wins)",
    )
    parser.add_argument("--shard", help="K/N: run only the K-th of N shares of the selected ops (alphabetical)")
    parser.add_argument("--fallback", action="store_true", help="run ops without a canonical implementation too")
    parser.add_argument("--batch", type=int, default=40, help="cases per compiled SDFG (default 40)")
    parser.add_argument("--json", metavar="FILE", help="save every case's outcome to FILE")
    parser.add_argument("--markdown", action="store_true", help="print the tables as markdown (docs/models.md)")
    parser.add_argument("--verbose", action="store_true", help="report every compiled batch on stderr")
    args = parser.parse_args(argv)
    if args.shard and not (
        re.fullmatch(r"(\d+)/(\d+)", args.shard) and 1 <= int(args.shard.split("/")[0]) <= int(args.shard.split("/")[1])
    ):
        parser.error(f"--shard {args.shard}: give K/N with 1 <= K <= N")

    began = time.perf_counter()
    if args.from_json:
        latest = {(o.op, o.case): o for path in args.from_json for o in read_outcomes(path)}  # a later file wins
        outcomes = list(latest.values())
    else:
        outcomes = _run(args)
    if args.json:
        write_outcomes(args.json, outcomes)
    rows = op_rows(outcomes)
    total = OpSummary("total", *(sum(getattr(r, f.name) for r in rows) for f in fields(OpSummary)[1:]))
    classes = class_counts(rows)
    show = markdown_table if args.markdown else format_table
    print(show(rows))
    print()
    print(show([total]))
    print()
    print(show(classes))
    problems = sorted((o for o in outcomes if o.reason), key=lambda o: (o.op, o.status, o.case))
    if problems and not args.markdown:
        print()
        print(format_table(problems))
    print(f"\n{len(outcomes)} cases, {time.perf_counter() - began:.0f} s")
    return 1 if total.failed else 0


def _run(args: argparse.Namespace) -> list[CaseOutcome]:
    """The outcomes of the cases ``args`` select."""
    import dcaccel.expansions

    supported = set(dcaccel.expansions.supported_ops())
    ops = None if args.all else args.ops.split(",") if args.ops else sorted(supported)
    selected = select_cases(ops)
    if args.shard:
        k, n = (int(part) for part in args.shard.split("/"))
        names = sorted({op for op, _ in selected})
        share = set(names[k - 1 :: n])
        selected = [(op, case) for op, case in selected if op in share]
    runner = Runner(args.batch, args.verbose, fallback=args.fallback)
    outcomes = runner.run(selected, supported)
    print(f"{runner.compiles} compiled SDFGs", file=sys.stderr)
    return outcomes


if __name__ == "__main__":
    sys.exit(main())
