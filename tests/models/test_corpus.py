"""The model corpus (``tests/models/corpus.py``) through the whole pipeline: import, lowering under each
MMM shape (mv, op, lmv), task-DAG extraction, validation and a streaming schedule on 16 PEs; one
lowering per model compiled and checked against onnxruntime.

Each model is imported once and lowered once per shape (cached for the module); the not-slow part
runs ResNet under ``mv``, everything else (each whole model takes seconds) is marked slow.
"""

import functools
import time

import pytest

import dcaccel
from dcaccel.frontend.ops import nodes_by_op_type
from tests.models import corpus

#: The (model, shape) runs of the fast suite: a CNN under one shape (tests/frontend/test_zoo_models.py runs
#: SqueezeNet's whole pipeline, and tests/dag the shapes on small workloads).
FAST = {("resnet", "mv")}

#: Seconds a model may take from import to schedule (the issue's bound), counted in CPU time of the test
#: process: on a machine shared with other jobs the wall time measures them too.
TIME_BUDGET = 120.0


def _param(name: str, fast: bool) -> pytest.param:
    """``name`` as a parameter, slow unless ``fast``."""
    return pytest.param(name, marks=[] if fast else [pytest.mark.slow], id=name)


def _models(shapes: tuple[str, ...]) -> list[pytest.param]:
    """Every model, fast when all its runs under ``shapes`` are."""
    return [_param(name, all((name, shape) in FAST for shape in shapes)) for name in corpus.names()]


def _runs() -> list[pytest.param]:
    """Every (model, shape), fast or slow."""
    return [
        pytest.param(*param.values, shape, marks=param.marks, id=f"{param.id}-{shape}")
        for shape in corpus.MMM_SHAPES
        for param in _models((shape,))
    ]


@functools.cache
def _imported(name: str) -> tuple[dcaccel.Workload, float]:
    """The model imported once per test module, and the CPU seconds the import took."""
    start = time.process_time()
    workload = corpus.load(name)
    return workload, time.process_time() - start


@functools.cache
def _run(name: str, shape: str) -> corpus.PipelineRun:
    return corpus.run_pipeline(_imported(name)[0], shape)


@pytest.mark.slow
@pytest.mark.parametrize("name", [_param(name, (name, "mv") in FAST) for name in corpus.names()])
def test_imports(name):
    workload, _ = _imported(name)
    assert workload.name == name
    assert len(workload.outputs) == 1
    assert nodes_by_op_type(workload.sdfg)  # ONNX library nodes, not yet lowered


@pytest.mark.slow
@pytest.mark.parametrize(("name", "shape"), _runs())
def test_lowers_extracts_and_schedules(name, shape):
    workload, import_seconds = _imported(name)
    run = _run(name, shape)
    run.dag.validate()
    assert run.choices  # every model of the corpus has matrix products (Conv, Gemm or MatMul)
    for task in run.dag.tasks:
        info = run.dag.info(task)
        if info.op in run.choices:
            assert info.implementation == shape, (task, info)
    lowered_ops = {run.dag.info(task).op for task in run.dag.tasks}
    assert set(run.choices) <= lowered_ops
    assert run.schedule.pes == corpus.PES
    assert run.schedule.lower_bound <= run.schedule.makespan <= run.schedule.work
    if corpus.MODELS[name].family is not corpus.Family.DECODER:
        assert run.opaque_tasks == 0, run.lowered.opaque
    assert import_seconds + run.cpu_seconds < TIME_BUDGET, (import_seconds, run.cpu_seconds, run.seconds)


@pytest.mark.parametrize("name", _models(corpus.MMM_SHAPES))
def test_the_shape_changes_the_task_dag(name):
    """The three MMM shapes give three different DAGs (the choices reach the matrix products)."""
    figures = {
        shape: (len(_run(name, shape).dag.tasks), _run(name, shape).schedule.makespan) for shape in corpus.MMM_SHAPES
    }
    assert len(set(figures.values())) == len(corpus.MMM_SHAPES), figures


#: One lowering per model is compiled; the zoo networks once (at opset 13: test_zoo_models checks opset 9).
VERIFIED = [
    _param(name, fast=False)
    for name, model in corpus.MODELS.items()
    if not model.source.startswith("zoo") or model.source.endswith("13")
]


@pytest.mark.parametrize("name", VERIFIED)
def test_lowered_model_matches_onnxruntime(name):
    """The ``lmv`` lowering (the fewest tasks), compiled and run on seeded inputs, against onnxruntime."""
    workload, _ = _imported(name)
    report = dcaccel.verify(workload, _run(name, "lmv").lowered)
    assert report.reference == "onnxruntime"
    assert report.passed, report.outputs
