"""The cluster example of README.md runs as written when saved as a script: the block after the
``cluster-example`` marker, with a smaller sweep (the seed convolution instead of LeNet's 243
assignments, on one worker) on the local Dask cluster it starts without an address."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKER = "<!-- cluster-example:"

#: What the test changes in the example to keep it short: (text in the README, replacement).
SMALLER = (
    ('"lenet",', '"conv-seed",'),
    ('shapes = {"Conv": ["mv", "op", "lmv"], "Gemm": ["mv", "op", "lmv"]}', 'shapes = {"Conv": ["mv", "lmv"]}'),
    ('executor="dask",', 'executor="dask", workers=1,'),  # one worker process to start (it imports DaCe)
)


def cluster_example() -> str:
    """The Python block that follows the marker in README.md."""
    text = README.read_text()
    start = text.index("```python\n", text.index(MARKER)) + len("```python\n")
    return text[start : text.index("```\n", start)]


def test_the_example_is_guarded_and_needs_no_cluster():
    code = cluster_example()
    assert 'if __name__ == "__main__":' in code
    assert all(line.lstrip().startswith("#") for line in code.splitlines() if "address=" in line)
    assert all(old in code for old, _ in SMALLER)


@pytest.mark.slow
def test_the_example_runs_as_a_script(tmp_path):
    from dcaccel.exploration.store import read_points

    code = cluster_example()
    for old, new in SMALLER:
        code = code.replace(old, new)
    script = tmp_path / "sweep.py"
    script.write_text(code)
    # the script imports this checkout's dcaccel (and so do the Dask workers it starts), whatever is installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
    stored = read_points(tmp_path / "lenet.sqlite")
    assert sorted(stored["assignment"].unique()) == ["Conv_0=lmv", "Conv_0=mv"]
    assert len(stored) == 2 * 2 * 2
    assert "Conv_0=lmv" in run.stdout
