"""ONNX backend node test cases through the canonical implementations (a representative subset).

The full run is ``benchmarks/onnx_node_tests.py``; these tests use its runner on a few cases per
op (compiled in as few merged SDFGs as the cases' opsets allow) and check its case handling.
"""

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "onnx_node_tests.py"

REPRESENTATIVE = (
    "test_relu",
    "test_add_bcast",
    "test_sub_bcast",
    "test_mul_bcast",
    "test_div_bcast",
    "test_pow_bcast_array",
    "test_sigmoid",
    "test_tanh",
    "test_exp",
    "test_sqrt",
    "test_erf",
    "test_neg",
    "test_reciprocal",
    "test_identity",
    "test_clip_default_inbounds",
    "test_gelu_tanh_2",
    "test_softmax_axis_0",
    "test_softmax_large_number",
    "test_maxpool_2d_pads",
    "test_maxpool_2d_ceil",
    "test_maxpool_2d_dilations",
    "test_averagepool_2d_pads_count_include_pad",
    "test_averagepool_2d_same_lower",
    "test_globalaveragepool_precomputed",
    "test_batchnorm_epsilon",
    "test_layer_normalization_4d_axis1",
    "test_layer_normalization_2d_axis0_expanded",
    "test_reshape_reordered_all_dims",
    "test_flatten_axis2",
    "test_squeeze",
    "test_unsqueeze_two_axes",
    "test_transpose_all_permutations_3",
    "test_concat_3d_axis_negative_1",
    "test_slice_negative_axes",
    "test_gather_1",
    "test_shape_start_1_end_negative_1",
    "test_reduce_mean_keepdims_example",
    "test_cast_FLOAT_to_DOUBLE",
    "test_castlike_FLOAT_to_DOUBLE_expanded",
    "test_where_example",
    "test_sum_two_inputs",
    "test_max_example",
    "test_less_bcast",
    "test_size_example",
    "test_constantofshape_float_ones",
)


@pytest.fixture(scope="module")
def runner_module():
    """The benchmark script, imported as a module."""
    spec = importlib.util.spec_from_file_location("onnx_node_tests", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cases(runner_module):
    """Every backend node test case, by name (collecting them runs every case's reference: seconds, so its users
    are in the full suite only)."""
    from onnx.backend.test.case.node import collect_testcases

    return {case.name: case for case in collect_testcases(None)}


@pytest.fixture(scope="module")
def outcomes(runner_module, cases):
    """The outcome of every representative case."""
    import dcaccel.expansions

    supported = set(dcaccel.expansions.supported_ops())
    selected = [(runner_module.primary_op(cases[name]), cases[name]) for name in REPRESENTATIVE]
    runner = runner_module.Runner(batch=len(selected), isolate=False)  # a test session has run OpenMP: no fork
    return {o.case: o for o in runner.run(selected, supported)}


@pytest.mark.slow
@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_representative_case_passes(name, outcomes, runner_module):
    outcome = outcomes[name]
    assert outcome.status is runner_module.Status.PASS, outcome.reason


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("test_relu", "Relu"),
        ("test_batchnorm_epsilon", "BatchNormalization"),
        ("test_softmax_axis_0_expanded", "Softmax"),
        ("test_layer_normalization_2d_axis0_expanded", "LayerNormalization"),
        ("test_reduce_mean_default_axes_keepdims_example", "ReduceMean"),
        ("test_nllloss_NC_expanded", "NegativeLogLikelihoodLoss"),
        ("test_sce_mean_expanded", "SoftmaxCrossEntropyLoss"),
        ("test_mvn_expanded", "MeanVarianceNormalization"),
    ],
)
def test_primary_op(name, op, runner_module, cases):
    assert runner_module.primary_op(cases[name]) == op


