"""Control flow (If, Loop, Scan) unrolled into straight-line graphs (``dcaccel.frontend.control_flow``).

Each form (scans over axes and directions, opset 8's batched scan, loops stopped by their trip count or by a
condition computed from the iteration number, If on a constant and on a computed condition, control flow in
a body, a function op in a loop body, a torch-scripted loop) is checked twice: fast, the unrolled graph against
the original one, both run by onnxruntime (nothing compiled); slow, every form in one model imported, lowered
canonically and compiled once, against onnxruntime. Refusals are one line naming op, node and reason.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dcaccel.errors import UnsupportedOpError
from dcaccel.frontend import control_flow
from dcaccel.frontend.control_flow import CONTROL_FLOW_OPS, straight_line
from dcaccel.frontend.onnx_import import readable_node_names
from dcaccel.frontend.onnx_prepare import normalize
from tests.expansions.canonical_onnx import IR_VERSION, OPSET, run_canonical, run_reference

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _value(name: str, elem: int = FLOAT, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _constant(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _model(nodes, inputs, outputs, initializers=(), opset: int = OPSET) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "control_flow", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)


def scan_model(input_axis: int, input_direction: int, output_axis: int, output_direction: int) -> onnx.ModelProto:
    """A running sum over axis ``input_axis`` of ``x`` [3, 4] (state: 4 or 3 values), each step's sum scaled by the
    outer-scope weight ``w`` as the scan output; outputs the final sum and the scan output."""
    length, width = (3, 4) if input_axis == 0 else (4, 3)
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "x_t"], ["sum_out"]), helper.make_node("Mul", ["sum_out", "w"], ["y_t"])],
        "scan_body",
        [_value("sum_in", shape=[width]), _value("x_t", shape=[width])],
        [_value("sum_out", shape=[width]), _value("y_t", shape=[width])],
    )
    scan = helper.make_node(
        "Scan",
        ["s0", "x"],
        ["s", "y"],
        name="scan",
        body=body,
        num_scan_inputs=1,
        scan_input_axes=[input_axis],
        scan_input_directions=[input_direction],
        scan_output_axes=[output_axis],
        scan_output_directions=[output_direction],
    )
    out_shape = [length, width] if output_axis == 0 else [width, length]
    return _model(
        [scan],
        [_value("s0", shape=[width]), _value("x", shape=[3, 4])],
        [_value("s", shape=[width]), _value("y", shape=out_shape)],
        [_constant("w", np.linspace(0.5, 2, width, dtype=np.float32))],
    )


def batched_scan_model() -> onnx.ModelProto:
    """Opset 8's Scan: a batch of 2 running sums over 3 steps (reverse), the sums as the scan output."""
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "x_t"], ["sum_out"]), helper.make_node("Identity", ["sum_out"], ["y_t"])],
        "scan_body",
        [_value("sum_in", shape=[4]), _value("x_t", shape=[4])],
        [_value("sum_out", shape=[4]), _value("y_t", shape=[4])],
    )
    scan = helper.make_node(
        "Scan", ["", "s0", "x"], ["s", "y"], name="scan8", body=body, num_scan_inputs=1, directions=[1]
    )
    return _model(
        [scan],
        [_value("s0", shape=[2, 4]), _value("x", shape=[2, 3, 4])],
        [_value("s", shape=[2, 4]), _value("y", shape=[2, 3, 4])],
        opset=8,
    )


def loop_body(condition: list[onnx.NodeProto], extra: list[onnx.NodeProto] = ()) -> onnx.GraphProto:
    """A loop body adding the iteration number and the outer-scope ``w`` to the carried ``y``; ``condition``
    computes ``cond_out``; the scan output is the new ``y``."""
    return helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["i_f"], to=FLOAT),
            helper.make_node("Add", ["y_in", "i_f"], ["y_i"]),
            helper.make_node("Add", ["y_i", "w"], ["y_out"]),
            helper.make_node("Identity", ["y_out"], ["scan_out"]),
            *condition,
            *extra,
        ],
        "loop_body",
        [_value("i", INT64, []), _value("cond_in", BOOL, []), _value("y_in", shape=[2])],
        [_value("cond_out", BOOL, []), _value("y_out", shape=[2]), _value("scan_out", shape=[2])],
    )


