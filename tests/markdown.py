"""Reading the README's and docs/' Markdown in tests: fenced code blocks and tables (parsed, never
evaluated)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block: its language, the ``##`` section it is in, its first line number and text."""

    language: str
    section: str
    line: int
    code: str

    @property
    def id(self) -> str:
        return f"{self.language}-line{self.line}"


def code_blocks(text: str) -> list[CodeBlock]:
    """The fenced code blocks of ``text``, in order (blocks above the first ``##`` heading have the
    section ``""``)."""
    found, section, fence, start, lines = [], "", None, 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is None:
            if line.startswith("## "):
                section = line.removeprefix("## ").strip()
            elif line.startswith("```"):
                fence, start, lines = line.removeprefix("```").strip(), number + 1, []
        elif line.startswith("```"):
            found.append(CodeBlock(fence, section, start, "\n".join(lines) + "\n"))
            fence = None
        else:
            lines.append(line)
    assert fence is None, f"the code block opened at line {start - 1} is never closed"
    return found


def table(text: str, heading: str, index: int = 0) -> list[dict[str, str]]:
    """The rows of the ``index``-th table below the line ``heading``, as {column header: cell text}."""
    tables: list[list[list[str]]] = []
    inside = False
    for line in text.split(f"\n{heading}\n", 1)[1].splitlines():
        if line.startswith("|") and not inside:
            tables.append([])
        inside = line.startswith("|")
        if inside:
            tables[-1].append([cell.strip() for cell in line.strip().strip("|").split("|")])
    header, _, *body = tables[index]  # the second line is |---|
    return [dict(zip(header, row, strict=True)) for row in body]


def number(cell: str) -> int:
    """A table cell such as ``129,474`` as an int."""
    return int(cell.replace(",", ""))
