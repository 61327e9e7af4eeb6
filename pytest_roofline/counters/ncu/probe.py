"""The tiny kernel ``doctor`` profiles: one PTX kernel launched through the CUDA driver API with ctypes.

No torch, CuPy or compiler: the driver JIT-compiles the PTX (``sm_50`` PTX runs on every later GPU). Run as a file
(``python .../probe.py``) so the profiled child needs nothing but Python and ``libcuda``.

Exit codes: 0 the kernel ran; 3 no CUDA driver library; 4 a driver call failed (its error name is printed).
"""

from __future__ import annotations

import ctypes
import sys

from pytest_roofline.errors import DriverError

EXIT_RAN = 0
EXIT_NO_DRIVER = 3
EXIT_DRIVER_ERROR = 4
KERNEL_NAME = "roofline_probe"

# One FFMA and one store per thread: enough for ncu to have a kernel to profile.
PTX = f"""
.version 6.0
.target sm_50
.address_size 64

.visible .entry {KERNEL_NAME}(.param .u64 out)
{{
    .reg .b64 %rd<3>;
    .reg .f32 %f<3>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    cvt.rn.f32.u32 %f1, %r1;
    fma.rn.f32 %f2, %f1, %f1, %f1;
    st.global.f32 [%rd2], %f2;
    ret;
}}
"""


def _load_driver() -> ctypes.CDLL | None:
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _check(driver: ctypes.CDLL, call: str, result: int) -> None:
    if result != 0:
        text = ctypes.c_char_p()
        driver.cuGetErrorName(result, ctypes.byref(text))
        raise DriverError(f"{call} failed: {(text.value or b'?').decode()} ({result})")


def launch(driver: ctypes.CDLL) -> None:
    """Retain the primary context of device 0, load the PTX and run one block of 32 threads."""
    device, context = ctypes.c_int(), ctypes.c_void_p()
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    buffer = ctypes.c_uint64()
    _check(driver, "cuInit", driver.cuInit(0))
    _check(driver, "cuDeviceGet", driver.cuDeviceGet(ctypes.byref(device), 0))
    _check(driver, "cuDevicePrimaryCtxRetain", driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
    _check(driver, "cuCtxSetCurrent", driver.cuCtxSetCurrent(context))
    _check(driver, "cuModuleLoadData", driver.cuModuleLoadData(ctypes.byref(module), PTX.encode()))
    _check(driver, "cuModuleGetFunction",
           driver.cuModuleGetFunction(ctypes.byref(function), module, KERNEL_NAME.encode()))
    _check(driver, "cuMemAlloc", driver.cuMemAlloc_v2(ctypes.byref(buffer), ctypes.c_size_t(4)))
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(buffer), ctypes.c_void_p))
    driver.cuLaunchKernel.argtypes = [ctypes.c_void_p, *([ctypes.c_uint] * 7), ctypes.c_void_p,
                                      ctypes.c_void_p, ctypes.c_void_p]
    _check(driver, "cuLaunchKernel", driver.cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, None, params, None))
    _check(driver, "cuCtxSynchronize", driver.cuCtxSynchronize())
    _check(driver, "cuMemFree", driver.cuMemFree_v2(buffer))


def main() -> int:
    driver = _load_driver()
    if driver is None:
        print("probe: no CUDA driver library (libcuda) on this machine", file=sys.stderr)
        return EXIT_NO_DRIVER
    try:
        launch(driver)
    except DriverError as error:
        print(f"probe: {error}", file=sys.stderr)
        return EXIT_DRIVER_ERROR
    print(f"probe: {KERNEL_NAME} ran")
    return EXIT_RAN


if __name__ == "__main__":
    sys.exit(main())
