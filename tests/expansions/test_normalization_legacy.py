"""Canonical BatchNormalization in the forms older exporters write (BatchNormalization-1, 6, 7, 9 and 14, at
opsets 5, 6, 7, 9, 14): values against onnxruntime (one compile per opset from 7; the older cases go in with
the opset-7 ones), task DAGs, training mode. (Opset 15 is that of tests/expansions/test_normalization.py.)

DaCe's importer refuses opsets before 7: those cases are converted to opset 7 as ``dcaccel.load`` converts a
model (:func:`dcaccel.frontend.onnx_prepare.normalize`, which drops ``is_test`` and ``consumed_inputs``). Older
exporters also declare the running and saved statistics outputs that nothing reads (``_declared`` cases). onnxruntime
computes those nodes in training mode (it decides by the number of outputs before opset 14), so the
reference of every case is the node with its output ``Y`` only: the inference the exporter meant.
"""

import numpy as np
import onnx
import pytest

from dcaccel.frontend.onnx_prepare import normalize
from tests.expansions.canonical_onnx import (
    assert_flat_maps,
    assert_output_matches,
    batchnorm_case,
    build_model,
    canonical_model,
    lowered_dag,
    random_feed,
    run_canonical,
    run_reference,
)

STATISTICS = ("mean_out", "var_out", "saved_mean", "saved_var")
"""The optional outputs of BatchNormalization before opset 14, all or none (from opset 14: the first two, in
training mode only)."""


def _batchnorm(name, shape, parameter_shape=None, outputs=("y",), **attributes):
    return batchnorm_case(name, shape, len(name), parameter_shape, outputs, **{"epsilon": 1e-3, **attributes})


CASES = {
    5: [  # BatchNormalization-1
        _batchnorm("bn1_consumed_inputs", (2, 3, 4), is_test=1, consumed_inputs=[0, 0, 0, 1, 1]),
        _batchnorm("bn1_declared", (1, 2, 3), outputs=("y", *STATISTICS), is_test=1, consumed_inputs=[0, 0, 0, 1, 1]),
    ],
    6: [
        _batchnorm("bn6_is_test", (2, 3, 4), is_test=1),
        _batchnorm("bn6_declared", (2, 3, 2, 2), outputs=("y", *STATISTICS), is_test=1),
        _batchnorm("bn6_per_activation", (2, 3, 4), (3, 4), is_test=1, spatial=0),
        _batchnorm("bn6_2d", (4, 3), is_test=1),
    ],
    7: [
        _batchnorm("bn7_spatial", (2, 3, 4, 5), spatial=1),
        _batchnorm("bn7_per_activation", (2, 2, 3, 2), (2, 3, 2), spatial=0),
        _batchnorm("bn7_declared", (1, 4, 3), outputs=("y", *STATISTICS)),
        _batchnorm("bn7_single_channel", (3, 1, 1)),
    ],
    9: [
        _batchnorm("bn9_4d", (2, 3, 4, 5)),
        _batchnorm("bn9_declared", (2, 3, 4), outputs=("y", *STATISTICS)),
        _batchnorm("bn9_2d", (5, 2)),
    ],
    14: [
        _batchnorm("bn14_inference", (2, 3, 4, 5), training_mode=0),
        _batchnorm("bn14_size_one", (1, 1, 1)),
        _batchnorm("bn14_5d", (1, 2, 2, 3, 2)),
    ],
}
LEGACY = (5, 6)
"""The opsets DaCe's importer refuses: converted to opset 7 and compiled with its cases."""
COMPILED = {7: CASES[5] + CASES[6] + CASES[7], 9: CASES[9], 14: CASES[14]}
#: The opsets of the structure tests: opset 5 (converted, the oldest form) in the fast subset, the others in the full
#: suite (a lowering each).
OPSETS = [opset if opset == 5 else pytest.param(opset, marks=pytest.mark.slow) for opset in sorted(CASES)]


def _only_y(model: onnx.ModelProto, node_outputs: bool) -> onnx.ModelProto:
    """``model`` with graph outputs ``Y`` only; with ``node_outputs``, its nodes declare ``Y`` only too."""
    trimmed = onnx.ModelProto()
    trimmed.CopyFrom(model)
    outputs = [o for o in trimmed.graph.output if o.name.endswith("__y")]
    del trimmed.graph.output[:]
    trimmed.graph.output.extend(outputs)
    if node_outputs:
        for node in trimmed.graph.node:
            del node.output[1:]
    return trimmed


