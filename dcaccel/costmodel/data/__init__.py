"""The shipped dataset: rows measured by ``benchmarks/costmodel_folds.py measure`` (docs/costmodel.md)."""

from pathlib import Path

#: The shipped rows (JSON lines, :class:`dcaccel.costmodel.measure.Row`).
SHIPPED_ROWS = Path(__file__).with_name("rows.jsonl")
