"""The host fallback (dcaccel/transforms/host.py): an ONNX op neither dcaccel nor DaCe can expand runs through
onnxruntime, called back from the compiled program. A model with such ops in the middle (MeanVarianceNormalization
and RMSNormalization, ONNX functions imported as written, :func:`~dcaccel.frontend.functions.kept_as_written`)
lowers to host tasks, compiles, runs and verifies (lowered and unlowered), extracts a valid DAG whose host tasks
carry their tensors' volumes and their ops' arithmetic, schedules, is refused by ``--strict`` in one line, and
partitions with those ops on the host; ``verify --arch`` passes.
"""

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

ROWS, FEATURES, HIDDEN, CLASSES = 4, 8, 6, 3
HOSTED = {"mvn": "MeanVarianceNormalization", "rms": "RMSNormalization"}


def hosted_model() -> onnx.ModelProto:
    """x (4 × 8) → MatMul → MeanVarianceNormalization (of each row) → Add (with its input) → RMSNormalization (of
    each row, scaled) → MatMul → y (4 × 3): two ops without any implementation between two matrix products, when
    imported under :func:`~dcaccel.frontend.functions.kept_as_written` (else their function bodies replace them)."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((FEATURES, HIDDEN)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((HIDDEN, CLASSES)).astype(np.float32), "w2"),
        numpy_helper.from_array(rng.standard_normal(HIDDEN).astype(np.float32), "scale"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("MeanVarianceNormalization", ["h"], ["m"], name="mvn", axes=[1]),
        helper.make_node("Add", ["m", "h"], ["s"], name="add"),
        helper.make_node("RMSNormalization", ["s", "scale"], ["t"], name="rms", axis=-1),
        helper.make_node("MatMul", ["t", "w2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes,
        "hosted",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [ROWS, FEATURES])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [ROWS, CLASSES])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def test_a_host_call_runs_its_one_node_model_into_the_outputs():
    """HostCall writes onnxruntime's results into the arrays it is given (as the compiled program's callback)."""
    from dcaccel.transforms.host import HostCall

    node = helper.make_node("Hardmax", ["h"], ["m"], axis=-1)
    graph = helper.make_graph(
        [node],
        "one",
        [helper.make_tensor_value_info("h", onnx.TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("m", onnx.TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)
    out = np.full((2, 3), 7, np.float32)
    HostCall(model.SerializeToString(), ("h",), ("m",), "Hardmax", "one")(
        np.array([[1, 3, 2], [0, -1, -2]], np.float32), out
    )
    np.testing.assert_array_equal(out, [[0, 1, 0], [1, 0, 0]])


def test_a_host_call_takes_a_scalar_input_as_a_python_number():
    """A scalar input (Trilu's ``k`` as a graph input) reaches the callback by value, a Python int."""
    from dcaccel.transforms.host import HostCall

    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=0)
    graph = helper.make_graph(
        [node],
        "one",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 3]),
            helper.make_tensor_value_info("k", onnx.TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=9)
    out = np.zeros((3, 3), np.float32)
    HostCall(model.SerializeToString(), ("x", "k"), ("y",), "Trilu", "one")(np.ones((3, 3), np.float32), -1, out)
    np.testing.assert_array_equal(out, np.tril(np.ones((3, 3)), -1))


def pool_model(output_shape: list[int]) -> onnx.ModelProto:
    """MaxRoiPool (2 × 2 bins) of a 1 × 1 × 4 × 4 float tensor ``x`` over one region ``rois`` (a graph input: batch
    index, then corners x1, y1, x2, y2) into ``y`` (shape as given)."""
    graph = helper.make_graph(
        [helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], name="pool", pooled_shape=[2, 2])],
        "pool",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 4, 4]),
            helper.make_tensor_value_info("rois", onnx.TensorProto.FLOAT, [1, 5]),
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, output_shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)


