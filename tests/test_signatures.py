"""No public function of dcaccel takes more than 12 parameters (issue 23's done-when): what would need more is
a field of a typed record (``dcaccel.Study``, ``Grid``, ``LayerOptions``) passed as one.

Read from the source with ``ast``: every function at module level and every method of a class whose name
does not start with ``_``, its parameters counted as a caller sees them (``self`` and ``cls`` aside,
``*args`` and ``**options`` one each). A record's generated ``__init__`` (a dataclass or pydantic model)
is its fields, not a function, and is not counted.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dcaccel"
MOST_PARAMETERS = 12


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The parameters a caller of ``function`` can pass."""
    arguments = function.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (arguments.vararg is not None) + (arguments.kwarg is not None)


def public_functions(tree: ast.Module, owner: str = ""):
    """``(qualified name, function)`` for every public function and method of ``tree``."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from public_functions(node, f"{owner}{node.name}.")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            yield f"{owner}{node.name}", node


def counts(root: Path = PACKAGE) -> dict[str, int]:
    """``module:function`` (the module below ``root``) -> its parameters, for every public function."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for name, function in public_functions(ast.parse(path.read_text(encoding="utf-8"))):
            found[f"{module}:{name}"] = parameters(function)
    return found


@pytest.mark.slow  # parses every module: 0.6 s
def test_no_public_function_takes_more_than_twelve_parameters():
    found = counts()
    assert len(found) > 500  # the package was read
    assert {name: n for name, n in found.items() if n > MOST_PARAMETERS} == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(a, b=1, *args, c, **options): pass", {"m:f": 5}),
        ("class C:\n    def g(self, a, /, b): pass\n    @classmethod\n    def h(cls): pass", {"m:C.g": 2, "m:C.h": 0}),
        ("def _private(a): pass\nclass _Hidden:\n    def f(self, a): pass\nclass D:\n    def _f(self): pass", {}),
    ],
)
def test_the_count(tmp_path, source, expected):
    (tmp_path / "m.py").write_text(source)
    assert counts(tmp_path) == expected
