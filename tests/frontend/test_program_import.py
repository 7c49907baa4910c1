"""Import of ``@dace.program`` functions and SDFGs: inputs, outputs, symbols, reference (no compilation)."""

import dace
import numpy as np
import pytest

import dcaccel
from dcaccel.errors import DcaccelError, ShapeError
from dcaccel.frontend import Origin

N, K, M = (dace.symbol(name) for name in "NKM")


@dace.program
def matmul(A: dace.float64[N, K], B: dace.float64[K, M]):
    return A @ B


@dace.program
def scale_in_place(A: dace.float32[N], B: dace.float32[N]):
    B[:] = A * 2


@dace.program
def two_results(x):
    return x + 1, x * 2


def test_annotated_program_stays_symbolic():
    workload = dcaccel.load(matmul, symbols={"N": 3, "K": 4, "M": 5})
    assert workload.origin is Origin.DACE_PROGRAM
    assert workload.name == "matmul"
    assert [(s.name, s.shape, s.dtype) for s in workload.inputs] == [
        ("A", ("N", "K"), np.float64),
        ("B", ("K", "M"), np.float64),
    ]
    assert [(s.name, s.shape) for s in workload.outputs] == [("__return", ("N", "M"))]
    assert workload.symbols == {"N": 3, "K": 4, "M": 5}
    assert workload.sdfg.free_symbols == {"N", "K", "M"}
    assert workload.reference is matmul.f
    assert workload.weights == {}


@pytest.mark.parametrize(("n", "k", "m"), [(2, 3, 4), (1, 1, 1), (0, 2, 3)])
def test_example_inputs_bind_symbols(n, k, m):
    workload = dcaccel.load(matmul, (np.zeros((n, k)), np.zeros((k, m))))
    assert workload.symbols == {"N": n, "K": k, "M": m}
    assert [s.concrete_shape(workload.symbols) for s in workload.outputs] == [(n, m)]


def test_example_inputs_inconsistent_with_annotation():
    with pytest.raises(ShapeError, match=r"^tensor 'B': expected shape \(3, 4\), got \(2, 4\)$"):
        dcaccel.load(matmul, {"A": np.zeros((2, 3)), "B": np.zeros((2, 4))})


def test_in_place_output():
    workload = dcaccel.load(scale_in_place, symbols={"N": 4})
    assert [s.name for s in workload.inputs] == ["A"]
    assert [(s.name, s.container) for s in workload.outputs] == [("B", "B")]


def test_unannotated_program_with_example_inputs():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::1]
    workload = dcaccel.load(two_results, [x])
    assert [(s.name, s.shape, s.dtype) for s in workload.inputs] == [("x", (2, 3), np.float32)]
    assert [s.name for s in workload.outputs] == ["__return_0", "__return_1"]


def test_unannotated_program_without_example_inputs():
    with pytest.raises(DcaccelError, match=r"^program 'two_results': parameter 'x' has no type; give example inputs$"):
        dcaccel.load(two_results)


def test_sdfg():
    sdfg = matmul.to_sdfg()
    workload = dcaccel.load(sdfg, symbols={"N": 2, "K": 2, "M": 2}, name="bare")
    assert workload.origin is Origin.SDFG
    assert workload.sdfg is sdfg
    assert workload.name == "bare"
    assert workload.reference is None and workload.onnx_model is None
    assert [s.name for s in workload.inputs] == ["A", "B"]
    assert [s.name for s in workload.outputs] == ["__return"]


def test_workload_passes_through(mmm):
    assert dcaccel.load(mmm) is mmm


@pytest.mark.parametrize("model", [object(), 3, [1, 2]])
def test_unknown_model_type(model):
    with pytest.raises(DcaccelError, match=rf"^cannot load a {type(model).__name__}: expected"):
        dcaccel.load(model)