@pytest.mark.parametrize(
    ("batch", "output_shape", "detail"),
    [
        (5, [1, 1, 2, 2], "onnxruntime failed on the host: [ONNXRuntimeError]"),  # image 5 of a batch of 1
        (0, [1, 1, 3, 3], "onnxruntime failed on the host: output 'y' has shape [1, 1, 2, 2], not [1, 1, 3, 3]"),
    ],
    ids=["onnxruntime_raises", "result_of_another_size"],
)
def test_a_failing_host_call_is_raised_after_the_program_call_naming_op_and_node(batch, output_shape, detail):
    """Inside the compiled program a callback's exception is dropped by ctypes (the outputs stay as they were): the
    host call records it and :func:`raising_host_failures` raises it in one line when the program call returns."""
    from dcaccel.errors import UnsupportedOpError
    from dcaccel.transforms.host import HostCall, raising_host_failures

    model = pool_model(output_shape).SerializeToString()
    out = np.zeros(output_shape, np.float32)
    call = HostCall(model, ("x", "rois"), ("y",), "MaxRoiPool", "pool")
    with pytest.raises(UnsupportedOpError) as failure, raising_host_failures():
        call(np.ones((1, 1, 4, 4), np.float32), np.array([[batch, 0, 0, 3, 3]], np.float32), out)
    message = str(failure.value)
    assert message.startswith(f"unsupported op MaxRoiPool (node 'pool'): {detail}") and "\n" not in message
    with raising_host_failures():  # a failure is raised once, not again after the next program call
        pass


@pytest.mark.slow
def test_a_compiled_host_task_whose_onnxruntime_call_fails_raises_instead_of_leaving_zeros():
    """MaxRoiPool (no dcaccel or DaCe implementation: a host task) of a region in image 5 of a batch of 1:
    onnxruntime raises inside the compiled program's callback; the run ends in one line naming op and node, not in
    an output of zeros."""
    import dcaccel
    from dcaccel.errors import UnsupportedOpError
    from dcaccel.frontend.execution import run_sdfg

    workload = dcaccel.load(pool_model([1, 1, 2, 2]), name="pool")
    feed = {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)}
    with pytest.warns(UserWarning, match="MaxRoiPool"):
        lowered = workload.lower({})
    np.testing.assert_array_equal(
        run_sdfg(lowered.sdfg, workload, feed | {"rois": [[0, 0, 0, 3, 3]]})["y"], [[[[5, 7], [13, 15]]]]
    )
    with pytest.raises(UnsupportedOpError, match=r"^unsupported op MaxRoiPool \(node 'pool'\): onnxruntime failed"):
        run_sdfg(lowered.sdfg, workload, feed | {"rois": [[5, 0, 0, 3, 3]]})


@pytest.mark.slow
def test_an_op_onnxruntime_has_no_kernel_for_is_refused_when_lowered():
    """GlobalLpPool of opset 22 (no dcaccel or DaCe implementation; onnxruntime's CPU provider stops at its
    version 2): refused in one line when its host task is built, instead of a run whose callback fails."""
    import dcaccel
    from dcaccel.errors import UnsupportedOpError

    graph = helper.make_graph(
        [helper.make_node("GlobalLpPool", ["x"], ["y"], name="pool")],
        "pool",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 3, 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2, 1, 1])],
    )
    workload = dcaccel.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=9))
    with pytest.raises(UnsupportedOpError) as refusal:
        workload.lower({})
    assert str(refusal.value).startswith(
        "unsupported op GlobalLpPool (node 'pool'): onnxruntime cannot run it on the host: [ONNXRuntimeError] : 9 : "
        "NOT_IMPLEMENTED"
    )


@pytest.fixture(scope="module")
def workload():
    import dcaccel
    from dcaccel.frontend.functions import kept_as_written

    with kept_as_written():
        return dcaccel.load(hosted_model(), name="hosted")


@pytest.fixture(scope="module")
def lowered(workload):
    import warnings

    from dcaccel.transforms.lower import OpaqueOpWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpaqueOpWarning)
        return workload.lower({"MatMul": "lmv"})


