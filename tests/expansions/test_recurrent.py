"""Canonical LSTM, GRU and RNN (dcaccel/expansions/recurrent.py): values against onnxruntime (one compile for
every case, each case under one of the MMM shapes), over directions, initial states, biases, peepholes, clip,
input_forget, linear_before_reset, activations with their alpha and beta, a constant sequence_lens and the optional
outputs; the task DAG of a cell (the gate products are MMM tasks of the chosen shape, one gate task per step);
refusals in one line naming the node and attribute.
"""

import numpy as np
import pytest

from dcaccel.errors import UnsupportedOpError
from tests.expansions.canonical_onnx import OpCase, build_model, random_feed, run_canonical, run_reference

STEPS, BATCH, INPUTS, HIDDEN = 3, 2, 4, 5
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
BIAS_INITIAL = ["x", "w", "r", "b", "", "h0"]


def _cell(name, op, node_inputs, outputs, directions=1, steps=STEPS, seed=0, **attributes) -> OpCase:
    """A case of ``op`` on a random ``x`` of steps × batch × inputs; weights, biases, initial states and
    peepholes (those in ``node_inputs``) drawn from ``seed``, scaled by 1/2 to keep the gates off saturation."""
    rng = np.random.default_rng(seed)
    gates = GATES[op] * HIDDEN
    shapes = {
        "w": (directions, gates, INPUTS),
        "r": (directions, gates, HIDDEN),
        "b": (directions, 2 * gates),
        "h0": (directions, BATCH, HIDDEN),
        "c0": (directions, BATCH, HIDDEN),
        "p": (directions, 3 * HIDDEN),
    }
    constants = {n: (rng.standard_normal(shapes[n]) / 2).astype(np.float32) for n in node_inputs if n in shapes}
    if "lens" in node_inputs:
        constants["lens"] = np.full(BATCH, steps, np.int32)
    attributes = {"hidden_size": HIDDEN, **attributes}
    if directions == 2:
        attributes["direction"] = "bidirectional"
    return OpCase(name, op, node_inputs, {"x": (steps, BATCH, INPUTS)}, constants, attributes, outputs)


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
ALL = [case for cases in CASES.values() for case in cases]
SHAPE = {case.name: shape for shape, cases in CASES.items() for case in cases}


@pytest.fixture(scope="module")
def results():
    """Outputs of every case from onnxruntime and from the canonical lowerings (one compile)."""
    model = build_model(ALL)
    feed = random_feed(ALL)
    return run_reference(model, feed), run_canonical(model, feed, "test_recurrent", SHAPE)


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

    sdfg = ONNXModel("recurrent_cases", build_model(ALL), onnx_simplify=False).sdfg
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
    "batch_first": (_cell("batch_first", "LSTM", ["x", "w", "r"], ("y",), layout=1), "layout=1 (batch first)"),
    "softsign": (
        _cell("softsign", "RNN", ["x", "w", "r"], ("y",), activations=["Softsign"]),
        "activations: 'Softsign' (one of HardSigmoid, LeakyRelu, Relu, Sigmoid, Softplus, Tanh)",
    ),
    "lens_data": (
        OpCase(
            "lens_data",
            "GRU",
            ["x", "w", "r", "", "lens"],
            {"x": (STEPS, BATCH, INPUTS), "lens": (BATCH,)},
            {
                "w": np.zeros((1, 3 * HIDDEN, INPUTS), np.float32),
                "r": np.zeros((1, 3 * HIDDEN, HIDDEN), np.float32),
            },
            {"hidden_size": HIDDEN},
            ("y",),
        ),
        "sequence_lens other than a constant 3 (the sequence length)",
    ),
}


@pytest.fixture(scope="module")
def refused_model():
    from dace.ml import ONNXModel

    cases = [case for case, _ in REFUSED.values()]
    model = build_model(cases)
    for graph_input in model.graph.input:  # sequence_lens is int32 data
        if graph_input.name == "lens_data__lens":
            graph_input.type.tensor_type.elem_type = 6
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