def loop_model(trips: int, stop: int | None = None) -> onnx.ModelProto:
    """A loop of ``trips`` steps over ``y`` [2] (:func:`loop_body`); with ``stop``, the body's condition is
    ``i + 1 < stop`` (computed from the iteration number), so that it ends after ``min(trips, stop)`` steps."""
    if stop is None:
        condition = [helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    else:
        condition = [
            helper.make_node("Add", ["i", "one"], ["next"]),
            helper.make_node("Less", ["next", "stop"], ["cond_out"]),
        ]
    steps = min(trips, stop or trips)
    loop = helper.make_node("Loop", ["trips", "", "y0"], ["y", "ys"], name="loop", body=loop_body(condition))
    return _model(
        [loop],
        [_value("y0", shape=[2])],
        [_value("y", shape=[2]), _value("ys", shape=[steps, 2])],
        [
            _constant("trips", np.int64(trips)),
            _constant("w", np.array([1.0, -2.0], np.float32)),
            *([] if stop is None else [_constant("one", np.int64(1)), _constant("stop", np.int64(stop))]),
        ],
    )


def sized_loop_model() -> onnx.ModelProto:
    """:func:`loop_model` whose trip count is the number of elements of ``y0`` (``Size``: 2), a constant of its
    static shape."""
    model = loop_model(2)
    kept = [init for init in model.graph.initializer if init.name != "trips"]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    model.graph.node.insert(0, helper.make_node("Size", ["y0"], ["trips"]))
    return model


def branches(then_shape=(2, 3), else_shape=(2, 3)) -> dict:
    """``then_branch``: ``x + a``; ``else_branch``: ``x * b`` (``a``, ``b`` outer-scope constants)."""
    then_branch = helper.make_graph(
        [helper.make_node("Add", ["x", "a"], ["then_y"])], "then_body", [], [_value("then_y", shape=list(then_shape))]
    )
    else_branch = helper.make_graph(
        [helper.make_node("Mul", ["x", "b"], ["else_y"])], "else_body", [], [_value("else_y", shape=list(else_shape))]
    )
    return {"then_branch": then_branch, "else_branch": else_branch}


def if_model(condition: bool | None) -> onnx.ModelProto:
    """An If on ``x`` [2, 3]: on a constant ``condition``, or (None) on the graph input ``c``."""
    constants = [_constant("a", np.float32(1.5)), _constant("b", np.array([2, 3, 4], np.float32))]
    inputs = [_value("x", shape=[2, 3])]
    if condition is None:
        inputs.append(_value("c", BOOL, []))
    else:
        constants.append(_constant("c", np.bool_(condition)))
    node = helper.make_node("If", ["c"], ["y"], name="branch", **branches())
    return _model([node], inputs, [_value("y", shape=[2, 3])], constants)


def nested_model() -> onnx.ModelProto:
    """A loop of 4 steps whose body holds an If on the iteration number's parity (a constant once the step's
    iteration number is bound): even steps add ``w``, odd ones multiply by it."""
    parity = [
        helper.make_node("Mod", ["i", "two"], ["odd_i"]),
        helper.make_node("Equal", ["odd_i", "zero"], ["even"]),
        helper.make_node(
            "If",
            ["even"],
            ["z"],
            name="parity",
            then_branch=helper.make_graph(
                [helper.make_node("Add", ["y_out", "w"], ["z_then"])], "even_body", [], [_value("z_then", shape=[2])]
            ),
            else_branch=helper.make_graph(
                [helper.make_node("Mul", ["y_out", "w"], ["z_else"])], "odd_body", [], [_value("z_else", shape=[2])]
            ),
        ),
    ]
    body = loop_body([helper.make_node("Identity", ["cond_in"], ["cond_out"])], parity)
    body.output[2].CopyFrom(_value("z", shape=[2]))
    loop = helper.make_node("Loop", ["trips", "go", "y0"], ["y", "zs"], name="outer", body=body)
    return _model(
        [loop],
        [_value("y0", shape=[2])],
        [_value("y", shape=[2]), _value("zs", shape=[4, 2])],
        [
            _constant("trips", np.int64(4)),
            _constant("go", np.bool_(True)),
            _constant("w", np.array([0.5, 3.0], np.float32)),
            _constant("two", np.int64(2)),
            _constant("zero", np.int64(0)),
        ],
    )


def function_loop_model() -> onnx.ModelProto:
    """A loop of 3 steps whose body applies ``LogSoftmax`` (an ONNX function op without a canonical implementation)
    to the carried ``y`` [2, 3] plus the outer-scope ``w``; the scan output is each step's ``y``."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["y_in", "w"], ["shifted"]),
            helper.make_node("LogSoftmax", ["shifted"], ["y_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["y_out"], ["scan_out"]),
        ],
        "function_body",
        [_value("i", INT64, []), _value("cond_in", BOOL, []), _value("y_in", shape=[2, 3])],
        [_value("cond_out", BOOL, []), _value("y_out", shape=[2, 3]), _value("scan_out", shape=[2, 3])],
    )
    loop = helper.make_node("Loop", ["trips", "", "y0"], ["y", "ys"], name="loop", body=body)
    return _model(
        [loop],
        [_value("y0", shape=[2, 3])],
        [_value("y", shape=[2, 3]), _value("ys", shape=[3, 2, 3])],
        [_constant("trips", np.int64(3)), _constant("w", np.array([1.0, -2.0, 0.5], np.float32))],
    )


FORMS = {
    "scan_axis0": scan_model(0, 0, 0, 0),
    "scan_axis1_reverse": scan_model(1, 1, 0, 0),
    "scan_output_axis_reverse": scan_model(0, 0, 1, 1),
    "scan_output_axis_negative": scan_model(1, 0, -1, 0),
    "loop_trips": loop_model(3),
    "loop_one_trip": loop_model(1),
    "loop_condition_stops": loop_model(5, stop=2),
    "loop_trips_from_size": sized_loop_model(),
    "if_true": if_model(True),
    "if_false": if_model(False),
    "if_where": if_model(None),
    "nested": nested_model(),
    "loop_function_op": function_loop_model(),
}
"""Small models of every form, at the opset of the canonical tests."""


def _feed(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feed = {}
    for value in model.graph.input:
        shape = [dim.dim_value for dim in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == BOOL:
            feed[value.name] = np.asarray(rng.integers(0, 2, shape), np.bool_)
        else:
            feed[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feed


def _op_types(model: onnx.ModelProto) -> set[str]:
    return {node.op_type for node in model.graph.node}


@pytest.mark.parametrize("form", [*FORMS, "batched_scan"])
def test_unrolled_graph_computes_what_the_control_flow_does(form):
    model = batched_scan_model() if form == "batched_scan" else FORMS[form]
    unrolled = straight_line(model, form)
    onnx.checker.check_model(unrolled, full_check=True)
    assert not _op_types(unrolled) & CONTROL_FLOW_OPS
    feed = _feed(model)
    expected, actual = run_reference(model, feed), run_reference(unrolled, feed)
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=1e-6)


@pytest.mark.parametrize("cond", [True, False])
def test_if_on_a_computed_condition_selects_with_where(cond):
    unrolled = straight_line(FORMS["if_where"], "if_where")
    assert [node.op_type for node in unrolled.graph.node] == ["Add", "Mul", "Where"]
    feed = {**_feed(FORMS["if_where"]), "c": np.array(cond)}
    expected = run_reference(FORMS["if_where"], feed)["y"]
    np.testing.assert_array_equal(run_reference(unrolled, feed)["y"], expected)


def test_a_constant_condition_inlines_only_the_chosen_branch():
    assert [node.name for node in straight_line(FORMS["if_false"], "if").graph.node] == ["branch_else_Mul"]


def test_unrolled_nodes_name_their_control_flow_node_and_step():
    unrolled = straight_line(FORMS["loop_trips"], "loop")
    names = [node.name for node in unrolled.graph.node]
    assert len(set(names)) == len(names)
    bodies = [name for name in names if "_step" in name]
    assert bodies[:4] == ["loop_step0_Cast", "loop_step0_Add", "loop_step0_Add_1", "loop_step0_Identity"]
    assert {name.split("_")[1] for name in bodies} == {"step0", "step1", "step2"}
    assert [o for node in unrolled.graph.node for o in node.output].count("y") == 1  # the last step writes y


def test_a_loop_stops_at_the_step_whose_condition_is_false():
    unrolled = straight_line(FORMS["loop_condition_stops"], "loop")
    assert {node.name.split("_")[1] for node in unrolled.graph.node if "_step" in node.name} == {"step0", "step1"}


def test_a_while_loop_of_the_largest_trip_count_unrolls_until_its_condition_is_false():
    """PyTorch writes a ``while`` loop as a Loop of trip count 2**63 - 1 and a condition: the steps the condition
    allows are unrolled, whatever the trip count."""
    unrolled = straight_line(loop_model(2**63 - 1, stop=2), "loop")
    assert {node.name.split("_")[1] for node in unrolled.graph.node if "_step" in node.name} == {"step0", "step1"}


def test_a_loop_still_running_after_the_steps_unrolled_is_refused(monkeypatch):
    monkeypatch.setattr(control_flow, "MAX_STEPS", 3)
    assert _refusal(loop_model(10)) == "unsupported op Loop (node 'loop'): still running after the 3 steps unrolled"


def test_nested_control_flow_is_unrolled_with_its_enclosing_step():
    names = [node.name for node in straight_line(FORMS["nested"], "nested").graph.node]
    assert "outer_step0_parity_then_Add" in names and "outer_step1_parity_else_Mul" in names
    assert not any("parity_else" in name for name in names if name.startswith(("outer_step0", "outer_step2")))


def test_a_function_op_in_a_loop_body_is_replaced_by_its_function_body_once_unrolled():
    """normalize unrolls the loop, then replaces each step's ``LogSoftmax`` (no canonical implementation) by its
    ONNX function body, named after the step."""
    model = FORMS["loop_function_op"]
    normalized = normalize(model, "loop")
    assert not _op_types(normalized) & {"LogSoftmax", *CONTROL_FLOW_OPS}
    names = [node.name for node in normalized.graph.node]
    assert {name.partition("/")[0] for name in names if "/LogSoftmax/" in name} == {
        f"loop_step{k}_LogSoftmax" for k in range(3)
    }
    feed = _feed(model)
    expected, actual = run_reference(model, feed), run_reference(normalized, feed)
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=1e-6, atol=1e-6)


def test_a_model_without_control_flow_is_returned_as_is():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_value("x", shape=[2])], [_value("y", shape=[2])])
    assert straight_line(model, "relu") is model


def _refusal(model: onnx.ModelProto) -> str:
    with pytest.raises(UnsupportedOpError) as refused:
        straight_line(model, "refused")
    message = str(refused.value)
    assert "\n" not in message
    return message


def _without_constant(model: onnx.ModelProto, name: str, elem: int, shape) -> onnx.ModelProto:
    """``model`` with its initializer ``name`` made a graph input."""
    changed = onnx.ModelProto()
    changed.CopyFrom(model)
    kept = [init for init in changed.graph.initializer if init.name != name]
    del changed.graph.initializer[:]
    changed.graph.initializer.extend(kept)
    changed.graph.input.append(_value(name, elem, shape))
    return changed


def test_a_loop_whose_trip_count_is_not_a_constant_is_refused():
    model = _without_constant(FORMS["loop_trips"], "trips", INT64, [])
    assert _refusal(model) == "unsupported op Loop (node 'loop'): trip count is not a constant"


def test_a_loop_whose_initial_condition_is_not_a_constant_is_refused():
    model = _without_constant(FORMS["nested"], "go", BOOL, [])
    assert _refusal(model) == "unsupported op Loop (node 'outer'): condition is not a constant"


def test_a_loop_whose_condition_depends_on_data_is_refused():
    model = loop_model(3, stop=2)
    body = model.graph.node[0].attribute[0].g
    body.node[-1].CopyFrom(helper.make_node("Less", ["next", "stop"], ["unused"]))
    body.node.extend([helper.make_node("ReduceMax", ["y_out"], ["top"], keepdims=0)])
    body.node.extend([helper.make_node("Greater", ["top", "w0"], ["cond_out"])])
    model.graph.initializer.append(_constant("w0", np.float32(0)))
    assert _refusal(model) == "unsupported op Loop (node 'loop'): condition is not a constant (computed at step 0)"


def test_an_if_on_a_computed_condition_with_branches_of_different_shapes_is_refused():
    model = if_model(None)
    node = model.graph.node[0]
    node.ClearField("attribute")
    node.attribute.extend(helper.make_attribute(key, graph) for key, graph in branches((2, 3), (1, 3)).items())
    branch = model.graph.node[0].attribute[1].g  # else: x * b[:1] has shape [2, 3] still; make it [1, 3]
    branch.node[0].CopyFrom(helper.make_node("ReduceSum", ["x", "axis0"], ["else_y"], keepdims=1))
    model.graph.initializer.append(_constant("axis0", np.array([0], np.int64)))
    message = _refusal(model)
    assert message.startswith("unsupported op If (node 'branch'): the condition is not a constant")
    assert "float32[2,3] and float32[1,3]" in message


def test_an_opset_8_scan_with_sequence_lengths_is_refused():
    model = batched_scan_model()
    model.graph.node[0].input[0] = "lengths"
    model.graph.initializer.append(_constant("lengths", np.array([3, 2], np.int32)))
    assert "node 'scan8'): sequence_lens is given" in _refusal(model)


def test_a_scan_over_an_axis_of_unknown_length_is_refused():
    model = scan_model(0, 0, 0, 0)
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "n"
    assert _refusal(model) == "unsupported op Scan (node 'scan'): the shape of scan input 'x' is not static"


def torch_loop_model() -> onnx.ModelProto:
    """A torch-scripted loop over the rows of ``x`` [2, 3] (a running update), exported by TorchScript's exporter,
    which writes it as an ONNX ``Loop`` of a constant trip count (a loop over a literal ``range`` it unrolls
    itself). The output's dimensions, which the exporter leaves symbolic, are set to the input's."""
    import io

    import torch

    class Recurrence(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.linspace(-1, 1, 3))

        def forward(self, x):
            for _ in range(x.shape[0]):
                x = torch.tanh(x * self.weight + x)
            return x

    buffer = io.BytesIO()
    scripted = torch.jit.script(Recurrence())
    torch.onnx.export(scripted, (torch.ones(2, 3),), buffer, dynamo=False, opset_version=OPSET, input_names=["x"])
    model = onnx.load_from_string(buffer.getvalue())
    model.graph.output[0].type.CopyFrom(model.graph.input[0].type)
    return model


@pytest.fixture(scope="module")
def torch_loop():
    return torch_loop_model()


@pytest.mark.slow  # importing torch
def test_torchscript_writes_a_loop_that_unrolls(torch_loop):
    assert "Loop" in _op_types(torch_loop)
    unrolled = straight_line(torch_loop, "torch_loop")
    assert "Loop" not in _op_types(unrolled)
    feed = {"x": np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)}
    expected = next(iter(run_reference(torch_loop, feed).values()))
    np.testing.assert_allclose(next(iter(run_reference(unrolled, feed).values())), expected, rtol=1e-6)


def _subgraphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    """``graph`` and every subgraph of its nodes, recursively."""
    nested = [attribute.g for node in graph.node for attribute in node.attribute if attribute.HasField("g")]
    return [graph, *(inner for subgraph in nested for inner in _subgraphs(subgraph))]


def _prefixed(model: onnx.ModelProto, prefix: str) -> onnx.ModelProto:
    """A copy of ``model`` with every value and node name, in its subgraphs too, prefixed by ``prefix``."""
    renamed = onnx.ModelProto()
    renamed.CopyFrom(model)
    for graph in _subgraphs(renamed.graph):
        for value in (*graph.input, *graph.output, *graph.initializer, *graph.value_info):
            value.name = prefix + value.name
        for node in graph.node:
            node.name = prefix + node.name if node.name else node.name
            node.input[:] = [prefix + name if name else name for name in node.input]
            node.output[:] = [prefix + name if name else name for name in node.output]
    return renamed


@pytest.fixture(scope="module")
def compiled_forms(torch_loop):
    """Every form (the torch loop too) in one model, normalized and its nodes named as dcaccel imports it, run by
    onnxruntime (the original) and by the canonical implementations of the unrolled graph (one compile)."""
    forms = {**FORMS, "torch": torch_loop}
    merged = helper.make_graph([], "forms", [], [])
    for prefix, model in forms.items():
        prefixed = _prefixed(model, f"{prefix}_")
        merged.node.extend(prefixed.graph.node)
        merged.input.extend(prefixed.graph.input)
        merged.output.extend(prefixed.graph.output)
        merged.initializer.extend(prefixed.graph.initializer)
    model = helper.make_model(merged, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    feed = _feed(model)
    reference = run_reference(model, feed)
    imported = readable_node_names(normalize(model, "forms"))
    return reference, run_canonical(imported, feed, "control_flow_forms")


@pytest.mark.slow
@pytest.mark.parametrize("form", [*FORMS, "torch"])
def test_compiled_straight_line_graph_matches_onnxruntime(compiled_forms, form):
    reference, canonical = compiled_forms
    names = [name for name in reference if name.startswith(f"{form}_")]
    assert names
    for name in names:
        np.testing.assert_allclose(canonical[name], reference[name], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_an_unrolled_loop_lowers_to_tasks_named_after_its_steps_none_opaque():
    import dcaccel
    from dcaccel.dag import extract
    from dcaccel.dag.metrics import opaque_work
    from dcaccel.transforms.lower import lower

    dag = extract(lower(dcaccel.load(FORMS["loop_trips"], fold=False).sdfg))
    assert opaque_work(dag)[0] == 0
    steps = [f"loop_step{k}_{op}" for k in range(3) for op in ("Cast", "Add", "Add_1")]  # the Identity is removed
    stacking = ["loop_scan0_0", "loop_scan0_1", "loop_scan0_2", "loop_scan0"]  # three Unsqueeze, one Concat
    assert {dag.info(task).node for task in dag.tasks} == {*steps, *stacking}
