"""A node whose canonical implementation refuses it runs on the host (issue 25), as an op without any does.

The examples are refusals of ops whose lowerings are stable: RoiAlign with ``sampling_ratio`` 0 (adaptive: how many
samples a bin reads is data), CumSum along an axis that is a graph input, Trilu whose diagonal offset ``k`` is a
graph input, a cubic Resize (DaCe has an expansion of its own for Resize: a refused node runs on the host all the
same). Unless the user names the node or its op type in ``choices``, or lowers strictly, each becomes a host
task (onnxruntime runs it) with the refusal as its reason; :func:`~dcaccel.transforms.lower.opaque_reasons`, the
``--strict`` check, the sweep's warning and a partition's annotation say the same before anything is lowered. The
lowered programs compile and match onnxruntime (slow). Assertions on a reason name the op, the node and the input
the check is about, not the check's whole wording.
"""

import warnings

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

ROIS = np.array([[0, 0, 3.5, 4], [0.5, 1, 5, 5.5]], np.float32)  # two regions of image 0 (corners x1, y1, x2, y2)
WEIGHT = np.arange(16, dtype=np.float32).reshape(4, 4) / 8


def _value(name: str, element, shape: list[int]):
    return helper.make_tensor_value_info(name, element, shape)


def _model(name: str, nodes, inputs, outputs, weights=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(weights))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _roi_align(output: str = "y") -> tuple[list, list]:
    """RoiAlign (2 × 2 bins, adaptive sampling) of ``x`` over the two regions of :data:`ROIS`: its node and
    weights."""
    node = helper.make_node(
        "RoiAlign", ["x", "rois", "batch"], [output], name="roi", output_height=2, output_width=2, sampling_ratio=0
    )
    weights = [numpy_helper.from_array(ROIS, "rois"), numpy_helper.from_array(np.zeros(2, np.int64), "batch")]
    return [node], weights


def roi_align_model() -> onnx.ModelProto:
    """x (1 × 1 × 6 × 6) → RoiAlign with ``sampling_ratio`` 0 → y (2 × 1 × 2 × 2)."""
    nodes, weights = _roi_align()
    x = _value("x", onnx.TensorProto.FLOAT, [1, 1, 6, 6])
    return _model("roi_align", nodes, [x], [_value("y", onnx.TensorProto.FLOAT, [2, 1, 2, 2])], weights)


def cumsum_model() -> onnx.ModelProto:
    """x (3 × 4) → CumSum along the axis given as the graph input ``axis`` → y."""
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], name="cumsum")
    inputs = [_value("x", onnx.TensorProto.FLOAT, [3, 4]), _value("axis", onnx.TensorProto.INT64, [])]
    return _model("cumsum_data_axis", [node], inputs, [_value("y", onnx.TensorProto.FLOAT, [3, 4])])


def trilu_model() -> onnx.ModelProto:
    """x (4 × 5) → Trilu (lower) from the diagonal ``k``, a graph input → y."""
    node = helper.make_node("Trilu", ["x", "k"], ["y"], name="trilu", upper=0)
    inputs = [_value("x", onnx.TensorProto.FLOAT, [4, 5]), _value("k", onnx.TensorProto.INT64, [])]
    return _model("trilu_data_k", [node], inputs, [_value("y", onnx.TensorProto.FLOAT, [4, 5])])


def resize_model() -> onnx.ModelProto:
    """x (1 × 1 × 3 × 4) → Resize, cubic, twice the height and width → y (1 × 1 × 6 × 8): DaCe has an expansion of
    its own (``pure``) for the Resize the canonical implementation refuses, and the host runs it instead."""
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="resize", mode="cubic")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    x, y = _value("x", onnx.TensorProto.FLOAT, [1, 1, 3, 4]), _value("y", onnx.TensorProto.FLOAT, [1, 1, 6, 8])
    return _model("resize_cubic", [node], [x], [y], [scales])