@pytest.mark.slow
def test_shape_parameters_are_bound_as_initializers(runner_module, cases):
    prepared = runner_module.prepare("Reshape", cases["test_reshape_reordered_all_dims"])
    assert [i.name for i in prepared.model.graph.input] == ["data"]
    (shape,) = prepared.model.graph.initializer
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(shape), [4, 2, 3])
    assert set(prepared.inputs) == {"data"}


@pytest.mark.slow
def test_an_expanded_graph_binds_the_tested_op_s_shape_parameters(runner_module, cases):
    """The _expanded graph has no CenterCropPad node: its graph input 'shape' (the op's input 1) is bound, so the
    import folds the crop's arithmetic on it into constants."""
    prepared = runner_module.prepare("CenterCropPad (expanded)", cases["test_center_crop_pad_crop_expanded"])
    assert prepared.refusal is None
    assert [i.name for i in prepared.model.graph.input] == ["x"]
    assert set(prepared.inputs) == {"x"}


@pytest.mark.slow
def test_merged_cases_keep_their_tensors_apart(runner_module, cases):
    first = runner_module.prepare("Relu", cases["test_relu"])
    second = runner_module.prepare("Add", cases["test_add_bcast"])
    model, feed, choices = runner_module.merge([first, second])
    assert [n.name for n in model.graph.node] == ["case0_node0", "case1_node0"]
    assert [o.name for o in model.graph.output] == ["case0_y", "case1_sum"]
    assert set(feed) == {"case0_x", "case1_x", "case1_y"}
    np.testing.assert_array_equal(feed["case1_y"], second.inputs["y"])
    assert choices == {"case0_node0": "canonical", "case1_node0": "canonical"}
    onnx.checker.check_model(model)


@pytest.mark.slow
def test_unsupported_ops_and_types_are_skipped_with_their_reason(runner_module, cases):
    import dcaccel.expansions

    supported = set(dcaccel.expansions.supported_ops())
    relu = runner_module.prepare("Relu", cases["test_relu"])
    relu.model.graph.node[0].op_type = "TfIdfVectorizer"
    outcome = runner_module.dry_run(relu, supported)
    assert outcome.status is runner_module.Status.SKIP
    assert "TfIdfVectorizer" in outcome.reason
    float8_cast = runner_module.prepare("Cast", cases["test_cast_FLOAT_to_FLOAT8E4M3FN"])
    outcome = runner_module.dry_run(float8_cast, supported)
    assert outcome.status is runner_module.Status.SKIP
    assert "FLOAT8E4M3FN" in outcome.reason


def test_summary_counts_per_op(runner_module):
    outcome = runner_module.CaseOutcome
    status = runner_module.Status
    rows = runner_module.summarize(
        [
            outcome("Relu", "a", status.PASS),
            outcome("Add", "b", status.FAIL, "x"),
            outcome("Relu", "c", status.SKIP, "y"),
            outcome("Hardmax", "d", status.HOST, "fallback: Hardmax (onnxruntime)"),
        ]
    )
    assert rows == [
        runner_module.OpSummary("Add", 1, 0, 0, 1, 0),
        runner_module.OpSummary("Hardmax", 1, 0, 1, 0, 0),
        runner_module.OpSummary("Relu", 2, 1, 0, 0, 1),
    ]


