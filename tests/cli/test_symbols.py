"""``--symbols NAME=VALUE``: the values of a model's symbolic sizes on the command line (no compilation)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dcaccel.cli import main
from dcaccel.cli.models import resolve_model, symbol_values
from dcaccel.errors import DcaccelError
from dcaccel.frontend.load import resolve


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    """``y = Gemm(x, W, b)`` with x of shape [batch, 8] and y of shape [batch, 4]: batch has no value."""
    weights = numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(8, 4) / 32, "W")
    bias = numpy_helper.from_array(np.ones(4, dtype=np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "b"], ["y"], name="fc")],
        "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [weights, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path_factory.mktemp("symbols") / "dense.onnx"
    onnx.save(model, path)
    return str(path)


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    "command", [["info"], ["dag"], ["explore", "--pes", "2"], ["verify"], ["partition", "--arch", "cgra"]]
)
def test_missing_symbol_names_the_flag(capsys, dense, command):
    status, out, err = run(capsys, command[0], dense, *command[1:])
    assert status == 2 and out == ""
    message = "tensor 'x': dimension 'batch' has no value (give it with --symbols batch=VALUE)"
    assert err == f"dcaccel {command[0]}: error: {message}\n"


def test_map_missing_symbol_names_the_flag(capsys, dense):
    status, _, err = run(capsys, "map", dense, "--onchip", "1024")
    assert status == 2
    assert err.endswith("dimension 'batch' has no value (give it with --symbols batch=VALUE)\n")


def test_info_with_symbols(capsys, dense):
    status, out, err = run(capsys, "info", dense, "--symbols", "batch=2")
    assert status == 0, err
    assert "input  x float32[2, 8]" in out
    assert "output y float32[2, 4]" in out
    assert "symbols batch=2" in out


def test_dag_with_symbols(capsys, dense, tmp_path):
    path = tmp_path / "dense.json"
    status, out, err = run(capsys, "dag", dense, "--symbols", "batch=2", "--out", str(path))
    assert status == 0, err
    assert path.exists()
    assert "dense" in out


@pytest.mark.slow
def test_explore_with_symbols(capsys, dense):
    status, out, err = run(capsys, "explore", dense, "--symbols", "batch=2", "--pes", "2")
    assert status == 0, err
    assert out.startswith("dense: ")
    assert " 0 points" not in out


@pytest.mark.slow
def test_map_with_symbols(capsys, dense):
    status, out, err = run(capsys, "map", dense, "--symbols", "batch=2", "--onchip", "1024", "--json")
    assert status == 0, err
    assert '"workload": "dense"' in out


def test_repeated_and_comma_separated_flags_merge(dense):
    workload = resolve_model(dense, [("batch", 3)] + [("batch", 3)])
    assert workload.inputs[0].shape == (3, 8)
    assert symbol_values([("a", 1), ("b", 2), ("a", 1)]) == {"a": 1, "b": 2}


def test_a_name_given_two_values_is_refused(capsys, dense):
    status, _, err = run(capsys, "info", dense, "--symbols", "batch=2", "--symbols", "batch=3")
    assert status == 2
    assert err == "dcaccel info: error: --symbols batch: given twice, as 2 and 3 (choose one)\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("batch=0", "batch=0: expected a positive integer, got 0"),
        ("batch=-1", "batch=-1: expected a positive integer, got '-1'"),
        ("batch=2.5", "batch=2.5: expected a positive integer, got '2.5'"),
        ("batch=2*3", "batch=2*3: expected a positive integer, got '2*3'"),
        ("batch=__import__('os')", "batch=__import__('os'): expected a positive integer, got \"__import__('os')\""),
        ("batch=", "batch=: expected a positive integer, got ''"),
        ("batch", "expected NAME=VALUE, got 'batch'"),
        ("=2", "expected NAME=VALUE, got '=2'"),
        ("batch=2,", "expected NAME=VALUE, got ''"),
        ("1x=2", "1x=2: a name must be an identifier"),
        ("a.b=2", "a.b=2: a name must be an identifier"),
    ],
)
def test_bad_entries_are_refused_in_one_line(capsys, dense, text, message):
    with pytest.raises(SystemExit) as exit_:
        main(["info", dense, "--symbols", text])
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == ""
    assert err == f"dcaccel info: error: argument --symbols: {message} (see dcaccel info --help)\n"


def test_a_symbol_the_model_does_not_have_is_refused(capsys, dense):
    status, _, err = run(capsys, "info", dense, "--symbols", "batch=2,seq=4")
    assert status == 2
    assert err == (f"dcaccel info: error: symbol 'seq': not a symbolic size of '{dense}' (its symbolic sizes: batch)\n")


def test_a_symbol_of_a_static_model_is_refused(conv_seed):
    with pytest.raises(DcaccelError, match=r"^symbol 'batch': not a symbolic size of .* \(it has none\)$"):
        resolve(conv_seed.onnx_model, symbols={"batch": 1})


def test_builtin_symbols_are_its_size_options(capsys):
    status, out, err = run(capsys, "info", "mmm", "--symbols", "N=3,K=5")
    assert status == 0, err
    assert "symbols N=3, K=5, M=4" in out
    assert "input  A float32[N, K]" in out


def test_builtin_refuses_a_size_it_does_not_have(capsys):
    status, _, err = run(capsys, "info", "mmm", "--symbols", "batch=2")
    assert status == 2
    assert err == "dcaccel info: error: workload 'mmm' has no size 'batch' (sizes: N, K, M)\n"


def test_sdfg_refuses_a_symbol_it_does_not_have(mmm):
    with pytest.raises(
        DcaccelError, match=r"^symbol 'batch': not a symbolic size of SDFG '.*' \(its symbolic sizes: K, M, N\)$"
    ):
        resolve(mmm.sdfg, symbols={"N": 2, "batch": 1})


def test_resolve_takes_symbols(dense):
    assert resolve(dense, symbols={"batch": 5}).inputs[0].shape == (5, 8)
    assert resolve("mmm", symbols={"N": 2}).symbols == {"N": 2, "K": 6, "M": 4}
