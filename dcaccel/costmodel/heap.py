"""A steady heap for timing: memory a program frees stays in the process for its next call.

DaCe's generated code allocates a program's transients at the start of every call and frees them at its
end. glibc serves a large allocation by mapping fresh pages (``mmap``) and returns them to the kernel when
it is freed (``munmap``, or trimming the top of the heap), so every call's first write to each page of such
a transient faults, and the kernel zeroes the page: the step that writes the transient first pays for it.
Whether an allocation is mapped afresh moves with what the process allocated and freed before (glibc's
threshold for it adapts), so the same step measured in two processes read 1 to 6 times its own time (an
im2col copy of 5 MB: 2.7 ms against 0.23 ms; docs/costmodel.md, "The heap"). :func:`keep_freed_memory`
turns both off, so after the warm-up call every call writes pages the process already holds: what a step
computes, not how its memory was last handed out.
"""

from __future__ import annotations

import ctypes

#: glibc's ``mallopt`` parameters (``malloc.h``): the heap size above which ``free`` trims it, and the most
#: allocations served by ``mmap``.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
#: The trim threshold of a steady heap: the largest ``mallopt`` takes (an ``int``), 2 GiB.
NEVER_TRIM = 2**31 - 1

#: A row's ``provenance.heap``: measured with :func:`keep_freed_memory` in effect, or without it.
STEADY = "steady"
PER_CALL = "per-call"
HEAPS = (STEADY, PER_CALL)


def keep_freed_memory() -> str:
    """Make this process's C heap keep what is freed (no ``mmap`` allocations, no trimming), for the rest of
    the process's life; the heap a measurement is taken with: :data:`STEADY`, or :data:`PER_CALL` where the
    C library has no ``mallopt`` (not glibc) or refuses the setting."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return PER_CALL
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    kept = mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, NEVER_TRIM) == 1
    return STEADY if kept else PER_CALL