@pytest.mark.slow
def test_the_ops_without_implementation_become_host_tasks(lowered):
    from dace.sdfg import nodes

    from dcaccel.transforms.host import HOST_IMPLEMENTATION
    from dcaccel.transforms.opaque_mark import is_opaque

    assert lowered.opaque == HOSTED
    assert {name: lowered.implementations[name] for name in HOSTED} == dict.fromkeys(HOSTED, HOST_IMPLEMENTATION)
    tasks = {n.label: n for n, _ in lowered.sdfg.all_nodes_recursive() if is_opaque(n)}
    assert set(tasks) == set(HOSTED) and all(isinstance(t, nodes.Tasklet) for t in tasks.values())
    assert all(t.code.as_string.startswith("__dcaccel_host_") for t in tasks.values())


@pytest.mark.slow
def test_host_tasks_carry_their_tensors_volumes_and_one_op_per_output_element(lowered):
    """Each host task reads and writes 4 × 6 tensors (RMSNormalization's scale is a weight, no task's output): in-
    and out-volumes 24, 24 operations, no MACs."""
    from dcaccel.dag import extract

    dag = extract(lowered)
    dag.validate()
    hosted = {dag.info(t).node: t for t in dag.tasks if dag.info(t).opaque}
    assert set(hosted) == set(HOSTED)
    for task in hosted.values():
        volumes = {dag.volume(p, task) for p in dag.predecessors(task)} | {
            dag.volume(task, s) for s in dag.successors(task)
        }
        assert volumes == {ROWS * HIDDEN}
        assert (dag.info(task).macs or 0, dag.info(task).ops) == (0, ROWS * HIDDEN)

    import dcaccel

    schedule = dcaccel.schedule(dag, 4)
    assert schedule.lower_bound <= schedule.makespan <= schedule.work


@pytest.mark.slow
@pytest.mark.parametrize("program", ["lowered", "unlowered"])
def test_the_program_with_host_tasks_verifies_against_onnxruntime(program, workload, lowered):
    import dcaccel

    report = dcaccel.verify(workload, lowered if program == "lowered" else None)
    assert report.reference == "onnxruntime"
    assert report.passed, report.outputs


@pytest.mark.slow
def test_a_host_task_whose_connectors_name_containers_verifies():
    """MeanVarianceNormalization's connectors are ``X`` and ``Y``, the names of the model's tensors here (as a
    model exported with an output called ``output`` names DeBERTa's Tile's): the host task's connectors take other
    names."""
    import dcaccel
    from dcaccel.frontend.functions import kept_as_written

    graph = helper.make_graph(
        [helper.make_node("MeanVarianceNormalization", ["X"], ["Y"], name="mvn", axes=[1])],
        "clash",
        [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [ROWS, FEATURES])],
        [helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, [ROWS, FEATURES])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=9)
    with kept_as_written():
        workload = dcaccel.load(model, name="clash")
    with pytest.warns(UserWarning, match="MeanVarianceNormalization"):
        lowered = workload.lower({})
    assert lowered.opaque == {"mvn": "MeanVarianceNormalization"}
    report = dcaccel.verify(workload, lowered)
    assert report.passed, report.outputs


@pytest.mark.slow
def test_strict_refuses_the_first_host_op_in_one_line(workload):
    from dcaccel.errors import UnsupportedOpError
    from dcaccel.transforms.lower import lower

    with pytest.raises(UnsupportedOpError) as refusal:
        lower(workload, strict=True)
    assert str(refusal.value) == "unsupported op MeanVarianceNormalization (node 'mvn'): no dcaccel implementation"


@pytest.mark.slow
def test_partition_puts_them_on_the_host_and_verify_arch_passes(tmp_path, capsys):
    """On the CGRA (a mesh with a host CPU), the two ops (imported as written) run on the host with their reason,
    the matrix products and the Add on the mesh; the partitioned program verifies."""
    from dcaccel.cli import main
    from dcaccel.frontend.functions import kept_as_written

    path = tmp_path / "hosted.onnx"
    onnx.save(hosted_model(), path)
    with kept_as_written():
        assert main(["partition", str(path), "--arch", "cgra"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines() if line.split()}
    for name, op in HOSTED.items():
        assert rows[name][:3] == [name, op, "host"]
        assert " ".join(rows[name][3:]).endswith("no canonical implementation")
    assert rows["fc1"][2] != "host"
    with kept_as_written():
        assert main(["verify", str(path), "--arch", "cgra"]) == 0
    assert "PASS" in capsys.readouterr().out
