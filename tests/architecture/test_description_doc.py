"""docs/architecture_description.md matches the code: its example gives the results beside it, its
complete YAML example is the shipped eyeriss.yaml, its field tables list exactly the schema's fields."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dcaccel.architecture import Architecture, load, names
from dcaccel.architecture.schema import ArchitectureSpec, Memory, Unit
from tests.markdown import code_blocks, table

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "docs" / "architecture_description.md").read_text()
SCHEMA = "## The YAML schema"


def test_example_gives_the_results_beside_it(tmp_path):
    """Each line ``expression  # number ...`` of the example is turned into an assertion and the
    example runs as a script from the repository's root."""
    (example,) = [block for block in code_blocks(TEXT) if block.language == "python"]
    lines, checked = [], 0
    for line in example.code.splitlines():
        code, _, comment = line.partition("  # ")
        value = re.match(r"(\d+(?:\.\d+)?)\b", comment)
        if value is not None:
            line = f"assert ({code}) == ({value.group(1)}), {line!r}"
            checked += 1
        lines.append(line)
    assert checked == 5
    script = tmp_path / "example.py"
    script.write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "# " + ", ".join(names()) in example.code


def test_complete_example_is_the_shipped_eyeriss():
    (block,) = [block for block in code_blocks(TEXT) if block.language == "yaml"]
    assert Architecture.from_dict(yaml.safe_load(block.code)).spec == load("eyeriss").spec


@pytest.mark.parametrize(("index", "model"), [(0, ArchitectureSpec), (1, Unit), (2, Memory)])
def test_field_tables_list_the_schema(index, model):
    fields = []
    for row in table(TEXT, SCHEMA, index):
        fields += re.findall(r"`(\w+)`", row["field"])
    assert sorted(fields) == sorted(model.model_fields)
