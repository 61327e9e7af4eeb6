"""characterize(): cache reuse, corrupt/foreign cache files, fresh runs, the lock, the fingerprint."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.characterize import ceiling_cache as cache_module
from pytest_roofline.characterize import fingerprint as fp_module
from pytest_roofline.characterize import machine as machine_api
from pytest_roofline.model import Machine

FAKE_FINGERPRINT: dict[str, Any] = {"device": "cpu", "cpu_model": "Test CPU", "cores": [0, 1], "memory_bytes": 1 << 34,
                                    "threads": 2, "kernel_source_hash": "abc", "characterization_version": 1}


def _fake_machine(tag: str = "measured") -> Machine:
    return Machine(name=tag, peak_flops={"fp64": 20e9}, bandwidth={"DRAM": 20e9}, info={"method": "fake"})


@pytest.fixture
def fake_measure(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace fingerprint and measurement with cheap fakes; returns the list of measurements made."""
    calls: list[str] = []

    def measure(kind: str, index: int, fields: dict[str, Any], digest: str, report: Any, cache_dir: Path) -> Machine:
        calls.append(kind)
        return _fake_machine(f"measured-{len(calls)}")

    monkeypatch.setattr(machine_api, "fingerprint", lambda device="cpu": dict(FAKE_FINGERPRINT))
    monkeypatch.setattr(machine_api, "_measure", measure)
    return calls


def test_second_call_reuses_the_cache(tmp_path: Path, fake_measure: list[str]) -> None:
    first = machine_api.characterize(cache_dir=tmp_path)
    second = machine_api.characterize(cache_dir=tmp_path)
    assert fake_measure == ["cpu"]
    assert second.to_dict() == first.to_dict()
    files = list(tmp_path.glob("machine-cpu-*.json"))
    assert len(files) == 1
    assert json.loads(files[0].read_text())["format"] == cache_module.CACHE_FORMAT


