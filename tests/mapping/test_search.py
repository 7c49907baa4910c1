"""The mapping search on small layers: decoupled against exhaustive, and the report."""

import numpy as np
import onnx
import pytest

from dcaccel.errors import DcaccelError
from dcaccel.mapping import map_workload, parse


class _Searched(dict):
    """conv-seed mapped on eyeriss by each search, when first read (the exhaustive one takes seconds)."""

    def __missing__(self, search):
        self[search] = map_workload("conv-seed", "eyeriss", search=search, objective="edp", pes=(16,), tile_limit=3)
        return self[search]


@pytest.fixture(scope="module")
def seed_results():
    return _Searched()


@pytest.mark.slow
def test_decoupled_is_near_the_exhaustive_optimum_with_fewer_schedules(seed_results):
    decoupled, exhaustive = seed_results["decoupled"], seed_results["exhaustive"]
    assert decoupled.space_size == exhaustive.space_size
    assert exhaustive.evaluations == decoupled.layers[0].fitting * 4  # every fitting choice × 2 fusions × 2 schedulers
    # the placements of the first candidate, the other candidates (at most 4 groups of 3 task tiles) with
    # the best of them, then the other placements of the best candidate
    assert 4 <= decoupled.evaluations <= 4 + (4 * 3 - 1) + 3
    assert exhaustive.objective <= decoupled.objective <= 1.05 * exhaustive.objective


@pytest.fixture(scope="module")
def twin_convs():
    """Conv → Relu → Conv of the same shapes: the second conv shares the first's search."""
    import torch

    from dcaccel.frontend import load

    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(2, 2, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(2, 2, 3, padding=1)
    )
    return load(module.eval(), torch.zeros(1, 2, 6, 6), name="twins")


@pytest.mark.slow
def test_every_node_is_named_and_counted(twin_convs):
    result = map_workload(twin_convs, "eyeriss", pes=(4,), top_k=1, tile_limit=2)
    table = result.table()
    assert list(table["op_type"]) == ["Conv", "Relu", "Conv"]
    first, relu, second = table.to_dict("records")
    assert second["shared_with"] == first["layer"] != second["layer"] and second["evaluations"] == 0
    for row in (first, relu, second):
        mapping = result.best[row["layer"]]
        assert mapping.node == row["layer"] and parse(row["mapping"]) == mapping
    assert parse(second["mapping"]) == parse(first["mapping"].replace(first["layer"], second["layer"], 1))
    assert result.best[relu["layer"]].implementation == "canonical" and relu["evaluations"] == 2 * 1 * 2
    assert result.total.makespan_cycles == table["makespan_cycles"].sum() > first["makespan_cycles"] * 2
    assert result.total.energy_pj == pytest.approx(table["energy_pj"].sum())
    assert result.uncounted == {} and result.to_json()["uncounted"] == {}


@pytest.mark.slow
def test_a_node_that_does_not_lower_alone_is_named_uncounted(twin_convs, monkeypatch):
    import dcaccel.mapping.search as search

    def refuse(layer, *arguments):
        raise DcaccelError(f"unsupported op {layer.op_type} (node '{layer.node}')\nsecond line")

    monkeypatch.setattr(search, "place_canonical", refuse)
    result = map_workload(twin_convs, "eyeriss", pes=(4,), top_k=1, tile_limit=2)
    ((node, reason),) = result.uncounted.items()
    assert reason == f"unsupported op Relu (node '{node}')" and node not in result.best
    assert list(result.table()["op_type"]) == ["Conv", "Conv"]
    assert result.total.makespan_cycles == 2 * result.layers[0].makespan_cycles


def export_lstm(path) -> None:
    """Write to ``path`` an ONNX model Gemm → Relu → LSTM → Gemm on a sequence of 3 steps: a recurrent layer
    (dcaccel/expansions/recurrent.py) in the middle of a model the search maps. PyTorch's exporter computes the
    LSTM's initial states with ``Shape`` → ``Gather`` → ``Concat`` → ``Expand`` chains."""
    import warnings

    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.lstm, self.fc2 = torch.nn.Linear(4, 8), torch.nn.LSTM(8, 8), torch.nn.Linear(8, 2)

        def forward(self, x):
            steps, _ = self.lstm(torch.relu(self.fc1(x)).unsqueeze(1))
            return self.fc2(steps.squeeze(1))

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's advice on LSTM batch sizes
        torch.onnx.export(Net().eval(), (torch.zeros(3, 4),), str(path), dynamo=False, opset_version=18)


