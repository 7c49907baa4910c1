"""Canonical LSTM, GRU and RNN (dcaccel/expansions/recurrent.py): values against onnxruntime (one compile for
every case, each case under one of the MMM shapes), over directions, initial states, biases, peepholes, clip,
input_forget, linear_before_reset, activations with their alpha and beta, sequence_lens (constant, or data; shorter
sequences in forward, reverse and bidirectional cells, one of length 0), layout 1 (batch first; onnxruntime
computes its time-major twin), float64 (against ONNX's reference evaluator) and the optional outputs; the task DAG
of a cell (the gate products are MMM tasks of the chosen shape, one gate task per step); refusals in one line
naming the node and attribute.
"""

import numpy as np
import onnx
import pytest

from dcaccel.errors import UnsupportedOpError
from tests.expansions.canonical_onnx import OpCase, build_model, random_feed, run_canonical, run_reference

STEPS, BATCH, INPUTS, HIDDEN = 3, 2, 4, 5
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
BIAS_INITIAL = ["x", "w", "r", "b", "", "h0"]


def _cell(
    name, op, node_inputs, outputs, directions=1, steps=STEPS, seed=0, lengths=None, dtype=np.float32, **attributes
) -> OpCase:
    """A case of ``op`` on a random ``x`` of steps × batch × inputs (batch × steps × inputs with ``layout`` 1) of
    ``dtype``; weights, biases, initial states and peepholes (those in ``node_inputs``) drawn from ``seed``, scaled by
    1/2 to keep the gates off saturation; a constant ``lens`` of ``lengths`` (default: every sequence ``steps``
    long)."""
    rng = np.random.default_rng(seed)
    gates = GATES[op] * HIDDEN
    state = (BATCH, directions, HIDDEN) if attributes.get("layout") else (directions, BATCH, HIDDEN)
    shapes = {
        "w": (directions, gates, INPUTS),
        "r": (directions, gates, HIDDEN),
        "b": (directions, 2 * gates),
        "h0": state,
        "c0": state,
        "p": (directions, 3 * HIDDEN),
    }
    constants = {n: (rng.standard_normal(shapes[n]) / 2).astype(dtype) for n in node_inputs if n in shapes}
    if "lens" in node_inputs:
        constants["lens"] = np.asarray(lengths or [steps] * BATCH, np.int32)
    attributes = {"hidden_size": HIDDEN, **attributes}
    if directions == 2:
        attributes["direction"] = "bidirectional"
    x = (BATCH, steps, INPUTS) if attributes.get("layout") else (steps, BATCH, INPUTS)
    return OpCase(name, op, node_inputs, {"x": x}, constants, attributes, outputs, dtype)


def _time_major(case: OpCase) -> OpCase:
    """The layout-0 twin of a batch-first ``case`` (X and the initial states transposed), named ``<name>_tm``:
    onnxruntime has no batch-first recurrent kernels, so it computes the twin and the tests transpose its outputs."""
    swapped = {n: np.swapaxes(v, 0, 1) if n in ("h0", "c0") else v for n, v in case.constants.items()}
    inputs = {n: (shape[1], shape[0], *shape[2:]) for n, shape in case.inputs.items()}
    attributes = {k: v for k, v in case.attributes.items() if k != "layout"}
    return OpCase(
        f"{case.name}_tm", case.op_type, case.node_inputs, inputs, swapped, attributes, case.outputs, case.dtype
    )


BATCH_FIRST = {"y": (2, 0, 1, 3), "yh": (1, 0, 2), "yc": (1, 0, 2)}
"""Per output, the axes of the time-major output in the order of the batch-first one."""