def mixed_model() -> onnx.ModelProto:
    """x (1 × 1 × 6 × 6) → RoiAlign (adaptive) → Reshape (2 × 4) → MatMul (4 × 4 weight) → Trilu from the diagonal
    ``k`` (a graph input) → y (2 × 4): two refused nodes around a matrix product an accelerator runs."""
    nodes, weights = _roi_align("r")
    nodes += [
        helper.make_node("Reshape", ["r", "shape"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "w"], ["m"], name="fc"),
        helper.make_node("Trilu", ["m", "k"], ["y"], name="trilu", upper=0),
    ]
    weights += [numpy_helper.from_array(np.array([2, 4], np.int64), "shape"), numpy_helper.from_array(WEIGHT, "w")]
    inputs = [_value("x", onnx.TensorProto.FLOAT, [1, 1, 6, 6]), _value("k", onnx.TensorProto.INT64, [])]
    return _model("mixed", nodes, inputs, [_value("y", onnx.TensorProto.FLOAT, [2, 4])], weights)


#: model builder, refused node, its op, the word its refusal names (the input or attribute), inputs to run it with.
CASES = {
    "roi_align": (roi_align_model, "roi", "RoiAlign", "sampling_ratio", {}),
    "cumsum_data_axis": (cumsum_model, "cumsum", "CumSum", "axis", {"axis": np.int64(1)}),
    "trilu_data_k": (trilu_model, "trilu", "Trilu", "k", {"k": np.int64(-1)}),
    "resize_cubic": (resize_model, "resize", "Resize", "cubic", {}),
}


@pytest.fixture(scope="module")
def workloads():
    import dcaccel

    return {name: dcaccel.load(build(), name=name) for name, (build, *_) in CASES.items()}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """The mixed model as a workload and as a file."""
    import dcaccel

    path = tmp_path_factory.mktemp("refused") / "mixed.onnx"
    onnx.save(mixed_model(), path)
    return dcaccel.load(mixed_model(), name="mixed"), str(path)


@pytest.mark.parametrize("case", CASES)
def test_opaque_reasons_list_the_refused_node_with_its_refusal(case, workloads):
    from dcaccel.transforms.lower import opaque_nodes, opaque_reasons

    _, node, op, word, _ = CASES[case]
    sdfg = workloads[case].sdfg
    (name, opaque), *others = opaque_reasons(sdfg).items()
    assert (name, opaque.op, opaque.refused_by, others) == (node, op, "canonical", [])
    assert word in opaque.reason and opaque.why == f"canonical refuses it: {opaque.reason}"
    assert opaque_nodes(sdfg) == {node: op}


@pytest.mark.parametrize("case", CASES)
def test_strict_refuses_the_refused_node_in_one_line(case, workloads):
    """``refuse_opaque`` (the CLI's ``--strict``) and ``lower(..., strict=True)`` raise the check's refusal."""
    from dcaccel.errors import UnsupportedOpError
    from dcaccel.transforms.lower import lower, opaque_reasons, refuse_opaque

    _, node, op, _, _ = CASES[case]
    expected = f"unsupported op {op} (node '{node}'): {opaque_reasons(workloads[case].sdfg)[node].reason}"
    for refuse in (lambda: refuse_opaque(workloads[case].sdfg), lambda: lower(workloads[case], strict=True)):
        with pytest.raises(UnsupportedOpError) as refusal:
            refuse()
        assert str(refusal.value) == expected and "\n" not in expected


@pytest.mark.parametrize("key", ["op", "node"])
@pytest.mark.parametrize("case", CASES)
def test_a_chosen_implementation_that_refuses_the_node_is_raised(case, key, workloads):
    """The user named the node (or its op type) in ``choices``: no fallback, lowering and the listing raise."""
    from dcaccel.errors import UnsupportedOpError
    from dcaccel.transforms.lower import lower, opaque_reasons

    _, node, op, _, _ = CASES[case]
    choices = {op if key == "op" else node: "canonical"}
    for run in (lambda: lower(workloads[case], choices), lambda: opaque_reasons(workloads[case].sdfg, choices)):
        with pytest.raises(UnsupportedOpError, match=rf"^unsupported op {op} \(node '{node}'\): "):
            run()