def test_rows_merge_implementations_and_keep_expanded_cases_apart(runner_module):
    outcome = runner_module.CaseOutcome
    status = runner_module.Status
    rows = runner_module.op_rows(
        [
            outcome("Conv[mv]", "test_conv", status.PASS),
            outcome("Conv[op]", "test_conv", status.FAIL, "output 0: max abs deviation 1"),
            outcome("Celu", "test_celu", status.PASS, "lowered as Exp+Mul"),
            outcome("Celu (expanded)", "test_celu_expanded", status.HOST, "fallback: Elu (onnxruntime)"),
            outcome("If", "test_if", status.SKIP, "unsupported op If (node 'n'): no branch"),
        ]
    )
    by_op = {row.op: row for row in rows}
    assert set(by_op) == {"Conv", "Celu", "Celu (expanded)", "If"}
    assert (by_op["Conv"].passed, by_op["Conv"].failed) == (1, 1)
    assert by_op["Conv"].op_class is runner_module.OpClass.CANONICAL_SOME_FAIL
    assert by_op["Conv"].first_failure_refusal_or_route == "fail: test_conv: output 0: max abs deviation 1"
    assert by_op["Celu"].first_failure_refusal_or_route == "pass: test_celu: lowered as Exp+Mul"
    assert by_op["Celu (expanded)"].op_class is runner_module.OpClass.HOST
    assert by_op["If"].op_class is runner_module.OpClass.REFUSED
    counts = {c.op_class: c.op_types for c in runner_module.class_counts(rows)}
    assert counts[runner_module.OpClass.CANONICAL] == 1
    assert counts[runner_module.OpClass.HOST] == 0  # the expanded row is not an op type
    assert sum(counts.values()) == 3


def test_outcomes_round_trip_through_json(runner_module, tmp_path):
    outcome = runner_module.CaseOutcome
    saved = [
        outcome("Relu", "test_relu", runner_module.Status.PASS),
        outcome("If", "t", runner_module.Status.SKIP, "r"),
    ]
    path = tmp_path / "outcomes.json"
    runner_module.write_outcomes(str(path), saved)
    assert runner_module.read_outcomes(str(path)) == saved
    path.write_text('[{"op": "Relu", "case": "t", "status": "pass"}]')
    with pytest.raises(ValueError, match="record 0 does not have the fields"):
        runner_module.read_outcomes(str(path))
    path.write_text('[{"op": "Relu", "case": "t", "status": "won", "reason": ""}]')
    with pytest.raises(ValueError, match="won"):
        runner_module.read_outcomes(str(path))


def test_a_later_file_s_outcome_of_a_case_wins(runner_module, tmp_path, capsys):
    outcome = runner_module.CaseOutcome
    status = runner_module.Status
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    runner_module.write_outcomes(str(first), [outcome("Celu", "test_celu", status.HOST, "fallback: Celu")])
    runner_module.write_outcomes(str(second), [outcome("Celu", "test_celu", status.PASS)])
    assert runner_module.main(["--from-json", str(first), str(second)]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Celu ")]
    assert row.split()[:6] == ["Celu", "1", "1", "0", "0", "0"]


@pytest.mark.parametrize("shard", ["0/2", "3/2", "1/0", "a/b", "1"])
def test_a_bad_shard_is_refused(runner_module, shard, capsys):
    with pytest.raises(SystemExit):
        runner_module.main(["--all", "--shard", shard])
    assert "--shard" in capsys.readouterr().err


def _case(node: onnx.NodeProto, inputs: list, outputs: list):
    """A backend test case of one node (no data: what :func:`excluded` reads is the graph)."""
    from onnx.backend.test.case.test_case import TestCase

    graph = onnx.helper.make_graph([node], "case", inputs, outputs)
    return TestCase("test_case", "case", None, None, onnx.helper.make_model(graph), [], "node", 0, 0)


def _tensor(name: str, elem_type: int = onnx.TensorProto.FLOAT):
    return onnx.helper.make_tensor_value_info(name, elem_type, [2])


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        (_case(onnx.helper.make_node("Relu", ["x"], ["y"]), [_tensor("x")], [_tensor("y")]), None),
        (
            _case(
                onnx.helper.make_node("SequenceConstruct", ["x"], ["s"]),
                [_tensor("x")],
                [onnx.helper.make_tensor_sequence_value_info("s", onnx.TensorProto.FLOAT, [2])],
            ),
            "sequence_type value 's'",
        ),
        (
            _case(
                onnx.helper.make_node("Cast", ["x"], ["y"], to=onnx.TensorProto.STRING),
                [_tensor("x")],
                [_tensor("y", onnx.TensorProto.STRING)],
            ),
            "string tensor 'y'",
        ),
        (
            _case(
                onnx.helper.make_node("Momentum", ["x"], ["y"], domain="ai.onnx.preview.training"),
                [_tensor("x")],
                [_tensor("y")],
            ),
            "training op",
        ),
        (
            _case(onnx.helper.make_node("OptionalGetElement", ["x"], ["y"]), [_tensor("x")], [_tensor("y")]),
            "optional op",
        ),
    ],
    ids=["tensor", "sequence", "string", "training", "optional"],
)
def test_excluded_cases_name_their_reason(runner_module, case, reason):
    assert runner_module.excluded(case) == reason


