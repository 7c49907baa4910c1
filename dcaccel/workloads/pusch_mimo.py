"""``pusch-mimo``: MMSE MIMO detection of the 5G uplink (PUSCH), per subcarrier, as a ``@dace.program``.

For every subcarrier s, with channel H[s] (A antennas × L layers), inverse noise covariance R[s]
(A × A, symmetric positive definite) and received vector y[s] (A), the detected layers are

    x[s] = (H[s]ᵀ R[s] H[s] + I)⁻¹ H[s]ᵀ R[s] y[s]

(the seed's G = inv(Hᵀ·R·H + I) · Hᵀ·R applied to y, for unit-power symbols). The L × L system is
solved explicitly, by a Cholesky factorisation and forward and backward substitution, so that the
program needs no LAPACK. Data is real (float64). The subcarriers form a parallel map.

:func:`sample_inputs` draws realistic inputs (the seed's open question "how can I generate synthetic
but realistic input data?"): ±1 symbols sent over a Gaussian channel with coloured noise, R the
inverse of that noise's covariance (see :func:`transmission`).
"""

from collections.abc import Mapping

import dace
import numpy as np

from dcaccel.frontend import Workload, load
from dcaccel.workloads.sizes import merge_sizes

S, A, L = (dace.symbol(name) for name in "SAL")

#: Default sizes: subcarriers S, receive antennas A, layers L.
DEFAULT_SIZES = {"S": 4, "A": 8, "L": 2}

#: Power of the white part of the noise.
NOISE_POWER = 0.1


@dace.program
def pusch_mimo(H: dace.float64[S, A, L], R: dace.float64[S, A, A], y: dace.float64[S, A]):
    x = np.zeros((H.shape[0], H.shape[2]), dtype=np.float64)
    for s in dace.map[0 : H.shape[0]]:
        HtR = np.transpose(H[s]) @ R[s]
        gram = HtR @ H[s] + np.eye(H.shape[2])
        rhs = HtR @ y[s]
        chol = np.zeros_like(gram)
        for i in range(H.shape[2]):
            for j in range(i + 1):
                acc = gram[i, j]
                for k in range(j):
                    acc = acc - chol[i, k] * chol[j, k]
                if i == j:
                    chol[i, j] = np.sqrt(acc)
                else:
                    chol[i, j] = acc / chol[j, j]
        z = np.zeros_like(rhs)
        for i in range(H.shape[2]):
            acc = rhs[i]
            for k in range(i):
                acc = acc - chol[i, k] * z[k]
            z[i] = acc / chol[i, i]
        for i in range(H.shape[2] - 1, -1, -1):
            acc = z[i]
            for k in range(i + 1, H.shape[2]):
                acc = acc - chol[k, i] * x[s, k]
            x[s, i] = acc / chol[i, i]
    return x


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
    """The ``pusch-mimo`` workload; ``sizes`` overrides S, A or L."""
    loaded = load(pusch_mimo, symbols=merge_sizes("pusch-mimo", DEFAULT_SIZES, sizes), name="pusch-mimo")
    loaded.input_sampler = sample_inputs
    return loaded
