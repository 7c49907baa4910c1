"""Adversarial values of the command-line vocabulary (issue 22's bar applied to the flags added today): each
ends in one line naming the flag, never a Python message (a 5,000-digit size hit Python's digit limit and
printed ``invalid _symbols value`` with the whole text) nor a run that does not end (``--repeat 10^12``);
a value repeated in a list is run once."""

import pytest

from dcaccel.cli import build_parser
from dcaccel.costmodel.measure import MAX_REPEAT
from dcaccel.exploration.study import Study


@pytest.fixture(scope="module")
def parser():
    return build_parser()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explore", "mmm", "--symbols", "N=" + "9" * 5000], "--symbols: N: a size of 5000 characters (at most 19)"),
        (["measure", "mmm", "--repeat", str(10**12), "--out", "r.jsonl"], f"at least 1 and at most {MAX_REPEAT}"),
    ],
)
def test_refused_in_one_line(parser, capsys, argv, message):
    with pytest.raises(SystemExit) as caught:
        parser.parse_args(argv)
    assert caught.value.code == 2
    error = capsys.readouterr().err
    assert message in error
    assert error.count("\n") == 1 and len(error) < 300


def test_a_long_size_within_bounds_is_read(parser):
    assert parser.parse_args(["explore", "mmm", "--symbols", "N=" + "9" * 19]).symbols == [("N", 10**19 - 1)]


@pytest.mark.parametrize(
    ("argv", "field", "expected"),
    [
        (["--scheduler", "list,list", "--scheduler", "list"], "scheduler", ("list",)),
        (["--pes", "16,16,32"], "pes", (16, 32)),
        (["--onchip", "0,0"], "onchip_memory", (0,)),
    ],
)
def test_a_value_given_twice_is_run_once(parser, argv, field, expected):
    """--scheduler list,list gave every point three times (9 rows for 3 assignments)."""
    args = parser.parse_args(["explore", "mmm", *argv])
    assert getattr(Study.of(models="mmm", **{field: getattr(args, field)}), field) == expected
