"""Fuzzing ``dcaccel explore``'s arguments (hypothesis): hostile strings, numbers out of range, bad paths.

Every run, in process through ``dcaccel.cli.main``, either succeeds (status 0, or 1 with the failed
assignments listed) or prints one error line and exits with status 2; it never shows a traceback and
never creates a file other than the outputs it was asked for. The workload is ``mmm`` (it lowers in
a fraction of a second) and most drawn arguments fail the checks, so few sweeps really run.
"""

import contextlib
import io
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from dcaccel.cli import main

#: Strings a user (or a script gone wrong) might pass anywhere. No control characters or line breaks:
#: a command line cannot hold a NUL, and an error that echoes a typed line break spans two lines.
HOSTILE = st.one_of(
    st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=12),
    st.sampled_from(["", " ", ",", "=", "-1", "0", "1e9", "nan", "inf", "9" * 30, "--pes", "é", "../x", "%s", "{}"]),
)


def _numbers(low: int, high: int):
    """Comma-separated integers, some out of ``[low, high]``."""
    number = st.integers(min_value=low - 3, max_value=high + 3) | st.sampled_from([low, high, 2**63, -(2**63)])
    return st.lists(number, min_size=0, max_size=3).map(lambda values: ",".join(map(str, values)))


def _paths(suffixes: tuple[str, ...]):
    """Output paths: relative names with good or bad suffixes, folders that do not exist, odd names."""
    name = st.sampled_from(["r", "out", "a b", "ü", ".hidden", "x.y"])
    suffix = st.sampled_from([*suffixes, "", ".txt", ".PNG", ".jpg2", ".csv.gz"])
    folder = st.sampled_from(["", "missing/", "/nonexistent/dir/", "./"])
    return st.builds(lambda f, n, s: f"{f}{n}{s}", folder, name, suffix) | HOSTILE


#: Per flag, valid values (``mmm`` has one MatMul node, ``_MatMult_``).
VALID = {
    "--impl": st.sampled_from(["MatMul=mv", "MatMul=mv,lmv", "_MatMult_=op", "MatMul=op,op"]),
    "--pes": st.sampled_from(["1", "2,4", "64", "1048576"]),
    "--onchip": st.sampled_from(["0", "16,0", str(2**63 - 1)]),
    "--scheduler": st.sampled_from(["list", "streaming", "streaming,list"]),
    "--granularity": st.sampled_from(["task", "coarse", "tiles=2"]),
    "--strategy": st.sampled_from(["per-op-type", "per-node", "greedy"]),
    "--edge-volume": st.sampled_from(["exact", "reference"]),
    "--executor": st.just("local"),
    "--workers": st.sampled_from(["1", "2"]),
    "--results": st.sampled_from(["r.sqlite", "r.db"]),
    "--out": st.sampled_from(["r.csv", "r.json", "r.parquet"]),
    "--plot": st.sampled_from(["p.png", "p.svg"]),
}

#: Per flag, values that are wrong (out of range, malformed, unwritable) or hostile.
BAD = {
    "--impl": st.sampled_from(["matmul=mv", "MatMul=tiled", "Conv=mv", "=mv", "MatMul=", "MatMul=,"]) | HOSTILE,
    "--pes": _numbers(1, 2**20) | HOSTILE,
    "--onchip": _numbers(0, 2**63 - 1) | HOSTILE,
    "--scheduler": st.sampled_from(["heft", "List", ",,", "list,heft"]) | HOSTILE,
    "--granularity": st.sampled_from(["tiles=0", "tiles=abc", "tiles=", "tiles=-1", "fine", "Task"]) | HOSTILE,
    "--strategy": st.sampled_from(["random", "per-node "]) | HOSTILE,
    "--edge-volume": st.sampled_from(["max", "Exact"]) | HOSTILE,
    "--executor": st.sampled_from(["threads", "Local"]) | HOSTILE,
    "--address": st.sampled_from(["tcp://127.0.0.1:1", "10.0.0.5"]) | HOSTILE,
    "--workers": _numbers(1, 2**20) | HOSTILE,
    "--results": _paths((".sqlite", ".db")),
    "--out": _paths((".csv", ".json", ".parquet")),
    "--plot": _paths((".png", ".svg")),
}
OUTPUTS = ("--results", "--out", "--plot")


@st.composite
def arguments(draw) -> tuple[str, dict[str, str], bool]:
    """The model (mostly ``mmm``), flags with valid values of which at most two are spoiled, and
    whether ``--resume`` is given."""
    good = draw(st.booleans()) or draw(st.booleans())
    model = "mmm" if good else draw(st.sampled_from(["no-such-model", "x.onnx", "m.py:f", "--demo"]) | HOSTILE)
    flags = {flag: draw(VALID[flag]) for flag in draw(st.lists(st.sampled_from(list(VALID)), unique=True, max_size=5))}
    for flag in draw(st.lists(st.sampled_from(list(BAD)), unique=True, max_size=2)):
        flags[flag] = draw(BAD[flag])
    return model, flags, draw(st.booleans())


def _run(argv: list[str]) -> tuple[int, str]:
    """Exit status (argparse's included) and stderr of ``dcaccel`` on ``argv``."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as exit_info:
            status = exit_info.code
    return status, err.getvalue()


@pytest.mark.slow  # 200 drawn command lines: about 40 s
@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments())
@example(("mmm", {"--pes": ""}, False))
@example(("mmm", {"--onchip": "-5"}, False))
@example(("mmm", {"--granularity": "tiles=abc"}, False))
@example(("mmm", {"--out": "/nonexistent/dir/x.csv", "--impl": "MatMul=mv"}, False))
@example(("mmm", {"--plot": "x.jpg2", "--impl": "MatMul=mv"}, False))
@example(("mmm", {"--impl": "matmul=mv,lmv"}, False))
@example(("mmm", {"--pes": str(10**12), "--impl": "MatMul=mv"}, False))
@example(("mmm", {"--onchip": str(10**23), "--impl": "MatMul=mv", "--results": "r.sqlite"}, False))
def test_explore_arguments_fail_in_one_line_or_work(drawn):
    model, flags, resume = drawn
    argv = ["explore", model, *(item for flag, value in flags.items() for item in (flag, value))]
    argv += ["--resume"] if resume else []
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        status, err = _run(argv)
        created = {str(path.relative_to(folder)) for path in Path(folder).rglob("*")}
    event(f"exit status {status}")
    assert "Traceback" not in err
    assert status in (0, 1, 2), (status, err)
    if status == 2:
        errors = [line for line in err.splitlines() if not line.startswith(("usage:", " "))]
        assert len(errors) == 1 and errors[0].startswith("dcaccel explore: error: "), err
    requested = {str(Path(flags[flag])) for flag in OUTPUTS if flag in flags}
    assert created <= requested | {str(Path(name).parent) for name in requested}, (created, requested)
