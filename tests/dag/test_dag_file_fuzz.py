"""Fuzz of DAG files: random and mutated DAG JSON through ``TaskDAG.from_json`` + ``schedule`` and through
``dcaccel schedule``. Every input gives a valid result or exactly one error line (exit status 2 in the
CLI): never a traceback, never a hang (expressions are bounded), never a file nobody asked for.

The mutations start from small valid DAGs made here (concrete and symbolic) and replace values,
delete keys, change types, add, copy and drop nodes and edges, and put hostile volume text in.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dcaccel.cli import main
from dcaccel.dag import TaskDAG
from dcaccel.dag import generators as gen
from dcaccel.errors import DcaccelError
from dcaccel.scheduler import schedule

SETTINGS = settings(
    max_examples=int(os.environ.get("DCACCEL_FUZZ_EXAMPLES", 200)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],  # capsys is read per example
)


def _symbolic() -> dict:
    data = gen.fork_join(2, 1, 4).to_json()
    for i, edge in enumerate(data["edges"]):
        edge["volume"] = ["N*M", "Max(1, N)*M", "2*N", "ceiling(N/2) + 1"][i % 4] if edge["src"] else "N*M"
    return data


BASES = [gen.chain([2, 3]).to_json(), gen.fork_join(2, 2, 4).to_json(), gen.mmm("mv", 2, 2, 2).to_json(), _symbolic()]

#: Volume text a hostile or broken file may hold: code, huge powers, bad syntax, and fine expressions.
HOSTILE_TEXT = [
    "().__class__.__base__.__subclasses__()",
    "__import__('os').system('touch pwned')",
    "[c for c in ().__class__.__mro__]",
    "lambda: 0",
    "N.__class__",
    "9**9**9",
    "2**N",
    "(N**64)**64",
    "(A + B + C + D)**64",
    "2**63",
    "2**62*4",
    "N/0",
    "0**-1",
    "Max()",
    "floor(N, M)",
    "N +",
    "",
    " ",
    "\n",
    "N\nM",
    "x" * 2000,
    "(" * 500,
    "N",
    "N*M",
    "Max(0, N)*Max(0, M)",
    "ceiling(N/2)",
    "3",
    "-3",
    "7/2",
    "4611686018427387904",
]
SCALARS = st.one_of(
    st.sampled_from([None, True, False, 0, 1, 2, -1, 2**62, 2**63 - 1, 2**63, 10**30, 2.5, 3.0, 1e300]),
    # copied on every draw: a mutation must never edit the one list or dict other examples draw
    st.sampled_from([float("nan"), float("inf"), [], {}, [1], {"id": 0}, "task", "source", "sink", "buffer"]).map(
        copy.deepcopy
    ),
    st.sampled_from(HOSTILE_TEXT),
    st.integers(-3, 12),
    st.text(max_size=8),
)
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


@st.composite
def dag_documents(draw) -> object:
    """A DAG document: a base DAG with up to three mutations, or (rarely) random JSON."""
    if draw(st.integers(0, 9)) == 0:
        return draw(JSON)
    data = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        _mutate(draw, data)
    return data


def _mutate(draw, data: dict) -> None:
    """One random change of ``data`` in place."""
    section = draw(st.sampled_from(["nodes", "edges", "top"]))
    entries = data.get(section) if section != "top" else None
    action = draw(st.sampled_from(["set", "delete", "add", "copy", "drop", "replace"]))
    if section == "top" or not isinstance(entries, list) or not entries:
        key = draw(st.sampled_from(["name", "nodes", "edges"]))
        if action == "delete":
            data.pop(key, None)
        else:
            data[key] = draw(SCALARS)
        return
    index = draw(st.integers(0, len(entries) - 1))
    entry = entries[index]
    if action == "set" and isinstance(entry, dict):
        keys = ["id", "kind", "label", "info", "meta"] if section == "nodes" else ["src", "dst", "volume"]
        value = draw(SCALARS) if section == "nodes" or draw(st.booleans()) else draw(st.sampled_from(HOSTILE_TEXT))
        entry[draw(st.sampled_from(keys))] = value
    elif action == "delete" and isinstance(entry, dict) and entry:
        entry.pop(draw(st.sampled_from(sorted(entry))))
    elif action == "add":
        if section == "nodes":
            entries.append({"id": draw(st.integers(-1, len(entries) + 1)), "kind": draw(st.sampled_from(
                ["task", "buffer", "source", "sink"]))})  # fmt: skip
        else:
            nodes = data.get("nodes")
            ids = st.integers(-1, (len(nodes) if isinstance(nodes, list) else 0) + 1)
            entries.append({"src": draw(ids), "dst": draw(ids), "volume": draw(SCALARS)})
    elif action == "copy":
        entries.append(copy.deepcopy(entry))
    elif action == "drop":
        entries.pop(index)
    else:
        entries[index] = draw(SCALARS)


def _one_line(message: str) -> bool:
    return bool(message) and "\n" not in message


@pytest.mark.slow
@SETTINGS
@given(
    document=dag_documents(), pes=st.sampled_from([1, 2, 3, 10**8]), scheduler=st.sampled_from(["streaming", "list"])
)
def test_from_json_and_schedule(document, pes, scheduler):
    try:
        dag = TaskDAG.from_json(document)
        result = schedule(dag, pes, scheduler)
    except DcaccelError as err:
        event("error")
        assert _one_line(str(err)), str(err)
        return
    event("scheduled")
    assert result.makespan >= result.lower_bound
    assert result.summary()["pes"] == pes


def _listing(folder: Path) -> set[str]:
    """Every file and folder under ``folder``, relative to it."""
    return {
        os.path.relpath(os.path.join(root, name), folder)
        for root, dirs, files in os.walk(folder)
        for name in dirs + files
    }


@pytest.mark.slow
@SETTINGS
@given(
    document=dag_documents(),
    pes=st.sampled_from(["1", "3", "100000000"]),
    scheduler=st.sampled_from(["streaming", "list"]),
    onchip=st.sampled_from(["0", "4", "4096", str(10**18)]),
    gantt=st.sampled_from([None] * 9 + ["chart.png"]),
    as_json=st.booleans(),
)
def test_cli(capsys, document, pes, scheduler, onchip, gantt, as_json):
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        path = folder / "dag.json"
        path.write_text(json.dumps(document))
        argv = ["schedule", str(path), "--pes", pes, "--scheduler", scheduler, "--onchip", onchip]
        argv += ["--json"] * as_json
        if gantt:
            argv += ["--gantt", str(folder / gantt)]
        before = _listing(folder)
        capsys.readouterr()
        with contextlib.chdir(folder):  # a relative path a payload might write to lands here
            try:
                status = main(argv)
            except SystemExit as refusal:  # a flag refused while the arguments are read
                status = refusal.code
        captured = capsys.readouterr()
        created = _listing(folder) - before
    event(f"exit {status}")
    assert "Traceback" not in captured.err
    if status == 0:
        assert captured.err == "" and captured.out
        assert created == ({gantt} if gantt else set())
        if as_json:
            assert json.loads(captured.out)["pes"] == int(pes)
        return
    assert status == 2 and captured.out == "" and not created
    assert captured.err.startswith("dcaccel schedule: error: ") and captured.err.count("\n") == 1, captured.err
