"""``dcaccel map``: the table, the JSON object and errors."""

import json

import pytest

from dcaccel.cli import main
from dcaccel.mapping import parse


@pytest.mark.slow
def test_json(capsys):
    status = main(["map", "conv-seed", "--arch", "eyeriss", "--objective", "energy", "--top-k", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0
    # the 4 placements of the first of at most 2 groups × 4 task tiles, the others once, 3 more placements
    assert 4 <= out["evaluations"] <= 4 + (2 * 4 - 1) + 3
    assert out["uncounted"] == {} and set(out["best"]) == {row["layer"] for row in out["layers"]}
    assert out["objective"] == pytest.approx(out["energy_pj"])
    assert out["space_size"] == out["layers"][0]["space_size"] > out["evaluations"]
    assert all(parse(text).pes == 168 for text in out["best"].values())  # without --pes: eyeriss's 168 PEs


@pytest.mark.slow
def test_table_and_errors(capsys):
    assert main(["map", "conv-seed", "--arch", "eyeriss", "--top-k", "1", "--pes", "4"]) == 0
    out = capsys.readouterr().out
    assert "Spatial(4, " in out and "over 1 nodes" in out and "mappings scheduled" in out
    assert main(["map", "conv-seed", "--arch", "abstract"]) == 2
    assert capsys.readouterr().err == (
        "dcaccel map: error: --arch abstract: architecture abstract has no on-chip capacity; give --onchip ELEMENTS\n"
    )
    with pytest.raises(SystemExit):
        main(["map", "conv-seed", "--objective", "area"])


def test_a_model_with_an_op_nothing_runs_lists_it_as_not_counted(tmp_path, capsys):
    from tests.mapping.test_search import UNRUNNABLE_REFUSAL, export_unrunnable_op

    model = tmp_path / "det.onnx"
    export_unrunnable_op(model)
    status = main(["map", str(model), "--arch", "eyeriss", "--top-k", "1", "--pes", "4"])
    out, err = capsys.readouterr()
    assert status == 0 and "Traceback" not in err
    assert out.splitlines()[-1] == f"not counted: noise: {UNRUNNABLE_REFUSAL}"
    assert "over 4 nodes" in out


def test_loopnest_search_on_an_imported_design(capsys):
    """``--search loopnest`` on ZigZag's tpu_like as ``dcaccel arch import zigzag`` wrote it: the seed's
    convolution on the 32×32 array, its MACs exact and its off-chip traffic the compulsory one (weights,
    the input and the output cross once: 150 + 784 + 3,456 bytes)."""
    from pathlib import Path

    design = Path(__file__).parents[2] / "benchmarks" / "data" / "zigzag_tpu_like.arch.yaml"
    assert main(["map", "conv-seed", "--arch", str(design), "--search", "loopnest", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (layer,) = out["layers"]
    assert layer["macs"] == 6 * 25 * 24 * 24 and out["totals"]["macs"] == layer["macs"]
    assert layer["offchip_bytes"] == 150 + 784 + 3456
    assert layer["cycles"] >= layer["ideal_cycles"] == -(-layer["macs"] // 1024)
    assert set(layer["energy_by_memory_pj"]) == {"mac", "rf_128B", "rf_2B", "sram_2MB", "dram"}
    # energy per level and operand: the operands of a memory add up to its energy
    for memory in ("rf_128B", "rf_2B", "sram_2MB", "dram"):
        parts = [entry["energy_pj"] for key, entry in layer["traffic"].items() if key.startswith(f"{memory}.")]
        assert sum(parts) == pytest.approx(layer["energy_by_memory_pj"][memory]) and all(p > 0 for p in parts)
    assert 0 < layer["utilisation"] <= 1
    assert main(["map", "conv-seed", "--arch", str(design), "--search", "loopnest", "--pes", "4"]) == 2
    assert "--pes does not apply to --search loopnest" in capsys.readouterr().err


@pytest.mark.slow
def test_loopnest_whole_network(capsys):
    """``--whole-network`` adds every operator of LeNet on the imported tpu_like, activations kept in its 2 MB
    buffer: the off-chip bytes fall to the weights, the image and the 10 scores; the per-layer rows stay."""
    from pathlib import Path

    design = Path(__file__).parents[2] / "benchmarks" / "data" / "zigzag_tpu_like.arch.yaml"
    assert main(["map", "lenet", "--arch", str(design), "--search", "loopnest", "--whole-network", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    whole = out["whole_network"]
    assert whole["activation_buffer"] == "sram_2MB"
    assert [row["node"] for row in whole["operators"]][:3] == ["conv1", "Relu_0", "MaxPool_0"]
    assert whole["totals"]["macs"] == out["totals"]["macs"] == 281_640
    weights = 150 + 2400 + 30_720 + 10_080 + 840
    assert whole["totals"]["offchip_bytes"] == weights + 28 * 28 + 10 < out["totals"]["offchip_bytes"]
    assert main(["map", "lenet", "--arch", "eyeriss", "--whole-network"]) == 2
    assert "--whole-network applies to --search loopnest only" in capsys.readouterr().err


def test_the_schedule_based_search_refuses_a_node_the_support_rules_refuse(tmp_path, capsys):
    """eyeriss whose PEs run 1×1 and 3×3 convolutions only: the seed's 5×5 Conv is not placed on them."""
    from dcaccel.architecture import load

    spec = load("eyeriss").spec.model_dump(mode="json")
    spec["units"]["pe"]["support"] = [{"op": "Conv", "kernel_shape": [[1, 1], [3, 3]]}]
    design = tmp_path / "eyeriss_small_kernels.yaml"
    design.write_text(json.dumps(spec), encoding="utf-8")
    assert main(["map", "conv-seed", "--arch", str(design), "--top-k", "1", "--pes", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dcaccel map: error: --search decoupled: Conv node '") and "support rules refuse" in err
    assert err.count("\n") == 1
