"""The command line's common behaviour: one-line errors, interruption, termination."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from dcaccel.cli import main, one_line


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