LSTM_OUTPUTS = ("y", "yh", "yc")
CASES = {
    "mv": [
        _cell("lstm_default", "LSTM", ["x", "w", "r", "b"], LSTM_OUTPUTS),
        _cell("gru_default", "GRU", ["x", "w", "r", "b"], ("y", "yh")),
        _cell("rnn_no_bias", "RNN", ["x", "w", "r"], ("y", "yh")),
        _cell("lstm_lens_input_forget", "LSTM", ["x", "w", "r", "b", "lens"], LSTM_OUTPUTS, input_forget=1),
        _cell("rnn_one_step", "RNN", ["x", "w", "r", "b"], ("y", "yh"), steps=1),
    ],
    "op": [
        _cell("lstm_bidirectional", "LSTM", [*BIAS_INITIAL, "c0"], LSTM_OUTPUTS, directions=2, seed=1),
        _cell("gru_linear_before_reset", "GRU", BIAS_INITIAL, ("y", "yh"), directions=2, linear_before_reset=1),
        _cell("rnn_relu_bidirectional", "RNN", BIAS_INITIAL, ("y", "yh"), directions=2, activations=["Relu", "Tanh"]),
    ],
    "lmv": [
        _cell(
            "lstm_reverse_peephole_clip",
            "LSTM",
            [*BIAS_INITIAL, "c0", "p"],
            LSTM_OUTPUTS,
            direction="reverse",
            clip=0.7,
        ),
        _cell("lstm_peephole_no_state", "LSTM", ["x", "w", "r", "b", "", "", "", "p"], ("", "yh", "yc")),
        _cell(
            "lstm_activations",
            "LSTM",
            ["x", "w", "r", "b"],
            ("", "", "yc"),
            activations=["HardSigmoid", "LeakyRelu", "Softplus"],
            activation_alpha=[0.3, 0.05],
            activation_beta=[0.4],
        ),
        _cell("gru_reverse_clip_no_bias", "GRU", ["x", "w", "r", "", "", "h0"], ("y",), direction="reverse", clip=0.5),
        _cell("gru_linear_before_reset_no_state", "GRU", ["x", "w", "r", "b"], ("", "yh"), linear_before_reset=1),
    ],
}
CASES["mv"] += [
    _cell("rnn_double", "RNN", BIAS_INITIAL, ("y", "yh"), dtype=np.float64),
    _cell("lstm_batch_first", "LSTM", [*BIAS_INITIAL, "c0", "p"], LSTM_OUTPUTS, directions=2, layout=1),
    _cell("lstm_short", "LSTM", ["x", "w", "r", "b", "lens", "h0", "c0", "p"], LSTM_OUTPUTS, lengths=[3, 1]),
    _cell("rnn_short_batch_first", "RNN", ["x", "w", "r", "", "lens"], ("y", "yh"), lengths=[2, 3], layout=1),
]
CASES["op"] += [
    _cell("lstm_double", "LSTM", [*BIAS_INITIAL, "c0", "p"], LSTM_OUTPUTS, directions=2, dtype=np.float64),
    _cell("gru_batch_first", "GRU", BIAS_INITIAL, ("y", "yh"), direction="reverse", layout=1, seed=2),
    _cell(
        "lstm_short_reverse", "LSTM", ["x", "w", "r", "b", "lens"], LSTM_OUTPUTS, direction="reverse", lengths=[2, 3]
    ),
    # a sequence of length 0: Y_h and Y_c are zeros, not the initial states (onnxruntime)
    _cell("lstm_empty_sequence", "LSTM", ["x", "w", "r", "b", "lens", "h0", "c0"], LSTM_OUTPUTS, 2, lengths=[0, 2]),
]
CASES["lmv"] += [
    _cell("gru_double", "GRU", BIAS_INITIAL, ("y", "yh"), dtype=np.float64, seed=5),
    _cell("rnn_batch_first_no_state", "RNN", ["x", "w", "r", "b"], ("y", "yh"), layout=1, seed=3),
    _cell("gru_short_bidirectional", "GRU", ["x", "w", "r", "b", "lens", "h0"], ("y", "yh"), 2, lengths=[1, 2], seed=4),
    _cell("gru_empty_sequence", "GRU", ["x", "w", "r", "b", "lens", "h0"], ("y", "yh"), lengths=[0, 3], seed=6),
]


def _lengths_as_data(case: OpCase) -> OpCase:
    """``case`` with its ``lens`` a graph input (int32 data, as ONNX's test_lstm_with_peepholes passes it) instead of
    a constant; the model's input type and the feed are set by :func:`_model_and_feed`."""
    constants = {n: v for n, v in case.constants.items() if n != "lens"}
    inputs = {**case.inputs, "lens": case.constants["lens"].shape}
    name = f"{case.name}_data"
    return OpCase(name, case.op_type, case.node_inputs, inputs, constants, case.attributes, case.outputs, case.dtype)


DATA_LENGTHS = {_lengths_as_data(c).name: c.constants["lens"] for c in CASES["mv"] if c.name == "lstm_short"}
CASES["mv"] += [_lengths_as_data(c) for c in CASES["mv"] if c.name == "lstm_short"]
ALL = [case for cases in CASES.values() for case in cases]
SHAPE = {case.name: shape for shape, cases in CASES.items() for case in cases}


