"""Reading an architecture description's YAML: data, never code, bounded before anything is built.

``yaml.safe_load`` alone builds any YAML data: a key given twice silently replaces the first (a second
``pe:`` block and its support rules), a kilobyte of aliases expands to billions of nodes for whatever
walks the result, and deep nesting exhausts the recursion of the composer. :func:`read_yaml` first walks
the parser's events, which builds nothing, and refuses text longer than :data:`MAX_BYTES`, nesting deeper
than :data:`MAX_DEPTH` and more than :data:`MAX_NODES` nodes once every alias is expanded (an alias counts
as the nodes and depth of what it names; an alias inside the collection it names is refused). It then
builds the data with the safe constructor (no tag runs code), refusing a key that appears twice in one
mapping. A number in exponent notation without a dot (``1e-3``) is a float, as in YAML 1.2, not text;
a number YAML 1.1 and 1.2 read differently (``010``, ``1:30``) is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import yaml

from dcaccel.errors import DcaccelError

#: The longest description, in bytes of UTF-8.
MAX_BYTES = 1 << 20
#: The deepest nesting of mappings and sequences (the schema needs 8).
MAX_DEPTH = 32
#: The most nodes (scalars, mappings, sequences) of a description, aliases expanded.
MAX_NODES = 100_000
#: The longest integer written, in characters (Python refuses to read more than 4,300 digits; the range
#: checks name the field of a shorter one).
MAX_DIGITS = 4000

#: A key shown in a message: as written when it is a plain name, else quoted and cut.
_PLAIN = re.compile(r"[][A-Za-z0-9_.*+\-]{1,64}")
_SHOWN_CHARACTERS = 40

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE = "tag:yaml.org,2002:merge"
_FLOAT = "tag:yaml.org,2002:float"


M = TypeVar("M", bound=pydantic.BaseModel)


class ArchitectureError(DcaccelError):
    """An architecture description that does not validate, or a request it cannot serve."""


def first_problem(error) -> tuple[dict, str, str]:
    """The first problem of a pydantic ``ValidationError``, where it is (``units.pe.count``) and how many
    more there are (`` (and 2 more)``, or empty): the parts of every one-line validation message."""
    problems = error.errors(include_url=False)
    first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return first, ".".join(shown(part) for part in first["loc"]), more


def shown(value: Any) -> str:
    """``value`` for a one-line message: a plain name as is, anything else quoted and cut to a few dozen
    characters (no line break of a key reaches the message)."""
    text = str(value)
    if _PLAIN.fullmatch(text):
        return text
    quoted = repr(text)
    return quoted if len(quoted) <= _SHOWN_CHARACTERS else quoted[: _SHOWN_CHARACTERS - 4] + "...'"


class _Loader(_Base):
    """The safe loader, refusing duplicate keys; floats in exponent notation without a dot resolve."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                key = "<<" if key_node.tag == _MERGE else self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:  # an unhashable key: the constructor reports it
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {shown(key)} appears twice in one mapping", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        """An integer, refusing the forms YAML 1.1 and 1.2 read differently (``010``: octal 8 or ten;
        ``1:30``: sexagesimal 90 or text)."""
        text = self.construct_scalar(node)
        _refuse_ambiguous(text, node)
        if len(text) > MAX_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {len(text)} characters (at most {MAX_DIGITS})", node.start_mark
            )
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        _refuse_ambiguous(self.construct_scalar(node), node)
        return super().construct_yaml_float(node)


def _refuse_ambiguous(text: str, node) -> None:
    if ":" in text or re.fullmatch(r"[-+]?0[0-9_]+", text):
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"{shown(text)} is read differently by YAML 1.1 and 1.2: write it in plain decimals",
            node.start_mark,
        )


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor(_FLOAT, _Loader.construct_yaml_float)
_Loader.add_implicit_resolver(
    _FLOAT, re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"), list("-+.0123456789")
)


def read_file(path: str | Path, what: str) -> str:
    """The UTF-8 text of the file ``path`` (a ``what``, e.g. ``architecture file``), read as data; raises
    :class:`ArchitectureError` in one line naming it when it does not exist, is larger than :data:`MAX_BYTES`
    or cannot be read."""
    file = Path(path)
    if not file.is_file():
        raise ArchitectureError(f"{what} {path} does not exist")
    if file.stat().st_size > MAX_BYTES:
        raise ArchitectureError(f"{what} {path} is larger than {MAX_BYTES} bytes")
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ArchitectureError(f"{what} {path} cannot be read ({type(err).__name__})") from None


def validated(
    model: type[M],
    data: Any,
    where: str,
    describe: Callable[[pydantic.ValidationError], str],
    error: type[DcaccelError] = ArchitectureError,
    expected: str = "a mapping",
) -> M:
    """``data`` (parsed YAML) validated as the pydantic ``model``; raises ``error`` in one line: ``{where}:
    expected {expected}, got ...`` when ``data`` is not a mapping, ``describe(the validation error)`` when it
    does not validate."""
    if not isinstance(data, dict):
        got = "nothing" if data is None else type(data).__name__
        raise error(f"{where}: expected {expected}, got {got}")
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as err:
        raise error(describe(err)) from None


def read_yaml(text: str, source: str, what: str = "architecture") -> Any:
    """The data of YAML ``text`` (see the module docstring); raises :class:`ArchitectureError` in one line
    naming the ``what`` (``architecture``, ``study``) ``source`` (a name or file) and the line of the problem."""
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise ArchitectureError(f"{what} {source}: larger than {MAX_BYTES} bytes")
    try:
        _check_shape(text, f"{what} {source}")
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is the safe loader
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark is not None else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        if problem == "exceeded maximum nesting depth":  # libyaml's own limit (since 6.0.4), far above MAX_DEPTH
            raise ArchitectureError(f"{what} {source}:{where} nested deeper than {MAX_DEPTH} levels") from None
        raise ArchitectureError(f"{what} {source}:{where} not valid YAML ({problem})") from None


def _check_shape(text: str, named: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH and more than MAX_NODES nodes, aliases expanded, from the
    parser's events alone; the refusal starts with ``named`` (``architecture NAME``)."""
    shapes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, depth) of the node it names
    open_collections: list[list] = []  # per collection being read: [anchor, nodes, depth of its deepest child]
    total = 0  # nodes of the documents read so far

    def fail(event, problem: str):
        raise ArchitectureError(f"{named}: line {event.start_mark.line + 1}: {problem}")

    for event in yaml.parse(text, Loader=_Base):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_collections) >= MAX_DEPTH:
                fail(event, f"nested deeper than {MAX_DEPTH} levels")
            open_collections.append([event.anchor, 1, 0])
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, nodes, depth = open_collections.pop()
            shape = (nodes, depth + 1)
        elif isinstance(event, yaml.ScalarEvent):
            anchor, shape = event.anchor, (1, 1)
        elif isinstance(event, yaml.AliasEvent):
            anchor, shape = None, shapes.get(event.anchor)
            if shape is None or any(c[0] == event.anchor for c in open_collections):
                fail(event, f"alias *{shown(event.anchor)} names no complete node before it")
        else:
            continue
        if anchor is not None:
            shapes[anchor] = shape
        if len(open_collections) + shape[1] > MAX_DEPTH:
            fail(event, f"nested deeper than {MAX_DEPTH} levels")
        if open_collections:
            parent = open_collections[-1]
            parent[1] += shape[0]
            parent[2] = max(parent[2], shape[1])
        else:
            total += shape[0]
        if total + sum(collection[1] for collection in open_collections) > MAX_NODES:
            fail(event, f"more than {MAX_NODES} nodes once aliases are expanded")