def _model(opset: int, cases) -> onnx.ModelProto:
    """The cases of ``opset`` in one model whose graph outputs are the ``Y`` of each node, converted to opset 7
    (as ``dcaccel.load`` does) when older."""
    model = _only_y(build_model(cases, opset=opset), node_outputs=False)
    for output, case in zip(model.graph.output, cases, strict=True):  # ONNX infers no type for BatchNormalization-1
        if not output.type.HasField("tensor_type"):
            output.CopyFrom(onnx.helper.make_tensor_value_info(output.name, onnx.TensorProto.FLOAT, case.inputs["x"]))
    return normalize(model, f"opset-{opset} cases") if opset < 7 else model


def _merged(*models: onnx.ModelProto) -> onnx.ModelProto:
    """One model with the nodes, tensors and outputs of ``models`` (of one opset, disjoint tensors)."""
    merged = onnx.ModelProto()
    merged.CopyFrom(models[0])
    for model in models[1:]:
        for field in ("node", "input", "output", "initializer", "value_info"):
            getattr(merged.graph, field).extend(getattr(model.graph, field))
    return merged


@pytest.fixture(scope="module")
def results():
    """Per case output: onnxruntime's (nodes with ``Y`` only) and the canonical one, one compile per opset."""
    reference, canonical = {}, {}
    for opset, cases in COMPILED.items():
        parts = [_model(o, CASES[o]) for o in CASES if o == opset or (opset == 7 and o in LEGACY)]
        model = _merged(*parts)
        feed = random_feed(cases)
        reference.update(run_reference(_only_y(model, node_outputs=True), feed))
        canonical.update(run_canonical(model, feed, f"bn_legacy_{opset}"))
    return reference, canonical


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for cases in CASES.values() for c in cases], ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"), rtol=1e-4, atol=1e-5)


def test_older_opsets_are_converted_to_opset_7_without_is_test_and_consumed_inputs():
    model = _merged(*(_model(opset, CASES[opset]) for opset in LEGACY))
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 7)]
    attributes = {n.name: {a.name for a in n.attribute} for n in model.graph.node}
    assert attributes == {
        "bn1_consumed_inputs": {"epsilon"},
        "bn1_declared": {"epsilon"},
        "bn6_is_test": {"epsilon"},
        "bn6_declared": {"epsilon"},
        "bn6_per_activation": {"epsilon", "spatial"},
        "bn6_2d": {"epsilon"},
    }


@pytest.mark.parametrize("opset", OPSETS)
def test_every_form_is_one_flat_map(opset):
    sdfg = canonical_model(_model(opset, CASES[opset]), f"bn_legacy_structure_{opset}").sdfg
    sdfg.validate()  # the statistics outputs nothing reads are disconnected, connectors included
    labels = sorted(s.label for s in assert_flat_maps(sdfg))
    assert labels == sorted(f"{c.name}_normalize_map" for c in CASES[opset])


@pytest.mark.parametrize("opset", OPSETS)
def test_task_dag_has_one_task_per_node_and_no_opaque_task(opset):
    from dcaccel.dag.metrics import opaque_work

    dag = lowered_dag(_model(opset, CASES[opset]), f"bn_legacy_dag_{opset}")
    dag.validate()
    assert opaque_work(dag)[0] == 0
    tasks = {dag.info(t).node: dag.info(t).op for t in dag.tasks}
    assert tasks == {c.name: "BatchNormalization" for c in CASES[opset]}
    for task in dag.tasks:
        case = next(c for c in CASES[opset] if c.name == dag.info(task).node)
        (output,) = dag.successors(task)
        assert dag.volume(task, output) == np.prod(case.inputs["x"])


@pytest.mark.parametrize(
    "opset", [pytest.param(7, marks=pytest.mark.slow), pytest.param(9, marks=pytest.mark.slow), 14]
)
def test_a_statistics_output_that_is_read_is_training_mode(opset):
    from dcaccel.errors import UnsupportedOpError

    outputs = ("y", *STATISTICS) if opset < 14 else ("y", *STATISTICS[:2])
    case = _batchnorm("bn", (2, 3, 4), outputs=outputs, **({"training_mode": 1} if opset >= 14 else {}))
    model = build_model([case], opset=opset)  # every output is a graph output: the statistics are read
    for output in model.graph.output[1:]:  # before opset 9, ONNX infers no type for the statistics
        output.CopyFrom(onnx.helper.make_tensor_value_info(output.name, onnx.TensorProto.FLOAT, (3,)))
    with pytest.raises(UnsupportedOpError, match=r"^unsupported op BatchNormalization \(node 'bn'\): training mode"):
        canonical_model(model, f"bn_training_{opset}")
