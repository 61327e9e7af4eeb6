"""--roofline-malloc tuned: a block above glibc's largest mmap threshold is reused, not mapped afresh."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is Linux-only")

# 48 MiB blocks, allocated, touched page by page and freed 5 times: minor faults of the last 4 rounds.
PROGRAM = """
import ctypes, resource, sys
from pytest_roofline.allocator import tune_malloc
if sys.argv[1] == "tuned":
    assert tune_malloc() is not None
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 48 * 2**20
def round_():
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    libc.free(block)
round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    round_()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(policy: str) -> int:
    done = subprocess.run([sys.executable, "-c", PROGRAM, policy], capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_a_block_above_the_largest_mmap_threshold_faults_every_time_by_default_and_never_when_tuned() -> None:
    pages = 4 * 48 * 2**20 // 4096  # 4 rounds of 12,288 pages
    assert faults("default") >= 0.9 * pages
    assert faults("tuned") < 100
