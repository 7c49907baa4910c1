"""Per-layer breakdown of a task DAG: the layers add up to the whole DAG."""

import pytest

from dcaccel.dag import io_volume, work
from dcaccel.dag.extract import extract
from dcaccel.exploration.layers import layer_breakdown
from dcaccel.exploration.plots import plot_layers


@pytest.fixture(
    scope="module",
    params=[pytest.param("mv", marks=pytest.mark.slow), pytest.param("op", marks=pytest.mark.slow), "lmv"],
)
def lenet_dag(request, lenet):
    return extract(lenet.lower({"Conv": request.param, "Gemm": request.param}))


def test_layers_add_up_to_the_dag(lenet_dag):
    layers = layer_breakdown(lenet_dag)
    assert layers["tasks"].sum() == len(lenet_dag.tasks)
    assert layers["work"].sum() == work(lenet_dag)
    assert layers["io_volume"].sum() == io_volume(lenet_dag)


def test_layers_are_the_program_nodes_in_order(lenet_dag):
    layers = layer_breakdown(lenet_dag)
    assert layers["layer"].tolist() == [
        "conv1", "Relu_0", "MaxPool_0", "conv2", "Relu_1", "MaxPool_1", "Reshape_0",
        "fc1", "Relu_2", "fc2", "Relu_3", "fc3", "Softmax_0",
    ]  # fmt: skip
    assert set(layers.loc[layers["op_type"].isin(["Conv", "Gemm"]), "implementation"]) == {
        lenet_dag.nodes[next(iter(lenet_dag.tasks))].info.implementation
    }


@pytest.mark.parametrize(("shape", "tasks", "io"), [("mv", 582, 129_474), ("op", 30, 222_936), ("lmv", 12, 150_936)])
def test_a_single_conv_is_one_layer_with_the_seed_io(shape, tasks, io, conv_seed):
    layers = layer_breakdown(extract(conv_seed.lower({"Conv": shape})))
    assert layers[["layer", "op_type", "implementation", "tasks", "io_volume"]].values.tolist() == [
        ["Conv_0", "Conv", shape, tasks, io]
    ]


def test_layer_plot_has_a_bar_per_layer(lenet_dag):
    figure = plot_layers(layer_breakdown(lenet_dag))
    assert [len(axes.patches) for axes in figure.axes] == [13, 13]
