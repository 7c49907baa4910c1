"""Composed DAGs are the whole-program DAGs, JSON for JSON.

For every built-in workload and five models of the real-model corpus (a CNN, two encoders, a decoder
and a zoo-style ONNX file), the fragments of the covering lowerings (every node under each of its
implementations) compose the DAG of seeded random per-node assignments; each is compared with
``extract(lower(workload, assignment))`` under every granularity and both edge-volume rules
(``TaskDAG.to_json``: nodes, edges, volumes, metadata and their order). A workload whose lowering the
fragment model does not describe must say why and compose nothing (the sweep then lowers it whole):
the expected reasons are listed, so that a workload silently dropping out fails.
"""

from __future__ import annotations

import random
import warnings

import pytest

import dcaccel
from dcaccel.dag.compose import Composer
from dcaccel.dag.extract import Granularity, extract
from dcaccel.errors import DcaccelError
from dcaccel.exploration.assignments import Assignment
from dcaccel.exploration.dags import covering_assignments, expansions_for
from dcaccel.exploration.load import default_implementations
from dcaccel.frontend.ops import nodes_by_op_type
from dcaccel.transforms.lower import lower

GRANULARITIES = [Granularity.parse(g) for g in ("task", "coarse", "tiles=4")]
RULES = ("exact", "reference")
TWO_NODES = "touches the containers of nodes"  # gpt2: a softmax's init map, named as another layer's softmax
NOT_BACK = "do not compose back"  # the program's own maps between the nodes (pusch-mimo's regularisation)

#: workload -> (random assignments compared, expected reason composition does not apply or None).
BUILTIN = {
    "conv-seed": (3, None),
    "mmm": (3, None),
    "lenet": (3, None),
    "mobilenetv2-block": (3, None),
    "transformer-encoder": (2, None),
    "pusch-mimo": (1, NOT_BACK),
    "resnet18": (2, None),
}
#: Seconds each (several lowerings of a whole network): the full suite only.
SLOW = {"resnet18", "lenet", "mobilenetv2-block", "transformer-encoder", "pusch-mimo"}
CORPUS = {
    "resnet": (3, None),
    "bert": (1, None),
    "vit": (1, None),
    "googlenet-opset13": (2, None),
    "gpt2": (1, TWO_NODES),
}


def _workload(name: str):
    if name in CORPUS:
        from tests.models import corpus

        return corpus.load(name)
    return dcaccel.workloads.get(name)


def _case(name: str):
    if name in BUILTIN:
        marks = [pytest.mark.slow] if name in SLOW else []
    else:
        marks = [pytest.mark.slow]
    return pytest.param(name, id=name, marks=marks)


