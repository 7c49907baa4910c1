"""The steady heap a measurement is taken with: freed memory is reused without faulting its pages in again."""

import subprocess
import sys

import pytest

#: Allocates, writes and frees 64 MiB twice (as a program's transient on two calls) and prints the minor page
#: faults of the second time; with ``keep`` the heap is made steady first.
SECOND_CALL_FAULTS = """
import ctypes, resource, sys
from dcaccel.costmodel.heap import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory() == "steady"
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
size = 64 * 2**20
def call():
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    libc.free(ctypes.c_void_p(block))
call()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
call()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _second_call_faults(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", SECOND_CALL_FAULTS, mode], capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_steady_heap_reuses_freed_pages():
    pages = 64 * 2**20 // 4096
    assert _second_call_faults("as-is") >= pages // 2  # mapped afresh, faulted in again
    assert _second_call_faults("keep") < pages // 100