def _model_and_feed(cases: list[OpCase]):
    """The model of ``cases`` and its random feed, with the lengths of :data:`DATA_LENGTHS` int32 data."""
    model = build_model(cases)
    feed = random_feed(cases)
    for graph_input in model.graph.input:
        case, _, name = graph_input.name.partition("__")
        if case in DATA_LENGTHS and name == "lens":
            graph_input.type.tensor_type.elem_type = onnx.TensorProto.INT32
            feed[graph_input.name] = DATA_LENGTHS[case]
    return model, feed


def _evaluate(model: onnx.ModelProto, feed: dict) -> dict:
    """The outputs of ``model`` from ONNX's reference evaluator (onnxruntime's recurrent kernels are float only)."""
    from onnx.reference import ReferenceEvaluator

    names = [o.name for o in model.graph.output]
    inputs = {i.name: feed[i.name] for i in model.graph.input}
    return dict(zip(names, ReferenceEvaluator(model).run(names, inputs), strict=True))


@pytest.fixture(scope="module")
def results():
    """Outputs of every case from the canonical lowerings (one compile) and from onnxruntime, which computes the
    time-major twin of a batch-first case (:func:`_time_major`, outputs transposed back); float64 cases from ONNX's
    reference evaluator."""
    model, feed = _model_and_feed(ALL)
    canonical = run_canonical(model, feed, "test_recurrent", SHAPE)
    twins = [_time_major(c) if c.attributes.get("layout") else c for c in ALL]
    twin_feed = {}
    for case, twin in zip(ALL, twins, strict=True):
        for name in case.inputs:
            value = feed[case.tensor(name)]
            twin_feed[twin.tensor(name)] = np.swapaxes(value, 0, 1) if twin is not case and name == "x" else value
    single = _model_and_feed([twin for twin in twins if twin.dtype != np.float64])[0]
    computed = run_reference(single, {i.name: twin_feed[i.name] for i in single.graph.input})
    computed |= _evaluate(_model_and_feed([twin for twin in twins if twin.dtype == np.float64])[0], twin_feed)
    reference = {}
    for case, twin in zip(ALL, twins, strict=True):
        for output in filter(None, case.outputs):
            value = computed[twin.tensor(output)]
            reference[case.tensor(output)] = value if twin is case else np.transpose(value, BATCH_FIRST[output])
    return reference, canonical


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "output"),
    [(c, o) for c in ALL for o in c.outputs if o],
    ids=lambda v: v.name if isinstance(v, OpCase) else v,
)
def test_matches_onnxruntime(case, output, results):
    reference, canonical = results
    name = case.tensor(output)
    assert canonical[name].shape == reference[name].shape
    np.testing.assert_allclose(canonical[name], reference[name], rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def lstm_dags():
    """The task DAG of ``lstm_default`` lowered under each MMM shape (nothing compiled)."""
    from dace.ml import ONNXModel

    from dcaccel.dag import extract
    from dcaccel.transforms.lower import lower

    case = CASES["mv"][0]
    sdfg = ONNXModel("recurrent_dag", build_model([case]), onnx_simplify=False).sdfg
    return {shape: extract(lower(sdfg, {"LSTM": shape})) for shape in ("mv", "op", "lmv")}


@pytest.fixture(scope="module")
def case_dags():
    """The task DAG of every case lowered under its MMM shape (nothing compiled), by case name."""
    from dace.ml import ONNXModel

    from dcaccel.dag import extract
    from dcaccel.transforms.lower import lower

    sdfg = ONNXModel("recurrent_cases", _model_and_feed(ALL)[0], onnx_simplify=False).sdfg
    dag = extract(lower(sdfg, SHAPE))
    return dict.fromkeys(SHAPE, dag)


@pytest.mark.slow
@pytest.mark.parametrize("case", ALL, ids=lambda c: c.name)
def test_every_case_extracts_a_valid_dag_of_mmm_and_gate_tasks(case, case_dags):
    """Every task of the case comes from its lowering under its shape: MMM tasks and gate tasks, none opaque;
    the DAG meets the contract (equal in-volumes into every task: each gate task reads one element of each
    input per iteration)."""
    dag = case_dags[case.name]
    dag.validate()
    ours = [t for t in dag.tasks if dag.info(t).node == case.name]
    assert {dag.info(t).implementation for t in ours} == {SHAPE[case.name]}
    assert not any(dag.info(t).opaque for t in ours)
    assert any(dag.info(t).map.startswith(f"{case.name}_input_d0") for t in ours)


STEP_TASKS = ["cell", "gate_c", "gate_i", "gate_o", "state"]
"""The element-wise tasks of an LSTM step without a previous cell state; with one, also ``gate_f``."""


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["mv", "op", "lmv"])
def test_gate_products_are_mmm_tasks_of_the_shape(shape, lstm_dags):
    """lstm_default, 3 steps of a batch of 2, 4 inputs, 5 hidden units (4 gates: 20 gate columns): the summed
    biases and the two transposes once; the input product of the 3 steps one batched MMM (seq 3 × [2 × 4] ·
    [4 × 20]), the hidden product one MMM per step after the first ([2 × 5] · [5 × 20]: H is zero at the first
    step), and the element-wise tasks of each step (``gate_f`` from the second step, when there is a cell state
    to forget); no opaque task. Tasks per product: mv one per column of C (20), lmv one per row (2), op one per
    inner index (4, 5)."""
    from dcaccel.dag.metrics import opaque_work

    dag = lstm_dags[shape]
    assert opaque_work(dag)[0] == 0
    ours = [t for t in dag.tasks if dag.info(t).node == "lstm_default"]
    assert {dag.info(t).implementation for t in ours} == {shape}
    prefix = "lstm_default_"  # the MMM shapes' own single tasks (mv's BcastA, op's Reduce...) have none
    maps = [dag.info(t).map.removeprefix(prefix).removesuffix("_map") for t in ours if prefix in dag.label(t)]
    elementwise = [f"{task}_d0_t{t}" for t in range(STEPS) for task in STEP_TASKS + ["gate_f"] * (t > 0)]
    assert sorted(m for m in set(maps) if not m.startswith(("input", "hidden"))) == sorted(
        ["TransR", "TransW", "bias_d0", *elementwise]
    )
    per_product = {"mv": GATES["LSTM"] * HIDDEN, "lmv": BATCH}
    products = {p: maps.count(p) for p in ("input_d0", "hidden_d0_t0", "hidden_d0_t1", "hidden_d0_t2")}
    assert products == {
        "input_d0": STEPS * per_product.get(shape, INPUTS),
        "hidden_d0_t0": 0,
        "hidden_d0_t1": per_product.get(shape, HIDDEN),
        "hidden_d0_t2": per_product.get(shape, HIDDEN),
    }