def _quiet(call, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(*args, **kwargs)


def _json_or_error(build):
    """The DAG's JSON, or the one-line error both paths must raise alike."""
    try:
        return _quiet(build).to_json()
    except DcaccelError as err:
        return f"{type(err).__name__}: {err}"


def _random_assignments(workload, count: int, seed: int = 0) -> list[Assignment]:
    """``count`` seeded random per-node assignments over the nodes' MMM shapes."""
    choices = default_implementations(workload)
    nodes = nodes_by_op_type(workload.sdfg)
    rng = random.Random(seed)
    return [
        Assignment(tuple((node, rng.choice(names)) for op, names in choices.items() for node in nodes[op]))
        for _ in range(count)
    ]


@pytest.fixture(scope="module", params=[_case(name) for name in [*BUILTIN, *CORPUS]])
def harvested(request):
    """A workload, its composer after the covering lowerings, and the expected outcome."""
    name = request.param
    count, reason = {**BUILTIN, **CORPUS}[name]
    workload = _workload(name)
    composer = Composer(workload, expansions_for(workload))
    for cover in covering_assignments(default_implementations(workload)):
        composer.add(_quiet(lower, workload, cover.as_dict(), expansions=expansions_for(workload)), str(cover))
    return workload, composer, count, reason


def test_composed_dags_are_the_whole_program_dags(harvested):
    workload, composer, count, reason = harvested
    if reason is not None:
        assert composer.reason is not None and reason in composer.reason
    else:
        assert composer.reason is None
    compared = 0
    for assignment in _random_assignments(workload, count):
        choices = assignment.as_dict()
        lowered = None if reason else _quiet(lower, workload, choices, expansions=expansions_for(workload))
        for granularity in GRANULARITIES:
            for rule in RULES:
                if reason is not None:
                    assert _quiet(composer.dag, choices, granularity, rule) is None  # the sweep lowers it whole
                    continue
                whole = _json_or_error(lambda: extract(lowered, granularity, rule))  # noqa: B023
                assert _json_or_error(lambda: composer.dag(choices, granularity, rule)) == whole  # noqa: B023
                compared += 1
    assert compared == (0 if reason else count * len(GRANULARITIES) * len(RULES))


@pytest.mark.parametrize("name", ["lenet", pytest.param("mobilenetv2-block", marks=pytest.mark.slow)])
def test_fragments_are_taken_from_the_lowered_program(name):
    workload = dcaccel.workloads.get(name)
    composer = Composer(workload, expansions_for(workload))
    cover = covering_assignments(default_implementations(workload))[0]
    lowered = _quiet(lower, workload, cover.as_dict(), expansions=expansions_for(workload))
    composer.add(lowered, str(cover))
    program = composer.program(composer.implementations(cover.as_dict()))[0]
    # every step of the lowered program is in exactly one fragment, with its accesses as lowered
    from dcaccel.dag.extract import origins_of
    from dcaccel.dag.scopes import read_program

    read = read_program(lowered.sdfg, workload.symbols, positive_sizes=True, sources=origins_of(lowered))
    assert program.steps == read.steps
    owned = sum(len(f.steps) for f in composer.fragments.values())
    assert owned + sum(len(f.steps) for f in (composer.glue or {}).values()) == len(read.steps)
    nodes = [node for nodes in nodes_by_op_type(workload.sdfg).values() for node in nodes]
    assert sorted(node for node, _ in composer.fragments) == sorted(nodes)


@pytest.mark.slow
def test_a_missing_fragment_composes_nothing():
    workload = dcaccel.workloads.get("lenet")
    composer = Composer(workload, expansions_for(workload))
    composer.add(
        _quiet(lower, workload, {"Conv": "mv", "Gemm": "mv"}, expansions=expansions_for(workload)), "Conv=mv,Gemm=mv"
    )
    assert composer.missing({"Conv": "op", "Gemm": "mv"}) == [("conv1", "op"), ("conv2", "op")]
    assert composer.dag({"Conv": "op", "Gemm": "mv"}, Granularity("task"), "exact") is None
    assert _quiet(composer.dag, {"Conv": "mv", "Gemm": "mv"}, Granularity("coarse"), "exact") is not None


@pytest.mark.slow
def test_a_composed_dag_that_differs_stops_composition():
    workload = dcaccel.workloads.get("conv-seed")
    composer = Composer(workload, expansions_for(workload))
    composer.add(_quiet(lower, workload, {"Conv": "mv"}, expansions=expansions_for(workload)), "Conv=mv")
    composed = _quiet(composer.dag, {"Conv": "mv"}, Granularity("coarse"), "exact")
    other = _quiet(extract, _quiet(lower, workload, {"Conv": "op"}, expansions=expansions_for(workload)), "coarse")
    assert not composer.check(composed, other, "Conv=mv")
    assert composer.reason == "the composed DAG of Conv=mv differs from the whole-program extraction"
    assert composer.dag({"Conv": "mv"}, Granularity("coarse"), "exact") is None


def test_a_bare_sdfg_is_not_composed():
    workload = dcaccel.workloads.get("conv-seed")

    class Bare:
        name = "bare"
        sdfg = workload.sdfg
        symbols = {}

    assert Composer(Bare()).reason == "no cache of its lowerings' expansions was given"
