"""Shared fixtures of the plugin's own tests: inner pytester runs under ``--roofline`` with pinned ceilings."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytester runs must not believe they are xdist workers because this suite runs under ``-n``: a
    worker writes no results.json and pins itself to a share of the cores."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CI", raising=False)  # CI=true turns --roofline-contended auto into judge


# In-process runs after other tests imported the plugin warn that it cannot be assertion-rewritten.
FAST = ("--roofline-max-time=0.05", "-p", "no:cacheprovider",
        "-W", "ignore::pytest.PytestAssertRewriteWarning")


# The machine most plugin tests pin: 1e8 FLOPs take 1 ms at its roof.
PINNED_MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}


@pytest.fixture
def fast_args() -> tuple[str, ...]:
    """Arguments for a quick inner ``--roofline`` run: a 50 ms budget per call site, no cache provider."""
    return FAST


@pytest.fixture
def write_machine(pytester: pytest.Pytester) -> Callable[[Mapping[str, Any]], Path]:
    """Write pinned machine ceilings into the pytester directory; returns the file's path."""

    def write(machine: Mapping[str, Any]) -> Path:
        path = pytester.path / "machine.json"
        path.write_text(json.dumps(machine))
        return path

    return write


@pytest.fixture
def machine_file(write_machine: Callable[[Mapping[str, Any]], Path]) -> Path:
    """``PINNED_MACHINE`` written as a pinned machine file; a test module overrides it for other ceilings."""
    return write_machine(PINNED_MACHINE)


@pytest.fixture
def run_roofline(pytester: pytest.Pytester) -> Callable[..., pytest.RunResult]:
    """Run the pytester suite in-process under ``--roofline`` against pinned ceilings, quickly."""

    def run(machine_file: Path, *args: str) -> pytest.RunResult:
        return pytester.runpytest("--roofline", f"--roofline-machine={machine_file}", *FAST, *args)

    return run


@pytest.fixture
def fake_core_load(monkeypatch: pytest.MonkeyPatch) -> Callable[[Iterator[Mapping[int, float]]], None]:
    """``fake_core_load(loads)``: every core placement of the run (``--roofline-cores auto`` on the first two
    cores, whatever the machine has: auto then takes one, as on a 2-core runner) sees the next of ``loads``, a
    map of core -> busy share, instead of /proc/stat (cores it does not name are idle)."""
    from pytest_roofline.host import cores
    from pytest_roofline.session import state

    def install(loads: Iterator[Mapping[int, float]]) -> None:
        allowed = cores.base_affinity()[:2]

        def planner(self: state.RooflineState) -> cores.Planner:
            if self.planner is None:
                self.planner = cores.Planner(cores.CoresSetting("auto"), allowed,
                                             sampler=lambda: {c: v for c, v in next(loads).items() if c in allowed})
            return self.planner

        monkeypatch.setattr(state.RooflineState, "core_planner", planner)

    return install


@functools.cache
def nvrtc_problem() -> str | None:
    """Why CUDA sources cannot be compiled offline here, or None when NVRTC works."""
    from pytest_roofline.characterize import cuda_ert
    from pytest_roofline.errors import NvrtcUnavailable

    try:
        cuda_ert.nvrtc_version()
    except NvrtcUnavailable as error:
        return str(error)
    return None


@pytest.fixture
def nvrtc() -> None:
    """Skip the test, with the reason, where NVRTC (cupy + nvidia-cuda-nvrtc-cu12) is not installed."""
    problem = nvrtc_problem()
    if problem is not None:
        pytest.skip(f"NVRTC not available (pip install cupy-cuda12x nvidia-cuda-nvrtc-cu12, or on CUDA 13 "
                    f"cupy-cuda13x nvidia-cuda-nvrtc): {problem}")


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """An S3-compatible server (moto's) on localhost for the store tests, started once; skipped with the reason
    where moto, boto3 or obstore is missing or the server cannot start."""
    try:
        import boto3  # noqa: F401
        import obstore  # noqa: F401
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        pytest.skip(f"the S3 tests need moto[server], boto3 and obstore (pip install -e '.[dev]'): {exc}")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    try:
        server.start()
    except Exception as exc:  # noqa: BLE001 - any failure to start is a skip with its reason
        pytest.skip(f"moto's S3 server did not start on localhost: {exc!r}")
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()
