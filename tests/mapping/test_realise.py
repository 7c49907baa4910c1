"""Every mapping is a program: realised with MapTiling, extracted, and (a sample) compiled and verified."""

import warnings

import pytest

from dcaccel.dag.metrics import work
from dcaccel.frontend import load
from dcaccel.mapping.layers import mapped_layers
from dcaccel.mapping.notation import Mapping
from dcaccel.mapping.realise import TASK_DIMENSION, realise, realised_dag, task_maps
from dcaccel.verification import verify
from dcaccel.workloads import get


@pytest.fixture(scope="module")
def seed_layer():
    layer = mapped_layers(get("conv-seed").onnx_model)[0]
    workload = load(layer.model, name="layer")
    lowered = {impl: workload.lower({"Conv": impl}) for impl in TASK_DIMENSION}
    return workload, lowered, next(iter(lowered["mv"].implementations))


@pytest.mark.parametrize(
    ("implementation", "tile", "tasks"),
    [("mv", 1, 576), ("mv", 64, 9), ("mv", 576, 1), ("op", 5, 5), ("op", 25, 1), ("lmv", 3, 2), ("lmv", 1, 6)],
)
def test_task_granularity_is_the_task_tile(seed_layer, implementation, tile, tasks):
    _, lowered, node = seed_layer
    mapping = Mapping(node, implementation, ((TASK_DIMENSION[implementation], tile),))
    realised = realise(lowered[implementation], mapping)
    ((state, entry),) = task_maps(realised, node)
    assert entry.map.range.num_elements() == tasks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dag = realised_dag(lowered[implementation], mapping)
    task_labels = [dag.nodes[t].label for t in dag.tasks if dag.nodes[t].label.startswith(entry.map.label)]
    assert len(task_labels) == tasks
    assert all(dag.nodes[t].info.node == node for t in dag.tasks)
    # the MACs do not depend on the tiling: the work of the task maps is at least N·K·M = 86,400
    assert work(dag) >= 6 * 25 * 576


def test_a_tile_that_does_not_divide_is_refused(seed_layer):
    _, lowered, node = seed_layer
    with pytest.raises(Exception, match="does not divide"):
        realise(lowered["mv"], Mapping(node, "mv", (("m", 7),)))


@pytest.mark.slow
def test_realised_mappings_compute_the_layer(seed_layer):
    """One compile per sampled mapping: each tiled program against onnxruntime."""
    workload, lowered, node = seed_layer
    for implementation, tile in (("mv", 64), ("op", 5)):
        mapping = Mapping(node, implementation, ((TASK_DIMENSION[implementation], tile),))
        report = verify(workload, realise(lowered[implementation], mapping))
        assert report.passed, report
