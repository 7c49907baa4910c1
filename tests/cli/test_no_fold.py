"""``--no-fold``: every command that loads a model can keep its graph as written (no compilation)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import dcaccel.cli.models
import dcaccel.errors
from dcaccel.cli import build_parser, main

#: The commands that load a model, with the arguments each needs besides MODEL.
COMMANDS = [
    ["info"],
    ["verify"],
    ["dag"],
    ["partition", "--arch", "cgra"],
    ["explore"],
    ["map"],
    ["measure", "--out", "rows.jsonl"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
@pytest.mark.parametrize(("flags", "fold"), [([], True), (["--no-fold"], False)], ids=["default", "no-fold"])
def test_every_model_command_takes_no_fold(command, flags, fold):
    args = build_parser().parse_args([*command, "model.onnx", *flags])
    assert args.fold is fold


@pytest.fixture(scope="module")
def conv_norm(tmp_path_factory):
    """``y = BatchNormalization(Conv(x))`` on a 1x2x4x4 input, as an ONNX file."""
    rng = np.random.default_rng(0)
    arrays = {
        "w": rng.normal(size=(3, 2, 1, 1)),
        "scale": rng.normal(size=3),
        "bias": rng.normal(size=3),
        "mean": rng.normal(size=3),
        "var": rng.uniform(0.5, 2.0, size=3),
    }
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
            helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"], name="norm"),
        ],
        "conv_norm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])],
        [numpy_helper.from_array(value.astype(np.float32), name) for name, value in arrays.items()],
    )
    path = tmp_path_factory.mktemp("fold") / "conv_norm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


@pytest.mark.parametrize(("flags", "ops"), [([], ["Conv"]), (["--no-fold"], ["Conv", "BatchNormalization"])])
def test_info_lists_the_batch_norm_only_under_no_fold(capsys, monkeypatch, conv_norm, flags, ops):
    folds = []
    resolve = dcaccel.cli.models.resolve

    def recorded(spec, **options):
        folds.append(options["fold"])
        return resolve(spec, **options)

    monkeypatch.setattr(dcaccel.cli.models, "resolve", recorded)
    assert main(["info", conv_norm, *flags]) == 0
    listed = [line.split()[1] for line in capsys.readouterr().out.splitlines() if line.startswith(("conv", "norm"))]
    assert listed == ops
    assert folds == [not flags]


@pytest.mark.parametrize("command", [c for c in COMMANDS if c[0] in ("verify", "dag", "partition", "measure")])
@pytest.mark.parametrize("flags", [[], ["--no-fold"]], ids=["default", "no-fold"])
def test_the_model_reaches_resolve_folded_or_not(capsys, monkeypatch, tmp_path, command, flags):
    """``measure`` read ``--no-fold`` and loaded the model folded all the same."""
    folds = []

    def recorded(spec, **options):
        folds.append(options["fold"])
        raise dcaccel.errors.DcaccelError("stop after resolve")

    monkeypatch.setattr(dcaccel.cli.models, "resolve", recorded)
    monkeypatch.chdir(tmp_path)
    assert main([*command, "model.onnx", *flags]) == 2
    assert folds == [not flags]
    assert "stop after resolve" in capsys.readouterr().err
