"""Canonical linalg nodes (Cholesky, Inv, Solve, Transpose): values against numpy (one compile) and steps."""

import numpy as np
import pytest

from tests.expansions.canonical_onnx import assert_flat_maps

SIZES = (1, 2, 5)
DTYPES = (np.float64, np.complex128)


def _hermitian_positive_definite(rng, n, dtype):
    m = rng.standard_normal((n, n))
    if dtype is np.complex128:
        m = m + 1j * rng.standard_normal((n, n))
    return (m @ m.conj().T + n * np.eye(n)).astype(dtype)


def _linalg_sdfg(shapes):
    """One SDFG applying every linalg node, expanded canonically, to the inputs of each (n, dtype) in ``shapes``.

    Per case k: inputs ``a{k}`` (n×n), ``bm{k}`` (n×3), ``bv{k}`` (n); outputs in the order of
    :data:`REFERENCES` (``twice{k} = a + a`` is made by a map, so its inverse reads a task's output).
    """
    import dace
    from dace.libraries.linalg import Cholesky, Inv, Solve, Transpose

    import dcaccel.expansions  # noqa: F401  (registers the canonical implementations)

    sdfg = dace.SDFG("linalg_ops")
    state = sdfg.add_state()
    for k, (n, dtype) in enumerate(shapes):
        element = dace.complex128 if dtype is np.complex128 else dace.float64
        for name, shape in (("a", (n, n)), ("bm", (n, 3)), ("bv", (n,))):
            sdfg.add_array(f"{name}{k}", shape, element)
        outputs = {
            "cholesky": (n, n),
            "inv": (n, n),
            "solve_matrix": (n, 3),
            "solve_vector": (n,),
            "transpose": (3, n),
            "inv_of_task_output": (n, n),
        }
        for name, shape in outputs.items():
            sdfg.add_array(f"{name}{k}", shape, element)
        sdfg.add_array(f"twice{k}", (n, n), element, transient=True)
        state.add_mapped_tasklet(
            f"twice{k}",
            {"i": f"0:{n}", "j": f"0:{n}"},
            {"v": dace.Memlet(f"a{k}[i, j]")},
            "out = v + v",
            {"out": dace.Memlet(f"twice{k}[i, j]")},
            external_edges=True,
        )
        twice = next(node for node in state.data_nodes() if node.data == f"twice{k}")
        nodes = (
            (Cholesky(f"cholesky{k}"), {"_a": f"a{k}"}, {"_b": f"cholesky{k}"}),
            (Inv(f"inv{k}"), {"_ain": f"a{k}"}, {"_aout": f"inv{k}"}),
            (Solve(f"solve_matrix{k}"), {"_ain": f"a{k}", "_bin": f"bm{k}"}, {"_bout": f"solve_matrix{k}"}),
            (Solve(f"solve_vector{k}"), {"_ain": f"a{k}", "_bin": f"bv{k}"}, {"_bout": f"solve_vector{k}"}),
            (Transpose(f"transpose{k}", dtype=element), {"_inp": f"bm{k}"}, {"_out": f"transpose{k}"}),
            (Inv(f"inv_of_task_output{k}"), {"_ain": twice}, {"_aout": f"inv_of_task_output{k}"}),
        )
        for node, inputs, outputs in nodes:
            node.implementation = "canonical"
            for connector, data in inputs.items():
                source = data if isinstance(data, dace.nodes.AccessNode) else state.add_read(data)
                state.add_edge(source, None, node, connector, sdfg.make_array_memlet(source.data))
            for connector, data in outputs.items():
                state.add_edge(node, connector, state.add_write(data), None, sdfg.make_array_memlet(data))
    sdfg.expand_library_nodes()
    return sdfg


CASES = [(n, dtype) for n in SIZES for dtype in DTYPES]


@pytest.fixture(scope="module")
def results():
    """Inputs and outputs (by name) of every case, from one compiled SDFG."""
    rng = np.random.default_rng(0)
    sdfg = _linalg_sdfg(CASES)
    arguments = {}
    for k, (n, dtype) in enumerate(CASES):
        arguments[f"a{k}"] = _hermitian_positive_definite(rng, n, dtype)
        arguments[f"bm{k}"] = rng.standard_normal((n, 3)).astype(dtype)
        arguments[f"bv{k}"] = rng.standard_normal(n).astype(dtype)
    inputs = {name: value.copy() for name, value in arguments.items()}
    for name, desc in sdfg.arrays.items():
        if not desc.transient and name not in arguments:
            arguments[name] = np.zeros(desc.shape, desc.dtype.type)
    sdfg(**arguments)
    return inputs, arguments


REFERENCES = {
    "cholesky": lambda a, bm, bv: np.linalg.cholesky(a),
    "inv": lambda a, bm, bv: np.linalg.inv(a),
    "solve_matrix": lambda a, bm, bv: np.linalg.solve(a, bm),
    "solve_vector": lambda a, bm, bv: np.linalg.solve(a, bv),
    "transpose": lambda a, bm, bv: bm.T,
    "inv_of_task_output": lambda a, bm, bv: np.linalg.inv(a + a),
}


@pytest.mark.slow
@pytest.mark.parametrize("k", range(len(CASES)), ids=[f"n{n}-{np.dtype(d).name}" for n, d in CASES])
@pytest.mark.parametrize("operation", list(REFERENCES))
def test_matches_numpy(k, operation, results):
    inputs, outputs = results
    expected = REFERENCES[operation](inputs[f"a{k}"], inputs[f"bm{k}"], inputs[f"bv{k}"])
    actual = outputs[f"{operation}{k}"]
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_only_flat_maps_remain():
    from dace.sdfg import nodes

    sdfg = _linalg_sdfg([(3, np.float64)])
    assert not [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, nodes.LibraryNode)]
    assert_flat_maps(sdfg)


@pytest.mark.parametrize("n", (1, 2, pytest.param(4, marks=pytest.mark.slow)))
def test_inverse_of_n_by_n_is_6n_minus_2_steps(n):
    import dace

    from dcaccel.expansions import register

    register()

    @dace.program
    def inverse(a: dace.float64[n, n]):
        return np.linalg.inv(a)

    sdfg = inverse.to_sdfg()
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.LibraryNode):
            node.implementation = "canonical"
    sdfg.expand_library_nodes()
    labels = [s.label for s in assert_flat_maps(sdfg)]
    assert len(labels) == 6 * n - 2
    assert labels[0] == "inv_column_0_map"
    assert labels[-1] == "inv_output_map"


def test_symbolic_size_is_rejected():
    import dace

    from dcaccel.errors import UnsupportedOpError
    from dcaccel.expansions import register
    from dcaccel.expansions.implementation import CANONICAL

    size = dace.symbol("size")

    @dace.program
    def inverse(a: dace.float64[size, size]):
        return np.linalg.inv(a)

    sdfg = inverse.to_sdfg()
    (node,) = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.LibraryNode)]
    register()
    node.implementation = CANONICAL
    with pytest.raises(UnsupportedOpError, match="Inv.*symbolic matrix size"):
        sdfg.expand_library_nodes()
