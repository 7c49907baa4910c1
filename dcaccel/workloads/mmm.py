"""``mmm``: a matrix-matrix multiplication C[N×M] = A[N×K] · B[K×M] as a ``@dace.program``.

The sizes are symbolic in the SDFG; ``workload(**sizes)`` sets their default values (N, K, M).
"""

import dace

from dcaccel.frontend import Workload, load
from dcaccel.workloads.sizes import merge_sizes

N, K, M = (dace.symbol(name) for name in "NKM")

#: Default values of the symbolic sizes (all different, so that a transposition cannot go unnoticed).
DEFAULT_SIZES = {"N": 8, "K": 6, "M": 4}


@dace.program
def mmm(A: dace.float32[N, K], B: dace.float32[K, M]):
    return A @ B


def workload(**sizes: int) -> Workload:
    """The ``mmm`` workload; ``sizes`` overrides N, K or M."""
    return load(mmm, symbols=merge_sizes("mmm", DEFAULT_SIZES, sizes), name="mmm")
