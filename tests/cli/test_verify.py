"""``dcaccel verify MODEL``: exit status, printed errors, ``--impl`` parsing and lowering."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import dcaccel.cli.models
import dcaccel.cli.verify
from dcaccel.cli import build_parser, main
from dcaccel.cli.models import implementation_choices
from dcaccel.frontend import Workload
from dcaccel.verification import OutputCheck, VerifyReport

PASSED = VerifyReport("w", "lowered", "python", 1e-4, 1e-5, 0, (OutputCheck("y", (1,), 0.0, 0.0, True),))


@pytest.mark.parametrize(
    ("argv", "choices"),
    [
        ([], {}),
        (["--impl", "Conv=op"], {"Conv": "op"}),
        (["--impl", "Conv=op", "--impl", "conv2=lmv"], {"Conv": "op", "conv2": "lmv"}),
        (["--impl", "Conv=op", "--impl", "Conv=op"], {"Conv": "op"}),
    ],
)
def test_impl_parsing(argv, choices):
    args = build_parser().parse_args(["verify", "lenet", *argv])
    assert implementation_choices(args.implementations) == choices
    assert (args.rtol, args.atol, args.seed, args.lowered) == (1e-4, 1e-5, 0, False)


@pytest.mark.parametrize("bad", ["Conv", "=op", "Conv="])
def test_impl_parsing_rejects_malformed_pairs(bad, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["verify", "lenet", "--impl", bad])
    assert exit_info.value.code == 2
    assert f"expected KEY=NAME[,NAME...], got '{bad}'" in capsys.readouterr().err


def test_impl_lowers_with_the_choices(monkeypatch, mmm, capsys):
    """--impl and --lowered call Workload.lower(choices) and check its SDFG (here: the unlowered one)."""
    calls = []
    monkeypatch.setattr(dcaccel.cli.models, "resolve_model", lambda spec, *_: mmm)
    monkeypatch.setattr(dcaccel.cli.verify, "verify", lambda workload, lowered, **_: calls.append(lowered) or PASSED)
    monkeypatch.setattr(Workload, "lower", lambda self, choices: SimpleNamespace(sdfg=self.sdfg, choices=choices))
    assert main(["verify", "mmm", "--impl", "MatMul=lmv"]) == 0
    assert main(["verify", "mmm", "--lowered"]) == 0
    assert main(["verify", "mmm"]) == 0
    assert [None if c is None else c.choices for c in calls] == [{"MatMul": "lmv"}, {}, None]


@pytest.mark.slow
def test_verify_lenet_passes(monkeypatch, lenet, capsys):
    monkeypatch.setattr(dcaccel.cli.models, "resolve_model", lambda spec, *_: lenet)
    assert main(["verify", "lenet", "--seed", "1"]) == 0
    header, row, verdict = capsys.readouterr().out.splitlines()
    assert header.split() == ["output", "shape", "max_abs_error", "max_rel_error", "passed"]
    assert row.split()[0] == "output" and row.split()[-1] == "True"
    assert verdict == "PASS: lenet (unlowered SDFG) against onnxruntime, rtol=0.0001 atol=1e-05 seed=1"


@pytest.mark.slow
def test_verify_mismatch_exits_with_status_1(monkeypatch, conv_seed, capsys):
    weights = {**conv_seed.weights, "bias": conv_seed.weights["bias"] + np.float32(0.5)}
    monkeypatch.setattr(dcaccel.cli.models, "resolve_model", lambda spec, *_: replace(conv_seed, weights=weights))
    assert main(["verify", "conv-seed"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[-1] == "False"
    assert float(lines[1].split()[-3]) == pytest.approx(0.5, rel=1e-3)
    assert lines[-1].startswith("FAIL: conv-seed")


@pytest.mark.slow
def test_tolerances_decide(monkeypatch, conv_seed, capsys):
    weights = {**conv_seed.weights, "bias": conv_seed.weights["bias"] + np.float32(1e-3)}
    monkeypatch.setattr(dcaccel.cli.models, "resolve_model", lambda spec, *_: replace(conv_seed, weights=weights))
    assert main(["verify", "conv-seed"]) == 1
    assert main(["verify", "conv-seed", "--atol", "2e-3"]) == 0