REFUSED = {
    "softsign": (
        _cell("softsign", "RNN", ["x", "w", "r"], ("y",), activations=["Softsign"]),
        "activations: 'Softsign' (one of HardSigmoid, LeakyRelu, Relu, Sigmoid, Softplus, Tanh)",
    ),
    "double_lstm": (
        OpCase(
            "double_lstm",
            "LSTM",
            ["x", "w", "r"],
            {"x": (STEPS, BATCH, INPUTS), "w": (1, 4 * HIDDEN, INPUTS), "r": (1, 4 * HIDDEN, HIDDEN)},
            attributes={"hidden_size": HIDDEN},
            outputs=("y",),
            dtype=np.int32,
        ),
        "element types int (one floating-point type)",
    ),
}


@pytest.fixture(scope="module")
def refused_model():
    from dace.ml import ONNXModel

    cases = [case for case, _ in REFUSED.values()]
    model = build_model(cases)
    return ONNXModel("recurrent_refused", model, onnx_simplify=False).sdfg


@pytest.mark.slow
@pytest.mark.parametrize("name", REFUSED)
def test_refused_in_one_line(name, refused_model):
    from dcaccel.expansions.registry import implementation_of

    ((node, state),) = [(n, s) for n, s in refused_model.all_nodes_recursive() if n.label == name]
    with pytest.raises(UnsupportedOpError) as refusal:
        implementation_of(node, "mv").expansion.check(node, state, refused_model)
    op = REFUSED[name][0].op_type
    assert str(refusal.value) == f"unsupported op {op} (node '{name}'): {REFUSED[name][1]}"


def test_activation_parameters_are_taken_in_order_by_the_activations_that_use_them():
    """Bidirectional LSTM, activations given once for both directions: alpha and beta go to HardSigmoid and
    LeakyRelu in order (onnxruntime's rule), the defaults where the lists run out (LeakyRelu 0.01)."""
    from types import SimpleNamespace

    from dcaccel.expansions.recurrent import CELLS, Activation, _activations

    node = SimpleNamespace(
        activations=["HardSigmoid", "LeakyRelu", "Tanh"], activation_alpha=[0.3, 0.05, 0.2], activation_beta=[0.4]
    )
    forward, reverse = _activations(node, CELLS["LSTM"], 2)
    assert forward == (Activation("HardSigmoid", 0.3, 0.4), Activation("LeakyRelu", 0.05), Activation("Tanh"))
    assert reverse == (Activation("HardSigmoid", 0.2, 0.5), Activation("LeakyRelu", 0.01), Activation("Tanh"))
