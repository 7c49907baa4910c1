"""The numbers of docs/dag.md are those of the code: its seed-convolution tables are parsed from the
Markdown and compared with the DAGs ``dcaccel.dag.extract`` builds, its closed forms with
``symbolic_metrics`` (nothing is compiled); and the example of docs/scheduler.md gives the results
written beside it."""

import functools
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import sympy

from dcaccel.dag import TaskDAG, extract, symbolic_metrics
from dcaccel.dag.expression import parse_expression
from dcaccel.dag.metrics import depth, io_volume, work
from dcaccel.scheduler import schedule
from tests.markdown import code_blocks, number, table
from tests.scheduler.conftest import VECTORS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DAG_MD = (DOCS / "dag.md").read_text()
SEED_SECTION = "## The seed convolution, and where the numbers differ"
SEED_ROWS = table(DAG_MD, SEED_SECTION, 0)
EDGE_ROWS = table(DAG_MD, SEED_SECTION, 1)
CLOSED_FORMS = table(DAG_MD, "## Closed forms (`symbolic_metrics`)")


@pytest.fixture(scope="module")
def seed_dag(conv_seed):
    """The task DAG of conv-seed under an MMM shape and an edge-volume rule (each extracted once)."""

    @functools.cache
    def dag(shape: str, rule: str) -> TaskDAG:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the seed's DAGs need no contract repair
            return extract(conv_seed.lower({"Conv": shape}), edge_volume=rule)

    return dag


def test_tables_cover_every_shape_and_rule():
    assert sorted((row["shape"], row["rule"]) for row in SEED_ROWS) == sorted(
        (shape, rule) for shape in ("mv", "op", "lmv") for rule in ("reference", "exact")
    )
    assert [row["shape"] for row in EDGE_ROWS] == ["mv", "op", "lmv"]
    assert [row["shape"] for row in CLOSED_FORMS] == ["mv", "op", "lmv"]


@pytest.mark.parametrize("row", SEED_ROWS, ids=lambda row: f"{row['shape']}-{row['rule']}")
def test_seed_table_row(row, seed_dag):
    dag = seed_dag(row["shape"], row["rule"])
    assert io_volume(dag) == number(row["I/O volume"])
    assert work(dag) == number(row["work"])
    assert depth(dag) == number(row["depth"])
    assert schedule(dag, 16).makespan == number(row["makespan P=16"])
    assert schedule(dag, 128).makespan == number(row["P=128"])


@pytest.mark.parametrize("row", EDGE_ROWS, ids=lambda row: row["shape"])
@pytest.mark.parametrize("rule", ["exact", "reference"])
def test_edge_volume_table_row(row, rule, seed_dag):
    producer, consumer = re.fullmatch(r"`(\w+)` → `(\w+)`", row["edges"]).groups()
    dag = seed_dag(row["shape"], rule)
    volumes = [volume for u, v, volume in dag.edges if dag.info(u).map == producer and dag.info(v).map == consumer]
    assert len(volumes) == number(row["number"])
    assert set(volumes) == {number(row[f"volume ({rule})"])}


def formula(cell: str):
    """A closed form of the table (``N·(K·M + K + M)``) as a SymPy expression, parsed, not evaluated."""
    return parse_expression(cell.replace("·", "*"))


@pytest.mark.parametrize("row", CLOSED_FORMS, ids=lambda row: row["shape"])
def test_closed_form_row(row, mmm):
    metrics = symbolic_metrics(mmm.lower({"MatMul": row["shape"]}), symbols={})
    for sizes in ({"N": 1, "K": 1, "M": 1}, {"N": 2, "K": 3, "M": 5}, {"N": 7, "K": 4, "M": 3}):
        concrete = metrics.evaluate(**sizes)
        for column, metric in (("tasks", "tasks"), ("I/O volume", "io_volume"), ("work (exact)", "work")):
            documented = formula(row[column]).subs({sympy.Symbol(name): value for name, value in sizes.items()})
            assert getattr(concrete, metric) == documented, (column, sizes)


def test_scheduler_example_gives_the_results_beside_it(tmp_path):
    """Run from the repository's root, each line ``expression  # a, b, c`` of the example computes
    (a, b, c): the example runs as a script with those lines turned into assertions."""
    (example,) = [block for block in code_blocks((DOCS / "scheduler.md").read_text()) if block.language == "python"]
    assert str(VECTORS.relative_to(ROOT)) in example.code
    lines, checked = [], 0
    for line in example.code.splitlines():
        code, _, comment = line.partition("  # ")
        values = re.fullmatch(r"(\d+(?:, \d+)*)\b.*", comment)
        if values is not None:
            line = f"assert ({code}) == ({values.group(1)}), {line!r}"
            checked += 1
        lines.append(line)
    assert checked >= 2
    script = tmp_path / "example.py"
    script.write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