def test_cache_dir_comes_from_the_environment(tmp_path: Path, fake_measure: list[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_ROOFLINE_CACHE", str(tmp_path / "env-cache"))
    machine_api.characterize()
    assert len(list((tmp_path / "env-cache").glob("machine-cpu-*.json"))) == 1


def test_fresh_measures_again_and_replaces(tmp_path: Path, fake_measure: list[str]) -> None:
    machine_api.characterize(cache_dir=tmp_path)
    fresh = machine_api.characterize(cache_dir=tmp_path, fresh=True)
    assert fake_measure == ["cpu", "cpu"]
    assert fresh.name == "measured-2"
    assert machine_api.characterize(cache_dir=tmp_path).name == "measured-2"


@pytest.mark.parametrize("content", ["{not json", "", "[1, 2]", '{"format": "pytest-roofline-machine/1"}'])
def test_corrupt_cache_is_replaced_with_a_warning(tmp_path: Path, fake_measure: list[str], content: str) -> None:
    path = machine_api.cache_file_for("cpu", tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    with pytest.warns(cache_module.CacheWarning, match="ignoring cache file"):
        result = machine_api.characterize(cache_dir=tmp_path)
    assert result.name == "measured-1"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the replacement is trusted without complaint
        assert machine_api.characterize(cache_dir=tmp_path).name == "measured-1"


def test_foreign_cache_is_not_trusted(tmp_path: Path, fake_measure: list[str]) -> None:
    path = machine_api.cache_file_for("cpu", tmp_path)
    foreign = {**FAKE_FINGERPRINT, "cpu_model": "Another CPU"}
    cache_module.write_cached(path, foreign, _fake_machine("foreign"))
    with pytest.warns(cache_module.CacheWarning, match="differs in: cpu_model"):
        result = machine_api.characterize(cache_dir=tmp_path)
    assert result.name == "measured-1"


def test_cache_with_wrong_format_tag_is_not_trusted(tmp_path: Path, fake_measure: list[str]) -> None:
    path = machine_api.cache_file_for("cpu", tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": "someone-else/9", "fingerprint": FAKE_FINGERPRINT,
                                "machine": _fake_machine("x").to_dict()}))
    with pytest.warns(cache_module.CacheWarning, match="foreign format"):
        assert machine_api.characterize(cache_dir=tmp_path).name == "measured-1"


def test_invalid_machine_record_is_not_trusted(tmp_path: Path, fake_measure: list[str]) -> None:
    path = machine_api.cache_file_for("cpu", tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"name": "bad", "peak_flops": {"fp64": -1.0}, "bandwidth": {}, "info": {}}
    path.write_text(json.dumps({"format": cache_module.CACHE_FORMAT, "fingerprint": FAKE_FINGERPRINT,
                                "machine": record}))
    with pytest.warns(cache_module.CacheWarning, match="invalid machine record"):
        assert machine_api.characterize(cache_dir=tmp_path).name == "measured-1"


# --- concurrency: several processes characterize once -------------------------------------------------

def _worker(cache_dir: str, marker_dir: str, fresh: bool, start_at: float) -> None:
    def slow_measure(kind: str, index: int, fields: dict[str, Any], digest: str, report: Any,
                     cache_dir: Path) -> Machine:
        Path(marker_dir, f"measured-{os.getpid()}").touch()
        time.sleep(0.5)  # long enough that the other workers arrive while this one holds the lock
        return _fake_machine(f"by-{os.getpid()}")

    machine_api.fingerprint = lambda device="cpu": dict(FAKE_FINGERPRINT)  # type: ignore[assignment]
    machine_api._measure = slow_measure  # type: ignore[assignment]
    while time.time() < start_at:
        time.sleep(0.005)
    result = machine_api.characterize(cache_dir=Path(cache_dir), fresh=fresh)
    Path(marker_dir, f"result-{os.getpid()}").write_text(result.name)


@pytest.mark.skipif(cache_module.fcntl is None, reason="no fcntl file locks on this platform")
@pytest.mark.parametrize("fresh", [False, True])
def test_concurrent_processes_characterize_once(tmp_path: Path, fresh: bool) -> None:
    cache_dir, markers = tmp_path / "cache", tmp_path / "markers"
    markers.mkdir()
    context = multiprocessing.get_context("fork")
    start_at = time.time() + 0.3
    workers = [context.Process(target=_worker, args=(str(cache_dir), str(markers), fresh, start_at))
               for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    measured = list(markers.glob("measured-*"))
    results = {p.read_text() for p in markers.glob("result-*")}
    assert len(measured) == 1
    assert results == {f"by-{measured[0].name.split('-')[1]}"}


def test_lock_blocks_a_second_holder(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    context = multiprocessing.get_context("fork")
    held = context.Event()

    def hold() -> None:
        with cache_module.exclusive_lock(lock):
            held.set()
            time.sleep(0.4)
            Path(tmp_path, "released").write_text(str(time.time()))

    child = context.Process(target=hold)
    child.start()
    assert held.wait(10)
    with cache_module.exclusive_lock(lock):
        acquired = time.time()
    child.join(10)
    assert acquired >= float(Path(tmp_path, "released").read_text())


# --- fingerprint -----------------------------------------------------------------------------------------

def test_fingerprint_is_stable_and_describes_the_machine() -> None:
    first = fp_module.fingerprint("cpu")
    second = fp_module.fingerprint("cpu")
    assert first == second
    assert fp_module.fingerprint_hash(first) == fp_module.fingerprint_hash(second)
    for key in ("cpu_model", "cores", "memory_bytes", "threads", "torch_threads", "kernel_source_hash",
                "characterization_version"):
        assert key in first
    assert first["core_count"] == len(first["cores"]) >= 1


def test_fingerprint_hash_changes_with_any_field() -> None:
    base = fp_module.fingerprint_hash(FAKE_FINGERPRINT)
    assert fp_module.fingerprint_hash(dict(reversed(list(FAKE_FINGERPRINT.items())))) == base
    for key, other in (("cores", [0]), ("threads", 1), ("kernel_source_hash", "abd"), ("memory_bytes", 1)):
        assert fp_module.fingerprint_hash({**FAKE_FINGERPRINT, key: other}) != base


def test_threads_follow_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert fp_module.cpu_threads() == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert fp_module.cpu_threads() == len(fp_module.affinity_cores())


@pytest.mark.parametrize(("text", "expected"), [("cpu", ("cpu", 0)), ("cuda", ("cuda", 0)),
                                                ("cuda:1", ("cuda", 1)), ("GPU", ("cuda", 0))])
def test_parse_device(text: str, expected: tuple[str, int]) -> None:
    assert fp_module.parse_device(text) == expected


def test_parse_device_rejects_unknown() -> None:
    with pytest.raises(ValueError, match="unknown device"):
        fp_module.parse_device("tpu")


@pytest.fixture
def read_only(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``read_only(folder)``: creating or opening files for writing under ``folder`` fails with EROFS, as on a
    read-only mount (the tests run as root, whom a chmod does not stop)."""
    import errno

    real_open = os.open

    def install(folder: Path) -> None:
        def fake_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if str(path).startswith(str(folder)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", fake_open)

    monkeypatch.setenv(cache_module.CACHE_ENV, "unused")  # restored after the test: the fallback points it elsewhere
    return install


def test_a_read_only_cache_with_a_valid_record_is_read(tmp_path: Path, fake_measure: list[str], read_only: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    machine_api.characterize(cache_dir=tmp_path)
    monkeypatch.setattr(machine_api, "_wants_spot_check", lambda machine, kind: True)  # takes the lock
    monkeypatch.setattr(machine_api, "_spot_check_holds", lambda machine, report: True)
    read_only(tmp_path)
    with pytest.warns(cache_module.CacheWarning, match="is read-only .*using its record as it is"):
        again = machine_api.characterize(cache_dir=tmp_path)
    assert again.name == "measured-1" and fake_measure == ["cpu"]


def test_a_read_only_empty_cache_measures_into_a_temporary_one(tmp_path: Path, fake_measure: list[str],
                                                                read_only: Any) -> None:
    read_only(tmp_path / "ro")
    with pytest.warns(cache_module.CacheWarning, match="is read-only .*characterizing into a temporary cache"):
        machine = machine_api.characterize(cache_dir=tmp_path / "ro")
    assert machine.name == "measured-1" and fake_measure == ["cpu"]
    temporary = Path(os.environ[cache_module.CACHE_ENV])
    assert temporary != tmp_path / "ro" and len(list(temporary.glob("machine-cpu-*.json"))) == 1
    assert not list((tmp_path / "ro").glob("machine-cpu-*.json"))


def test_the_spot_check_line_fits_120_columns() -> None:
    """The longest spot-check line, prefixed as the session prints it, with the widest readings a host gives."""
    from pytest_roofline.characterize.clean import Spot
    from pytest_roofline.characterize.machine import spot_summary

    spots = {"L1": Spot.of(413.47e9, 359.21e9), "DRAM": Spot.of(44.812e9, 52.337e9, (37.1e9, 53.2e9)),
             "fp64": Spot.of(101.23e9, 53.512e9, unit="GFLOP/s")}
    summary = spot_summary(spots)
    assert summary == "L1 413/359 DRAM 44.8/52.3 GB/s, fp64 101/53.5 GFLOP/s"
    longest = f"roofline: spot check unconfirmed, cached roofs used (now/cached: {summary})"
    assert len(longest) <= 120, len(longest)


def test_every_measurement_source_the_fingerprint_hashes_exists() -> None:
    """The fingerprint, and with it the machine key every history file is filed under, hashes these files: one
    renamed would hash as absent, silently move every machine to a new key and leave its history behind."""
    from pytest_roofline.characterize.fingerprint import MEASUREMENT_SOURCES, PACKAGE_DIR

    assert [name for name in MEASUREMENT_SOURCES if not (PACKAGE_DIR / name).is_file()] == []
    assert "build.py" in MEASUREMENT_SOURCES and "cpu.py" in MEASUREMENT_SOURCES
