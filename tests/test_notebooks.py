"""The notebooks in notebooks/ run top to bottom, their figures are in their saved outputs, and they
stay small: no saved output holds the SDFG viewer (7 MB of JavaScript that ``import dace`` displays in
a notebook)."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))

#: Bytes all saved notebooks may take together, and one notebook after it ran (plots as PNG, tables).
TOTAL_BUDGET = 2_000_000
NOTEBOOK_BUDGET = 500_000


def _figures(notebook) -> int:
    return sum(
        "image/png" in output.get("data", {})
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )


def test_the_five_notebooks_are_there():
    assert [path.stem for path in NOTEBOOKS] == [
        "01_seed_table",
        "02_lenet",
        "03_pe_sweep",
        "04_pusch_mimo",
        "05_architectures",
    ]


def _scripts(notebook) -> int:
    """The number of HTML outputs that carry a ``<script>`` (the SDFG viewer)."""
    return sum(
        "<script" in output.get("data", {}).get("text/html", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_saved_notebook_shows_its_plots(path):
    assert _figures(nbformat.read(path, as_version=4)) >= 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_saved_notebook_has_no_viewer(path):
    notebook = nbformat.read(path, as_version=4)
    assert _scripts(notebook) == 0
    assert path.stat().st_size < NOTEBOOK_BUDGET


def test_saved_notebooks_are_small():
    assert sum(path.stat().st_size for path in NOTEBOOKS) < TOTAL_BUDGET


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs_top_to_bottom(path):
    notebook = nbformat.read(path, as_version=4)
    resources = {"metadata": {"path": str(path.parent)}}
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources=resources).execute()
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert errors == []
    assert _figures(notebook) >= 1
    assert _scripts(notebook) == 0
    assert len(nbformat.writes(notebook)) < NOTEBOOK_BUDGET
