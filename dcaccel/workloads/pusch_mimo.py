"""``pusch-mimo``: MMSE MIMO detection of the 5G uplink (PUSCH) over all subcarriers, as a ``@dace.program``.

For every subcarrier s, with channel H[s] (A antennas × L layers), inverse noise covariance R[s]
(A × A, symmetric positive definite) and received vector y[s] (A), the detected layers are

    x[s] = (H[s]ᵀ R[s] H[s] + I)⁻¹ H[s]ᵀ R[s] y[s]

(the seed's G = inv(Hᵀ·R·H + I) · Hᵀ·R applied to y, for unit-power symbols). Data is real (float64).
The program is a pipeline of canonical stages, each over all S subcarriers at once, named after the
container it writes (:func:`name_stages`: the task labels, and the node names a choice can address):

===============  ==========================================  ======================================
stage            computes                                    lowered to
===============  ==========================================  ======================================
``Ht``           Ht[s] = H[s]ᵀ (L × A)                       one flat map (one task)
``HtR``          HtR[s] = Ht[s]·R[s] (L × A)                 a batched MMM (``MatMul`` choice)
``gram``         gram[s] = HtR[s]·H[s] (L × L)               a batched MMM
``regularized``  gram[s] + I                                 one flat map
``inverse``      (gram[s] + I)⁻¹ (``np.linalg.inv``)          a task per subcarrier: Cholesky,
                                                             forward and back substitution
``W``            W[s] = inverse[s]·HtR[s] (L × A)            a batched MMM
``received``     y[s] as an A × 1 matrix                     one flat map
``detected``     W[s]·y[s] (L × 1)                           a batched MMM with M = 1
``x``            the detected layers x[s] (L), returned      one flat map
===============  ==========================================  ======================================

The MMM shape chosen for ``MatMul`` applies to all four products; every task of a stage reads
the same volume from each of its inputs. The inverse is the canonical ``Inv`` of
:mod:`dcaccel.expansions.linalg`, which unrolls the factorisation into steps over the matrix size:
the number of layers L is therefore a constant of the program (:func:`program`), while S and A stay
symbolic. The workload sets ``Inv`` to that implementation, which also runs the unlowered program
(DaCe's own ``Inv`` needs LAPACK).

:func:`sample_inputs` draws realistic inputs (the seed's open question "how can I generate synthetic
but realistic input data?"): ±1 symbols sent over a Gaussian channel with coloured noise, R the
inverse of that noise's covariance (see :func:`transmission`).
"""

from collections.abc import Mapping

import dace
import numpy as np
from dace.frontend.python.parser import DaceProgram
from dace.libraries.blas import MatMul
from dace.libraries.linalg import Inv

from dcaccel.expansions.implementation import CANONICAL
from dcaccel.frontend import Workload, load
from dcaccel.workloads.sizes import merge_sizes

S, A = (dace.symbol(name) for name in "SA")

#: Default sizes: subcarriers S, receive antennas A, layers L.
DEFAULT_SIZES = {"S": 4, "A": 8, "L": 2}

#: Power of the white part of the noise.
NOISE_POWER = 0.1


def program(layers: int) -> DaceProgram:
    """The detection program for ``layers`` layers (a constant of the program; S and A are symbolic).

    Its Python function is the reference: the same stages run in numpy.
    """

    @dace.program
    def pusch_mimo(H: dace.float64[S, A, layers], R: dace.float64[S, A, A], y: dace.float64[S, A]):
        Ht = np.empty((H.shape[0], layers, H.shape[1]), dtype=np.float64)
        for s, row, col in dace.map[0 : H.shape[0], 0:layers, 0 : H.shape[1]]:
            Ht[s, row, col] = H[s, col, row]
        HtR = Ht @ R
        gram = HtR @ H
        regularized = np.empty_like(gram)
        for s, row, col in dace.map[0 : H.shape[0], 0:layers, 0:layers]:
            regularized[s, row, col] = gram[s, row, col] + np.float64(row == col)
        inverse = np.empty_like(gram)
        for s in dace.map[0 : H.shape[0]]:
            inverse[s] = np.linalg.inv(regularized[s])
        W = inverse @ HtR
        received = np.empty((H.shape[0], H.shape[1], 1), dtype=np.float64)
        for s, row in dace.map[0 : H.shape[0], 0 : H.shape[1]]:
            received[s, row, 0] = y[s, row]
        detected = W @ received
        layers_out = np.empty((H.shape[0], layers), dtype=np.float64)
        for s, row in dace.map[0 : H.shape[0], 0:layers]:
            layers_out[s, row] = detected[s, row, 0]
        return layers_out

    return pusch_mimo