@pytest.mark.slow
def test_the_sweep_warns_of_the_refused_nodes_with_their_reasons(mixed):
    from dcaccel.exploration.load import report_opaque
    from dcaccel.transforms.lower import OpaqueOpWarning, opaque_reasons

    workload, _ = mixed
    reasons = opaque_reasons(workload.sdfg)
    assert list(reasons) == ["roi", "trilu"]
    with pytest.warns(OpaqueOpWarning) as caught:
        report_opaque(workload, strict=False)
    (warning,) = caught
    assert str(warning.message).endswith(f"roi (RoiAlign: {reasons['roi'].why}), trilu (Trilu: {reasons['trilu'].why})")


def test_a_partition_annotates_the_refused_nodes_for_the_host_with_their_reasons(mixed):
    from dcaccel.architecture import load as load_architecture
    from dcaccel.architecture.links import host_of
    from dcaccel.transforms.lower import opaque_reasons
    from dcaccel.transforms.offload import annotations_of

    workload, _ = mixed
    arch = load_architecture("cgra")
    _, annotations = annotations_of(workload, arch, host_of(arch))
    reasons = opaque_reasons(workload.sdfg)
    for node in ("roi", "trilu"):
        assert (annotations[node].target, annotations[node].offloaded) == (host_of(arch), False)
        assert annotations[node].reason == reasons[node].why
    assert annotations["fc"].offloaded


@pytest.mark.slow
def test_verify_strict_refuses_the_first_refused_node_in_one_line(mixed, capsys):
    from dcaccel.cli import main
    from dcaccel.transforms.lower import opaque_reasons

    workload, path = mixed
    assert main(["verify", path, "--strict"]) == 2
    captured = capsys.readouterr()
    reason = opaque_reasons(workload.sdfg)["roi"].reason
    assert (captured.out, captured.err) == (
        "",
        f"dcaccel verify: error: unsupported op RoiAlign (node 'roi'): {reason}\n",
    )


@pytest.mark.slow
def test_info_names_the_refused_nodes_as_opaque_tasks_with_their_reasons(mixed, capsys):
    from dcaccel.cli import main
    from dcaccel.transforms.lower import describe_opaque, opaque_reasons

    workload, path = mixed
    assert main(["info", path]) == 0
    closing = capsys.readouterr().out.splitlines()[-1]
    assert closing.startswith("opaque tasks ") and closing.endswith(describe_opaque(opaque_reasons(workload.sdfg)))


@pytest.fixture(scope="module")
def lowered(workloads):
    from dcaccel.transforms.lower import OpaqueOpWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        programs = {name: workload.lower({}) for name, workload in workloads.items()}
    return programs, [str(w.message) for w in caught if issubclass(w.category, OpaqueOpWarning)]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_lowering_makes_the_refused_node_a_host_task_with_its_reason(case, workloads, lowered):
    from dcaccel.transforms.host import HOST_IMPLEMENTATION
    from dcaccel.transforms.lower import opaque_reasons
    from dcaccel.transforms.opaque_mark import is_opaque

    _, node, op, _, _ = CASES[case]
    program = lowered[0][case]
    reasons = opaque_reasons(workloads[case].sdfg)
    assert (program.opaque, program.opaque_reasons) == ({node: op}, reasons)
    assert program.implementations[node] == HOST_IMPLEMENTATION
    assert [n.label for n, _ in program.sdfg.all_nodes_recursive() if is_opaque(n)] == [node]
    assert any(message.endswith(f"{node} ({op}: {reasons[node].why})") for message in lowered[1])


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_the_host_task_runs_and_matches_onnxruntime(case, workloads, lowered):
    import dcaccel

    _, _, _, _, given = CASES[case]
    workload = workloads[case]
    report = dcaccel.verify(workload, lowered[0][case], inputs=workload.random_inputs(0) | given)
    assert report.reference == "onnxruntime" and len(report.outputs) == 1
    assert report.passed, report.outputs


