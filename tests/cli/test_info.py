"""``dcaccel info MODEL`` (no compilation)."""

import textwrap

import pytest

import dcaccel.cli.info
from dcaccel.cli import main
from dcaccel.cli.info import describe, node_rows, op_type_rows
from dcaccel.cli.models import resolve_model
from dcaccel.cli.table import format_table
from dcaccel.expansions import implementations


@pytest.fixture
def use_lenet(monkeypatch, lenet):
    """Make MODEL resolve to the session's lenet workload (no re-export)."""
    monkeypatch.setattr(dcaccel.cli.info, "resolve_model", lambda spec, *_: lenet)


def test_op_type_rows(lenet):
    rows = op_type_rows(lenet)
    assert [(r.op_type, r.count) for r in rows] == [
        ("Conv", 2),
        ("Relu", 4),
        ("MaxPool", 2),
        ("Reshape", 1),
        ("Gemm", 3),
        ("Softmax", 1),
    ]
    for row in rows:
        assert row.implementations == (", ".join(implementations(row.op_type)) or "-")


def test_node_rows(conv_seed):
    (row,) = node_rows(conv_seed)
    assert (row.op_type, row.inputs, row.outputs) == ("Conv", "1x1x28x28, 6x1x5x5, 6", "1x6x24x24")


def test_describe_mmm(mmm):
    text = describe(mmm)
    assert "workload mmm (from dace-program)" in text
    assert "input  A float32[N, K]" in text and "output __return float32[N, M]" in text
    assert "symbols N=8, K=6, M=4" in text
    assert "parameters 0" in text


def test_info_command(use_lenet, capsys):
    assert main(["info", "lenet"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[:4] == [
        "workload lenet (from torch)",
        "input  x float32[1, 1, 28, 28]",
        "output output float32[1, 10]",
        "parameters 44,426",
    ]
    assert any(line.split()[:2] == ["Gemm", "3"] for line in lines)
    assert sum(1 for line in lines if " Conv " in f" {line} " and "x" in line) == 2


def test_format_table_aligns_columns(conv_seed):
    rows = op_type_rows(conv_seed)
    header, row = format_table(rows).splitlines()
    assert header.index("count") == row.index("1")
    assert format_table([]) == "(none)"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("lenet5", "unknown model 'lenet5': not a built-in workload (conv-seed, lenet, resnet18,"),
        ("missing.onnx", "file 'missing.onnx' not found"),
        ("{tmp}/models.py:nothing", "'{tmp}/models.py' has no attribute 'nothing'"),
        ("{tmp}/not_onnx.onnx", "'{tmp}/not_onnx.onnx' is not an ONNX model"),
    ],
)
def test_bad_model_exits_with_status_2(spec, message, tmp_path, capsys):
    (tmp_path / "models.py").write_text(textwrap.dedent("x = 1\n"))
    (tmp_path / "not_onnx.onnx").write_text("hello")
    assert main(["info", spec.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dcaccel info: error: {message.format(tmp=tmp_path)}")
    assert err.count("\n") == 1


def test_resolve_model_builtin():
    assert resolve_model("mmm").name == "mmm"


@pytest.mark.parametrize(
    ("model", "node", "choices"),
    [("lenet", "conv1", "direct, lmv, mv, op"), ("lenet", "fc1", "lmv, mv, op"), ("lenet", "Relu_0", "canonical")],
)
def test_every_node_lists_its_implementations(model, node, choices, capsys):
    assert main(["info", model]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    row = next(line for line in rows if line and line[0] == node)
    assert " ".join(row).endswith(choices)


@pytest.fixture(scope="module")
def opaque_files(tmp_path_factory):
    """ONNX files of tests/dag/test_opaque.py's model with LogSoftmax (replaced by its function body at import: no
    opaque task) and with RandomUniformLike (a host task through onnxruntime, dcaccel/transforms/host.py)."""
    import onnx

    from tests.dag.test_opaque import opaque_model

    folder = tmp_path_factory.mktemp("opaque")
    for op in ("LogSoftmax", "RandomUniformLike"):
        onnx.save(opaque_model(op), folder / f"{op}.onnx")
    return folder


OPAQUE_LINE = "opaque tasks (no canonical implementation; refused by --strict)"


@pytest.mark.parametrize(
    ("op", "node", "column", "closing"),
    [("RandomUniformLike", "randomuniformlike", "opaque (onnxruntime)", OPAQUE_LINE)],
)
def test_nodes_without_a_canonical_implementation_are_named(opaque_files, op, node, column, closing, capsys):
    assert main(["info", str(opaque_files / f"{op}.onnx")]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines if line}
    assert rows[node].endswith(column) and rows[op].endswith(column)
    assert rows["matmul"].endswith("lmv, mv, op")
    assert lines[-1] == f"{closing}: {node} ({op})"
    assert not any(line.startswith(("opaque tasks", "unsupported (")) for line in lines[:-1])


def test_an_op_replaced_by_its_function_body_leaves_no_opaque_task(opaque_files, capsys):
    assert main(["info", str(opaque_files / "LogSoftmax.onnx")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not any("opaque" in line for line in lines)
    assert not any(line.split()[:1] == ["LogSoftmax"] for line in lines if line)


def test_a_model_without_opaque_nodes_has_no_closing_line(use_lenet, capsys):
    assert main(["info", "lenet"]) == 0
    assert not any(line.startswith(("opaque", "unsupported")) for line in capsys.readouterr().out.splitlines())