def export_unrunnable_op(path) -> None:
    """Write to ``path`` an ONNX model (opset 22) Gemm → Relu → RandomUniformLike → Mul (by the Relu's output) →
    Gemm on a 3 × 4 input: an op nothing runs in the middle (no dcaccel or DaCe implementation, and onnxruntime,
    which runs such an op as a host task, dcaccel/transforms/host.py, has no kernel for its version 22)."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((3, 2)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("RandomUniformLike", ["r"], ["u"], name="noise"),
        helper.make_node("Mul", ["r", "u"], ["s"], name="scale"),
        helper.make_node("Gemm", ["s", "w2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes,
        "noise",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 2])],
        weights,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=9), str(path))


#: What lowering and the search say of the RandomUniformLike of :func:`export_unrunnable_op`.
UNRUNNABLE_REFUSAL = (
    "unsupported op RandomUniformLike (node 'noise'): onnxruntime cannot run it on the host: [ONNXRuntimeError] : "
    "9 : NOT_IMPLEMENTED : Could not find an implementation for RandomUniformLike(22) node with name ''"
)


@pytest.fixture(scope="module")
def unrunnable_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("noise") / "noise.onnx"
    export_unrunnable_op(path)
    return str(path)


@pytest.fixture(scope="module")
def lstm_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("lstm") / "lstm.onnx"
    export_lstm(path)
    return str(path)


def test_an_op_nothing_runs_is_named_uncounted_and_the_rest_mapped(unrunnable_onnx):
    """The RandomUniformLike does not lower alone and is named with its reason, every other node is counted."""
    result = map_workload(unrunnable_onnx, "eyeriss", pes=(4,), top_k=1, tile_limit=2)
    assert result.uncounted == {"noise": UNRUNNABLE_REFUSAL}
    table = result.table()
    assert list(table["op_type"]) == ["Gemm", "Relu", "Mul", "Gemm"]
    assert set(result.best) == set(table["layer"]) and result.total.makespan_cycles == table["makespan_cycles"].sum()


@pytest.mark.slow
def test_a_recurrent_layer_is_counted(lstm_onnx):
    """The layers are the program's nodes (the exporter's shape chains folded away); the LSTM lowers alone (its
    gate products through MMM) and is counted like every other node."""
    result = map_workload(lstm_onnx, "eyeriss", pes=(4,), top_k=1, tile_limit=2)
    assert result.uncounted == {}
    table = result.table()
    assert list(table["op_type"]) == ["Gemm", "Relu", "Unsqueeze", "LSTM", "Squeeze", "Squeeze", "Gemm"]
    assert set(result.best) == set(table["layer"]) and result.total.makespan_cycles == table["makespan_cycles"].sum()


@pytest.mark.slow
def test_a_long_search_shows_its_progress(capsys):
    map_workload("conv-seed", "eyeriss", pes=(4,), top_k=1, tile_limit=2, progress=True)
    assert "map conv-seed: 100%" in capsys.readouterr().err


def test_report(seed_results):
    result = seed_results["decoupled"]
    data = result.to_json()
    assert set(data) >= {"space_size", "evaluations", "objective", "best", "seconds"}
    ((node, text),) = data["best"].items()
    assert parse(text) == result.best[node]
    row = result.table().iloc[0]
    assert row["objective"] == pytest.approx(result.objective)
    assert row["makespan_cycles"] * row["energy_pj"] == pytest.approx(result.objective)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"objective": "area"}, "unknown objective"),
        ({"search": "random"}, "unknown search"),
        ({"top_k": 0}, "top_k"),
        ({"arch": "abstract"}, "no on-chip capacity"),
    ],
)
def test_errors(arguments, message):
    with pytest.raises(DcaccelError, match=message):
        map_workload("conv-seed", **{"arch": "eyeriss", **arguments})