@pytest.mark.slow
def test_an_op_without_lowering_verifies_through_the_host_fallback(runner_module, cases):
    """TfIdfVectorizer (no dcaccel or DaCe implementation, no function body) compiles as a host task calling
    onnxruntime and verifies; without ``fallback`` it is skipped."""
    import dcaccel.expansions

    supported = set(dcaccel.expansions.supported_ops())
    selected = [("TfIdfVectorizer", cases["test_tfidfvectorizer_tf_only_bigrams_skip0"])]
    (tfidf,) = runner_module.Runner(batch=1, isolate=False, fallback=True).run(selected, supported)
    assert tfidf.status is runner_module.Status.HOST, tfidf.reason
    assert tfidf.reason == "fallback: TfIdfVectorizer (onnxruntime)"
    skipped = runner_module.Runner(batch=1, isolate=False).run(selected, supported)
    assert [outcome.status for outcome in skipped] == [runner_module.Status.SKIP]
    assert "TfIdfVectorizer" in skipped[0].reason


def _dropout_model(training_mode: bool | None, ratio: float | None) -> onnx.ModelProto:
    """One Dropout of a 4-vector, ``ratio`` and ``training_mode`` constants (None: the input left out)."""
    from onnx import TensorProto, helper, numpy_helper

    inputs = ["x", "ratio" if ratio is not None else "", "mode" if training_mode is not None else ""]
    while not inputs[-1]:  # trailing optional inputs left out
        inputs.pop()
    constants = [numpy_helper.from_array(np.array(ratio, np.float32), "ratio")] if ratio is not None else []
    constants += [numpy_helper.from_array(np.array(training_mode), "mode")] if training_mode is not None else []
    graph = helper.make_graph(
        [helper.make_node("Dropout", inputs, ["y"])],
        "dropout",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        constants,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize(
    ("training_mode", "ratio", "random"),
    [(True, 0.5, True), (True, None, True), (True, 0.0, False), (False, 0.5, False), (None, 0.5, False)],
    ids=["training", "training-default-ratio", "training-ratio-0", "inference", "no-mode"],
)
def test_dropout_draws_random_only_when_training_with_a_ratio(runner_module, training_mode, ratio, random):
    assert runner_module.draws_random(_dropout_model(training_mode, ratio)) is random


def test_random_ops_draw_random(runner_module, cases):
    assert runner_module.draws_random(cases["test_bernoulli"].model)
    assert not runner_module.draws_random(cases["test_relu"].model)


@pytest.mark.slow
def test_a_node_its_implementation_refuses_goes_to_the_host_with_the_refusal(runner_module):
    """CumSum along an axis that is data: the canonical check refuses it; with the fallback it is expanded as a
    host task and the refusal is named, without it the refusal is raised (the case's skip)."""
    from onnx import TensorProto, helper

    from dcaccel.errors import UnsupportedOpError

    graph = helper.make_graph(
        [helper.make_node("CumSum", ["x", "axis"], ["y"])],
        "cumsum",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("axis", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    _, fallbacks = runner_module._import_and_expand("refused_cumsum", model, {})
    assert list(fallbacks) == ["CumSum"]
    assert fallbacks["CumSum"].startswith("onnxruntime; canonical refuses it: 'axis' must be a constant")
    with pytest.raises(UnsupportedOpError, match="CumSum"):
        runner_module._import_and_expand("refused_cumsum_strict", model, {}, fallback=False)
