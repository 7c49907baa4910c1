"""``--strict`` and the opaque fallback on library nodes inside nested SDFGs.

DaCe's ONNX importer makes no nested SDFGs (it has no node for ``If``, ``Loop`` or ``Scan``, which the
import refuses in one line) and DaCe's Python frontend inlines the programs a ``@dace.program`` calls, but
an SDFG loaded as it is (``dcaccel.load(sdfg)``) may hold library nodes at any depth. The model of
``tests/dag/test_opaque.py`` (x @ w → LogSoftmax → Neg; LogSoftmax has no canonical implementation) is put
one or two nested SDFGs deep: the check the CLI's ``--strict`` runs (``refuse_opaque``), ``lower(...,
strict=True)`` and the opaque fallback all find its LogSoftmax there as at the top level, and the tasks
know the node they come from (``LoweredWorkload.origins``).
"""

import warnings

import dace
import pytest
from dace.ml import ONNXModel

import dcaccel
from dcaccel.dag import extract
from dcaccel.errors import UnsupportedOpError
from dcaccel.transforms.lower import OpaqueOpWarning, lower, opaque_nodes, refuse_opaque
from tests.dag.test_opaque import ELEMENTS, opaque_model

REFUSAL = "unsupported op LogSoftmax (node 'logsoftmax'): no dcaccel implementation"


def _nest(inner: dace.SDFG, name: str) -> dace.SDFG:
    """An SDFG whose one state runs ``inner`` as a nested SDFG on containers of the same names and shapes."""
    outer = dace.SDFG(name)
    arguments = {n: d for n, d in inner.arrays.items() if not d.transient}
    for container, desc in arguments.items():
        outer.add_array(container, desc.shape, desc.dtype)
    written = {n.data for s in inner.states() for n in s.data_nodes() if s.in_degree(n) > 0}
    outputs = {n: None for n in arguments if n in written}
    inputs = {n: None for n in arguments if n not in outputs}
    state = outer.add_state()
    nested = state.add_nested_sdfg(inner, inputs, outputs)
    for container in inputs:
        state.add_edge(state.add_read(container), None, nested, container, outer.make_array_memlet(container))
    for container in outputs:
        state.add_edge(nested, container, state.add_write(container), None, outer.make_array_memlet(container))
    outer.validate()
    return outer


@pytest.fixture(scope="module", params=[1, 2], ids=["one-deep", "two-deep"])
def nested_workload(request):
    sdfg = ONNXModel("opaque", opaque_model("LogSoftmax")).sdfg
    for level in range(request.param):
        sdfg = _nest(sdfg, f"level{level}")
    workload = dcaccel.load(sdfg, name="nested")
    assert not any(isinstance(n, dace.nodes.LibraryNode) for state in workload.sdfg.states() for n in state.nodes())
    return workload


def test_opaque_nodes_are_found_inside_nested_sdfgs(nested_workload):
    assert opaque_nodes(nested_workload.sdfg) == {"logsoftmax": "LogSoftmax"}


def test_the_strict_check_refuses_a_nested_node_in_one_line(nested_workload):
    with pytest.raises(UnsupportedOpError) as raised:
        refuse_opaque(nested_workload.sdfg)
    assert str(raised.value) == REFUSAL


def test_strict_lowering_refuses_a_nested_node(nested_workload):
    with pytest.raises(UnsupportedOpError) as raised:
        lower(nested_workload, strict=True)
    assert str(raised.value) == REFUSAL


def test_without_strict_the_nested_node_is_one_opaque_task(nested_workload):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered = lower(nested_workload, {"MatMul": "lmv"})
    assert lowered.opaque == {"logsoftmax": "LogSoftmax"}
    assert [str(w.message) for w in caught if issubclass(w.category, OpaqueOpWarning)][0].endswith(
        "kept as opaque tasks: logsoftmax (LogSoftmax)"
    )
    dag = extract(lowered)
    dag.validate()
    # the lowering knows which node of the nested SDFG every task comes from, as at the top level
    assert {dag.info(t).op for t in dag.tasks} == {"MatMul", "LogSoftmax", "Neg"}
    (task,) = [t for t in dag.tasks if dag.info(t).opaque]
    assert (dag.info(task).op, dag.info(task).node) == ("LogSoftmax", "logsoftmax")
    assert [dag.volume(u, task) for u in dag.predecessors(task)] == [ELEMENTS]
    assert [dag.volume(task, w) for w in dag.successors(task)] == [ELEMENTS]
