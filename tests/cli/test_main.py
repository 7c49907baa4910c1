"""The command line's common behaviour: one-line errors, interruption, termination."""

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import pytest

from dcaccel.cli import build_parser, main, one_line, reporting


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("plain", "plain"),
        ("two\nlines", "two lines"),
        ("tab\tand escape\x1b", "tab\\tand escape\\x1b"),
        ("", ""),
        ("unicode é stays", "unicode é stays"),
    ],
)
def test_one_line(message, expected):
    assert one_line(message) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["explore", "--pes", "1\n2", "--demo"],
        ["dag", "bad\nname"],
        ["schedule", "missing\n.json", "--pes", "2"],
    ],
)
def test_errors_with_line_breaks_stay_one_line(argv, capsys):
    try:
        status = main(argv)
    except SystemExit as exit_info:
        status = exit_info.code
    lines = capsys.readouterr().err.splitlines()
    assert status == 2
    assert len(lines) == 1 and lines[0].startswith(f"dcaccel {argv[0]}: error: ")


def test_interrupt_is_one_line(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr("dcaccel.cli.info.run", interrupted)
    parser_run = main(["info", "conv-seed"])
    assert parser_run == 130
    assert capsys.readouterr().err == "dcaccel info: interrupted\n"


def test_sigterm_handler_is_restored():
    before = signal.getsignal(signal.SIGTERM)
    main(["dag", "no-such-model"])
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.slow
def test_terminated_command_prints_one_line(tmp_path):
    """SIGTERM during a sweep: one line on stderr, status 130, no traceback."""
    code = "import sys; from dcaccel.cli import main; sys.exit(main())"
    command = [sys.executable, "-c", code, "explore", "lenet", "--pes", "1,2,4"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = []
    reader = threading.Thread(target=lambda: err.extend(iter(lambda: process.stderr.read(1), "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while "explore lenet" not in "".join(err) and time.monotonic() < deadline:  # the sweep's progress bar
        time.sleep(0.2)
    os.kill(process.pid, signal.SIGTERM)
    process.wait(timeout=60)
    reader.join(timeout=10)
    text = "".join(err)
    assert process.returncode == 130, text
    assert "Traceback" not in text
    assert text.splitlines()[-1].split("\r")[-1] == "dcaccel explore: interrupted"


def test_verbose_before_or_after_the_command():
    parser = build_parser()
    assert parser.parse_args(["-v", "dag", "lenet"]).verbose
    assert parser.parse_args(["dag", "lenet", "--verbose"]).verbose
    assert not parser.parse_args(["dag", "lenet"]).verbose


def test_dcaccel_warnings_are_one_line_and_the_libraries_are_detail(caplog):
    import dcaccel.exploration.sweep

    caplog.set_level(logging.DEBUG, logger="dcaccel")
    before = warnings.formatwarning
    with reporting("explore", verbose=False):
        ours = warnings.formatwarning("two\nlines", UserWarning, dcaccel.exploration.sweep.__file__, 10)
        theirs = warnings.formatwarning("batch sizes", UserWarning, "/lib/torch/onnx/utils.py", 7)
    assert ours == "dcaccel explore: warning: two lines\n" and theirs == ""
    assert "UserWarning from /lib/torch/onnx/utils.py:7: batch sizes" in caplog.text
    assert warnings.formatwarning is before


def where_model():
    """y = x + float(Where(c, a, b)) with int16 constants: onnx-simplifier cannot fold the Where (onnxruntime
    has no int16 Where) and prints so from its C++ core."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    constants = [
        numpy_helper.from_array(np.array([True, False, True, False]), "c"),
        numpy_helper.from_array(np.arange(4, dtype=np.int16), "a"),
        numpy_helper.from_array(np.zeros(4, dtype=np.int16), "b"),
    ]
    nodes = [
        helper.make_node("Where", ["c", "a", "b"], ["w"], name="where"),
        helper.make_node("Cast", ["w"], ["f"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "f"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "where",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        constants,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.slow
def test_onnx_simplifier_output_is_shown_only_with_verbose(tmp_path, capfd):
    import onnx

    model = tmp_path / "where.onnx"
    onnx.save(where_model(), model)
    assert main(["dag", str(model)]) == 0
    out, err = capfd.readouterr()
    assert out.startswith("DAG where: 3 tasks") and "failed to run" not in err
    assert main(["dag", str(model), "--verbose"]) == 0
    err = capfd.readouterr().err
    assert f'dcaccel dag: onnx-simplifier on \'{model}\': WARNING: failed to run "Where" op (name is "where")' in err
    assert logging.getLogger("dcaccel").handlers == []


@pytest.mark.slow
def test_a_run_says_what_matters_once_in_one_line(tmp_path):
    """LeNet (MaxPool, Reshape: inserted buffer nodes) prints only its progress; an opaque op is one warning line."""
    import onnx

    from tests.dag.test_opaque import opaque_model

    onnx.save(opaque_model(), tmp_path / "opaque.onnx")
    code = "import sys; from dcaccel.cli import main; sys.exit(main())"
    runs = {
        model: subprocess.run(
            [sys.executable, "-c", code, "explore", model, "--pes", "4", "--scheduler", "list"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        for model in ("lenet", "opaque.onnx")
    }
    assert [line for line in runs["lenet"].splitlines() if line.strip() and "explore lenet" not in line] == []
    assert runs["opaque.onnx"].splitlines()[0] == (
        "dcaccel explore: warning: explore opaque: 1 node(s) with no canonical implementation lowered as opaque "
        "tasks: randomuniformlike (RandomUniformLike)"
    )
