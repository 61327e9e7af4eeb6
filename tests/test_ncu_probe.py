"""The doctor's probe kernel without a GPU: its PTX through ptxas, its driver calls through a fake libcuda.

The fake driver (C, built here with the system compiler) checks what a real one would need: a NUL-terminated PTX
image naming the kernel, one block of 32 threads, and a kernel parameter that points at the device address
``cuMemAlloc`` returned. Skipped where no C compiler or ptxas is installed.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_roofline.counters.ncu import probe

FAKE_DRIVER = r"""
#include <stdint.h>
#include <string.h>
#include <stdio.h>
static char log_[512];
static uint64_t allocated = 0xdead0000ULL;
static int fail_init = 0;
const char *fake_log(void) { return log_; }
void fake_fail_init(int code) { fail_init = code; }
void fake_reset(void) { log_[0] = 0; }
static void note(const char *what) { strncat(log_, what, sizeof(log_) - strlen(log_) - 1); }
int cuGetErrorName(int code, const char **name) { *name = code == 100 ? "CUDA_ERROR_NO_DEVICE" : "?"; return 0; }
int cuInit(unsigned flags) { note("init "); return flags == 0 ? fail_init : 1; }
int cuDeviceGet(int *device, int ordinal) { *device = 7; note("device "); return ordinal == 0 ? 0 : 1; }
int cuDevicePrimaryCtxRetain(void **ctx, int device) {
    *ctx = (void *)0x1234; note("retain "); return device == 7 ? 0 : 1;
}
int cuCtxSetCurrent(void *ctx) { note("current "); return ctx == (void *)0x1234 ? 0 : 1; }
int cuModuleLoadData(void **module, const void *image) {
    *module = (void *)0x5678; note("load ");
    return strstr((const char *)image, ".entry roofline_probe(") ? 0 : 1;
}
int cuModuleGetFunction(void **fn, void *module, const char *name) {
    *fn = (void *)0x9abc; note("function ");
    return module == (void *)0x5678 && strcmp(name, "roofline_probe") == 0 ? 0 : 1;
}
int cuMemAlloc_v2(uint64_t *dptr, size_t bytes) { *dptr = allocated; note("alloc "); return bytes == 4 ? 0 : 1; }
int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) {
    note("launch ");
    if (fn != (void *)0x9abc || gx != 1 || gy != 1 || gz != 1 || bx != 32 || by != 1 || bz != 1) return 1;
    if (shared != 0 || stream != NULL || extra != NULL) return 1;
    return *(uint64_t *)params[0] == allocated ? 0 : 2;
}
int cuCtxSynchronize(void) { note("sync "); return 0; }
int cuMemFree_v2(uint64_t dptr) { note("free"); return dptr == allocated ? 0 : 1; }
"""


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the fake libcuda")
    folder = tmp_path_factory.mktemp("fake_cuda")
    (folder / "fake_cuda.c").write_text(FAKE_DRIVER)
    library = folder / "libcuda.so.1"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(folder / "fake_cuda.c")], check=True)
    driver = ctypes.CDLL(str(library))
    driver.fake_log.restype = ctypes.c_char_p
    return driver


def test_probe_calls_the_driver_as_a_real_one_needs(fake_driver: ctypes.CDLL) -> None:
    fake_driver.fake_reset()
    probe.launch(fake_driver)
    assert fake_driver.fake_log().decode() == (
        "init device retain current load function alloc launch sync free")


def test_probe_reports_a_driver_error_by_name(fake_driver: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    fake_driver.fake_fail_init(100)
    monkeypatch.setattr(probe, "_load_driver", lambda: fake_driver)
    try:
        assert probe.main() == probe.EXIT_DRIVER_ERROR
    finally:
        fake_driver.fake_fail_init(0)
    assert "probe: cuInit failed: CUDA_ERROR_NO_DEVICE (100)" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (CUDA toolkit or nvidia-cuda-nvcc)")
@pytest.mark.parametrize("arch", ["sm_75", "sm_90", "sm_100", "sm_103", "sm_120"])
def test_probe_ptx_assembles(arch: str, tmp_path: Path) -> None:
    source = tmp_path / "probe.ptx"
    source.write_text(probe.PTX)
    subprocess.run(["ptxas", f"-arch={arch}", str(source), "-o", str(tmp_path / "probe.cubin")], check=True)
