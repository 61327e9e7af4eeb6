"""--roofline-malloc tuned: a block above glibc's largest mmap threshold is reused, not mapped afresh."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is Linux-only")

# 48 MiB blocks, allocated, touched page by page and freed 5 times: minor faults of the last 4 rounds.
PROGRAM = """
import ctypes, resource, sys
from pytest_roofline.host.allocator import tune_malloc
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


@pytest.mark.parametrize(("text", "mode"), [
    ("always [madvise] never\n", "madvise"), ("[always] madvise never\n", "always"),
    ("always madvise [never]\n", "never"), ("", None),
])
def test_thp_mode_reads_the_bracketed_choice(tmp_path, text: str, mode: str | None) -> None:
    from pytest_roofline.host.allocator import thp_mode

    setting = tmp_path / "enabled"
    setting.write_text(text)
    assert thp_mode(setting) == mode
    assert thp_mode(tmp_path / "missing") is None


def test_torch_thp_is_asked_for_only_where_the_kernel_grants_it(tmp_path) -> None:
    from pytest_roofline.host.allocator import THP_ENV, enable_torch_thp

    setting = tmp_path / "enabled"
    setting.write_text("always [madvise] never\n")
    environ: dict[str, str] = {}
    assert enable_torch_thp(environ, {}, setting).startswith("THP_MEM_ALLOC_ENABLE=1 (THP madvise")
    assert environ == {THP_ENV: "1"}
    late = enable_torch_thp({}, {"torch": object()}, setting)
    assert "torch was imported before the plugin could set it" in late
    mine = {THP_ENV: "0"}
    assert enable_torch_thp(mine, {}, setting) == "THP_MEM_ALLOC_ENABLE=0 (set by the user; THP madvise)"
    assert mine == {THP_ENV: "0"}
    setting.write_text("always madvise [never]\n")
    never: dict[str, str] = {}
    assert enable_torch_thp(never, {}, setting) == "4 KiB pages (transparent huge pages: never)"
    assert never == {}


def test_the_session_asks_torch_for_huge_pages_before_conftests_load(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.host.allocator import THP_ENV, thp_mode

    if thp_mode() not in ("always", "madvise"):
        pytest.skip(f"this kernel's THP mode is {thp_mode()}: no huge pages on request")
    pytester.makeconftest(f"import os\nSEEN = os.environ.get({THP_ENV!r})\n")
    pytester.makepyfile("""
import os, conftest
def test_seen():
    assert conftest.SEEN == "1"
""")
    monkeypatch.delenv(THP_ENV, raising=False)
    assert pytester.runpytest_subprocess("--roofline", "-p", "no:cacheprovider").ret == 0
    assert pytester.runpytest_subprocess("--roofline", "--roofline-malloc", "default", "-p",
                                         "no:cacheprovider").ret == 1  # not asked for: conftest saw None
