"""The README's examples run as written: every ```python block as a script in a fresh interpreter, every ```bash
block command by command through ``dcaccel.cli.main``, each block in an empty folder.

Not run here: the install and test commands above the first section (they are what runs this), and
the section "Running sweeps on a cluster" (its examples need a Dask cluster; tests/exploration covers
them). Examples that compile SDFGs, sweep a whole network or search mappings are marked slow."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dcaccel.cli import main
from tests.markdown import CodeBlock, code_blocks, number, table

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: Sections whose examples are tested elsewhere.
OTHER_SECTIONS = ("Running sweeps on a cluster",)

#: What makes an example slow: compiling an SDFG (verify, run), sweeping a whole network or searching mappings
#: (tests/cli runs each of these commands on small inputs in the fast subset).
SLOW = ("dcaccel verify", ".run(", 'explore("lenet"', "dcaccel map", "dcaccel measure")


def commands(code: str) -> list[list[str]]:
    """The commands of a bash block as argument lists (continuation lines joined, comments dropped)."""
    return [args for line in code.replace("\\\n", " ").splitlines() if (args := shlex.split(line, comments=True))]


ALL = code_blocks(README.read_text())
RUN = [
    pytest.param(example, id=example.id, marks=[pytest.mark.slow] if any(s in example.code for s in SLOW) else [])
    for example in ALL
    if example.section and example.section not in OTHER_SECTIONS and example.language in ("python", "bash")
]


def test_readme_starts_with_install_and_test():
    assert ALL[0] == CodeBlock("bash", "", ALL[0].line, 'pip install -e ".[dev]" && dcaccel explore --demo\npytest\n')


def test_every_section_with_examples_is_run():
    run = {param.values[0].section for param in RUN}
    shown = {e.section for e in ALL if e.section and e.language in ("python", "bash")}
    assert shown - run == set(OTHER_SECTIONS)


@pytest.mark.parametrize("example", RUN)
def test_example_runs(example, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    if example.language == "python":
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        script = tmp_path / "example.py"  # a file: DaCe reads a @dace.program's source from it
        script.write_text(example.code)
        done = subprocess.run(
            [sys.executable, script.name], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, done.stderr
        return
    for args in commands(example.code):
        assert args[0] == "dcaccel", f"README line {example.line}: only dcaccel commands are run here, not {args[0]}"
        status = main(args[1:])
        assert status == 0, f"{shlex.join(args)} exited with {status}: {capsys.readouterr().err}"


def test_seed_table_is_what_explore_writes(tmp_path, monkeypatch):
    text = README.read_text()
    expected = {
        (f"Conv={row['seed (Conv 1→6, 5×5, 28×28)'].lower()}", pes): (number(row["I/Os"]), number(row[f"{pes} PEs"]))
        for row in table(text, "### Reproducing the seed table")
        for pes in (16, 128)
    }
    assert len(expected) == 6
    command = re.search(r"`(dcaccel explore conv-seed[^`]*--out seed\.csv)`", text).group(1)
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(command)[1:]) == 0
    written = pd.read_csv(tmp_path / "seed.csv")
    assert {(row.assignment, row.pes): (row.io_volume, row.makespan) for row in written.itertuples()} == expected


def test_ci_runs_what_the_readme_says():
    """.ci/run installs and tests with the README's commands (``python -m`` for the active interpreter)."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    install, test = ALL[0].code.split("\n")[:2]
    assert f"python -m {install.split(' && ')[0]}" in lines
    assert f"python -m {test}" in lines