#: The program at the default number of layers.
pusch_mimo = program(DEFAULT_SIZES["L"])


def transmission(rng: np.random.Generator, subcarriers: int, antennas: int, layers: int) -> dict[str, np.ndarray]:
    """One simulated uplink slot: ±1 symbols ``x`` sent over Gaussian channels ``H`` with coloured noise.

    The noise of subcarrier s has covariance C[s] = NOISE_POWER · (I + Q Qᵀ / A) (white noise plus
    interference from random directions Q); ``y`` = H·x + noise and ``R`` = C⁻¹.
    """
    channel = rng.standard_normal((subcarriers, antennas, layers)) / np.sqrt(antennas)
    sent = rng.choice([-1.0, 1.0], size=(subcarriers, layers))
    interference = rng.standard_normal((subcarriers, antennas, antennas)) / np.sqrt(antennas)
    covariance = NOISE_POWER * (np.eye(antennas) + interference @ interference.transpose(0, 2, 1))
    noise = np.einsum("sij,sj->si", np.linalg.cholesky(covariance), rng.standard_normal((subcarriers, antennas)))
    received = np.einsum("sal,sl->sa", channel, sent) + noise
    return {"H": channel, "R": np.linalg.inv(covariance), "y": received, "x": sent}


def sample_inputs(rng: np.random.Generator, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Realistic inputs of the program: the channel, inverse noise covariance and received vectors of
    one :func:`transmission`."""
    sent = transmission(rng, *shapes["H"])
    return {name: sent[name] for name in ("H", "R", "y")}


def workload(**sizes: int) -> Workload:
    """The ``pusch-mimo`` workload; ``sizes`` overrides S, A or L (L fixes the program, S and A are the
    default values of its symbols)."""
    sizes = merge_sizes("pusch-mimo", DEFAULT_SIZES, sizes)
    symbols = {name: sizes[name] for name in ("S", "A")}
    loaded = load(program(sizes["L"]), symbols=symbols, name="pusch-mimo")
    name_stages(loaded.sdfg)
    for node, _ in loaded.sdfg.all_nodes_recursive():
        if isinstance(node, Inv):
            node.implementation = CANONICAL
    loaded.input_sampler = sample_inputs
    return loaded


def name_stages(sdfg: dace.SDFG) -> None:
    """Name every stage of the program (a top-level map or matrix product) after the container it writes
    (``Ht``, ``HtR``, ``gram``, ..., ``x`` for the returned layers), in place of DaCe's
    ``<program>_<line>`` and ``_MatMult_``: the task labels of the DAG and the node names an
    implementation choice can address (``{"gram": "op"}``)."""
    for node, state in sdfg.all_nodes_recursive():
        if state.sdfg is not sdfg or not isinstance(node, (dace.nodes.MapEntry, MatMul)):
            continue
        if isinstance(node, MatMul):
            node.name = node.label = _stage_name(state.out_edges(node)[0].dst.data)
        elif state.entry_node(node) is None:
            node.map.label = _stage_name(state.out_edges(state.exit_node(node))[0].dst.data)


def _stage_name(container: str) -> str:
    return "x" if container == "__return" else container
