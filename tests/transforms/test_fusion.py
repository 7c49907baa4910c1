"""Fusion of element-wise task chains (dcaccel.transforms.fusion) and what it changes in the DAG."""

import dace
import pytest

from dcaccel import workloads
from dcaccel.buffers import BufferReason, mark_buffer
from dcaccel.dag import metrics
from dcaccel.dag.extract import extract
from dcaccel.transforms.fusion import fuse_elementwise
from tests.dag import programs


def summary(dag) -> dict:
    return {
        "tasks": len(dag.tasks),
        "buffers": len(dag.buffers),
        "work": metrics.work(dag),
        "io_volume": metrics.io_volume(dag),
    }


def top_level_maps(sdfg) -> int:
    return sum(
        1
        for state in sdfg.states()
        for node in state.nodes()
        if isinstance(node, dace.nodes.MapEntry) and state.entry_node(node) is None
    )


@pytest.mark.parametrize(
    "size", [pytest.param(1, marks=pytest.mark.slow), 8, pytest.param(100, marks=pytest.mark.slow)]
)
def test_a_streamed_chain_becomes_one_task(size):
    sdfg = programs.chain_program(size)
    before = summary(extract(sdfg))
    label = {node.guid: node.map.label for state in sdfg.states() for node in state.nodes() if hasattr(node, "map")}
    fusions = fuse_elementwise(sdfg)
    assert [(label[f.kept], label[f.merged]) for f in fusions] == [("Inc_map", "Double_map"), ("Inc_map", "Dec_map")]
    after = extract(sdfg)
    after.validate()
    assert before == {"tasks": 3, "buffers": 2, "work": 3 * size, "io_volume": 2 * size}
    assert summary(after) == {"tasks": 1, "buffers": 2, "work": size, "io_volume": 2 * size}
    assert [after.label(v) for v in after.tasks] == ["Dec_map"]  # DaCe keeps the smallest label


@pytest.mark.parametrize("size", [pytest.param(1, marks=pytest.mark.slow), 8])
def test_a_fused_layer_output_leaves_the_io(size):
    """t1 as a LAYER_OUTPUT buffer costs its writes and reads (2·size); fused, it is gone."""
    sdfg = programs.chain_program(size)
    mark_buffer(sdfg.arrays["t1"], BufferReason.LAYER_OUTPUT)
    assert summary(extract(sdfg)) == {"tasks": 3, "buffers": 3, "work": 3 * size, "io_volume": 4 * size}
    assert len(fuse_elementwise(sdfg)) == 2
    assert summary(extract(sdfg)) == {"tasks": 1, "buffers": 2, "work": size, "io_volume": 2 * size}


@pytest.mark.parametrize("reason", [BufferReason.REUSE, BufferReason.REORDER, BufferReason.ACCUMULATE])
def test_other_buffers_are_not_fused_away(reason):
    sdfg = programs.chain_program()
    mark_buffer(sdfg.arrays["t1"], reason)
    assert len(fuse_elementwise(sdfg)) == 1
    dag = extract(sdfg)
    assert [dag.label(v) for v in dag.tasks] == ["Inc_map", "Dec_map"]
    assert "t1" in {dag.label(b) for b in dag.buffers}


@pytest.mark.parametrize("shape", ["mv", "op", "lmv"])
def test_task_maps_and_reductions_are_not_fused(shape):
    sdfg = programs.mmm_program(shape, 3, 4, 5)
    maps = top_level_maps(sdfg)
    assert fuse_elementwise(sdfg) == []
    assert top_level_maps(sdfg) == maps


@pytest.mark.slow
def test_extract_fuses_a_copy():
    sdfg = programs.chain_program()
    fused = extract(sdfg, fusion=True)
    assert top_level_maps(sdfg) == 3
    assert summary(fused) == summary(extract(sdfg)) | {"tasks": 1, "work": 8}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:extract. container .* re-reads")
def test_lenet_relu_and_gemm_epilogues_fuse(caplog):
    """In LeNet the Relus of the Gemms fuse into the element-wise task before them (Gather + AddBias);
    under the exact rule the fused Gemm epilogue reads one column per MV task and the bias whole, so
    the MV outputs become buffer nodes. The Relus of the convolutions stay: ReshapeOut iterates another
    index space (groups and batch apart) and the MaxPool after them reads a buffer filled by a plain copy,
    which is no task to fuse with."""
    lowered = workloads.get("lenet").lower()
    before = extract(lowered)
    with caplog.at_level("DEBUG", logger="dcaccel.dag.extract"):
        after = extract(lowered, fusion=True)
    assert "unequal in-volumes" in caplog.text
    after.validate()
    fused = {after.node(v).info.map for v in after.tasks}
    assert sorted(label for label in fused if "relu" in label.lower()) == ["Relu_0_relu_map", "Relu_1_relu_map"]
    assert len(after.tasks) < len(before.tasks)
    assert metrics.work(after) < metrics.work(before)