@pytest.mark.slow
def test_partition_lists_the_refused_nodes_on_the_host_and_verify_arch_passes(mixed, capsys):
    """``dcaccel partition`` on the CGRA: the RoiAlign and the Trilu run on the host, each row ending in its
    refusal, the matrix product on the mesh; the partitioned program verifies against onnxruntime."""
    from dcaccel.cli import main
    from dcaccel.transforms.lower import opaque_reasons

    workload, path = mixed
    reasons = opaque_reasons(workload.sdfg)
    assert main(["partition", path, "--arch", "cgra"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines() if line.split()}
    for node, op in (("roi", "RoiAlign"), ("trilu", "Trilu")):
        assert rows[node][:3] == [node, op, "host"]
        assert " ".join(rows[node][3:]).endswith(reasons[node].why)
    assert rows["fc"][2] != "host"
    assert main(["verify", path, "--arch", "cgra"]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.slow
def test_a_sweep_composes_the_dags_around_a_refused_node():
    """The sweep's composer resolves a refused node as lowering does (an opaque task, no implementation), so the
    fragments of the covering lowerings compose another assignment's DAG, the whole-program extraction's."""
    import dcaccel
    from dcaccel.dag.compose import Composer
    from dcaccel.dag.extract import Granularity, extract
    from dcaccel.exploration.dags import expansions_for
    from dcaccel.transforms.lower import OpaqueOpWarning, lower

    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="fc1"),
        helper.make_node("Trilu", ["m", "k"], ["t"], name="trilu", upper=0),
        helper.make_node("MatMul", ["t", "w"], ["y"], name="fc2"),
    ]
    inputs = [_value("x", onnx.TensorProto.FLOAT, [4, 4]), _value("k", onnx.TensorProto.INT64, [])]
    model = _model(
        "around", nodes, inputs, [_value("y", onnx.TensorProto.FLOAT, [4, 4])], [numpy_helper.from_array(WEIGHT, "w")]
    )
    workload = dcaccel.load(model, name="around")
    composer = Composer(workload, expansions_for(workload))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpaqueOpWarning)
        for shape in ("mv", "lmv"):
            composer.add(lower(workload, {"MatMul": shape}, expansions=expansions_for(workload)), f"MatMul={shape}")
        choices = {"fc1": "mv", "fc2": "lmv"}
        whole = extract(lower(workload, choices), Granularity.parse("task"), "exact")
        composed = composer.dag(choices, Granularity.parse("task"), "exact")
    assert composer.reason is None and composer.implementations(choices) == {**choices, "trilu": None}
    assert composed is not None and composed.to_json() == whole.to_json()


def test_a_node_whose_imported_shape_is_not_its_op_s_is_refused_not_sent_to_the_host(workloads, monkeypatch):
    """A check that finds the imported output shape is not the op's (ONNX's shape inference got it wrong, as for
    a Resize over some ``axes``): onnxruntime would write another shape than the program holds, so the refusal is
    raised in one line instead of a host task that fails at run time."""
    from dcaccel.errors import ImportedShapeError
    from dcaccel.expansions.node import wrong_shape
    from dcaccel.frontend.ops import library_nodes
    from dcaccel.transforms import lower as lowering

    (node, state), *_ = library_nodes(workloads["resize_cubic"].sdfg)
    expansion = lowering.implementation_of(node, "canonical").expansion

    def check(node, state, sdfg):
        raise wrong_shape(node, "imported output shape [2, 3] != [1, 1, 6, 8]")

    monkeypatch.setattr(expansion, "check", check)
    with pytest.raises(ImportedShapeError, match=r"^unsupported op Resize \(node 'resize'\): imported output shape"):
        lowering.opaque_node(node, state, {})
