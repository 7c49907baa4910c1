"""Plain-text tables of dataclass rows, for the sub-commands' output."""

from dataclasses import fields


def format_table(rows) -> str:
    """Left-aligned columns headed by the dataclass field names of ``rows`` (all of one dataclass)."""
    if not rows:
        return "(none)"
    names = [f.name for f in fields(rows[0])]
    cells = [names] + [[_cell(getattr(row, name)) for name in names] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(names))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells)


def _cell(value) -> str:
    """A value as shown in a table (floats in short scientific notation)."""
    return f"{value:.3g}" if isinstance(value, float) else str(value)
