"""Twins forked from a zygote (``ab/forker.py``, ``ab/plugin/twin_zygote.py``): the process handle a twin's owner
uses, and the fall-back to a new interpreter when the zygote cannot fork. The whole path (a compare session's
twins all children of one zygote) is checked through pytest in ``test_plugin_compare.py``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.ab import forker as forker_module
from pytest_roofline.ab.forker import ForkedProcess
from pytest_roofline.ab.twin import Twin, twin_environment
from pytest_roofline.ab.worktree import Checkout
from pytest_roofline.errors import CompareError

pytestmark = pytest.mark.skipif(not forker_module.supported(), reason="forking twins needs Linux with pidfd_open")


class Reaper:
    """The zygote's part: this test forked the child, so it reaps it and keeps its status."""

    def __init__(self) -> None:
        self.statuses: dict[int, int] = {}

    def status(self, pid: int) -> int | None:
        if pid not in self.statuses:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                self.statuses[pid] = os.waitstatus_to_exitcode(status)
        return self.statuses.get(pid)


def test_a_forked_twin_is_seen_running_then_ended_with_its_status() -> None:
    pid = os.fork()
    if pid == 0:
        time.sleep(0.5)
        os._exit(3)
    process = ForkedProcess(pid, Reaper())  # type: ignore[arg-type]
    assert process.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.01)
    assert process.wait(timeout=10) == 3 and process.poll() == 3
    process.kill()  # ended: nothing to kill, no error
    process.close()


def test_without_a_pidfd_the_end_is_asked_of_the_zygote(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(pid: int) -> int:
        raise OSError(38, "Function not implemented")  # a kernel before 5.3, or a seccomp filter

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    pid = os.fork()
    if pid == 0:
        time.sleep(0.3)
        os._exit(4)
    process = ForkedProcess(pid, Reaper())  # type: ignore[arg-type]
    assert process.pidfd is None and not process.gone
    assert process.wait(timeout=10) == 4


def test_a_zygote_that_cannot_fork_leaves_a_new_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given: list[socket.socket] = []

    class Broken:
        asked = 0

        def spawn(self, *args: Any) -> Any:
            Broken.asked += 1
            given.append(args[-1])
            raise OSError("the twins' zygote did not answer")  # it may still fork that twin, late

    started: list[list[str]] = []

    def popen(command: list[str], **kwargs: Any) -> Any:
        started.append(command)
        raise OSError("no interpreter here")

    monkeypatch.setattr(subprocess, "Popen", popen)
    checkout = Checkout("(this checkout)", "", tmp_path, tmp_path, Path("."))
    with pytest.raises(CompareError, match="cannot start the twin"):
        Twin.start(checkout, [], [], tmp_path / "twin.log", forker=Broken())  # type: ignore[arg-type]
    assert Broken.asked == 1 and len(started) == 1 and started[0][1].endswith("twin_boot.py")
    assert given[0].fileno() == -1  # the socket offered to the zygote is closed: the new interpreter has its own


def test_the_zygote_answers_status_and_ends_with_its_control_socket(tmp_path: Path) -> None:
    forker = forker_module.Forker.start(str(Path(forker_module.__file__).resolve().parent.parent),
                                        tmp_path / "zygote.log", dict(os.environ))
    assert forker is not None
    try:
        assert forker.status(os.getpid()) is None  # not its child: unknown, not an error
    finally:
        forker.close()
    assert forker.process.returncode == 0
    with pytest.raises(OSError):
        forker.spawn(["x"], tmp_path, {}, tmp_path / "t.log", socket.socket())


def test_a_zygote_that_imported_a_compared_checkouts_code_forks_nothing(tmp_path: Path) -> None:
    """The project under test is a library the zygote imports (here: the plugin, from its own folder): a twin
    forked from it would run the zygote's copy, not its checkout's."""
    package = Path(forker_module.__file__).resolve().parent.parent
    forker = forker_module.Forker.start(str(package), tmp_path / "zygote.log", dict(os.environ),
                                        avoid=[package.parent])
    assert forker is not None
    with pytest.raises(OSError, match="zygote"):
        forker.spawn(["x"], tmp_path, {}, tmp_path / "t.log", socket.socket())
    forker.close()
    assert forker.process.returncode == 3
    assert "a compared checkout: no forks" in (tmp_path / "zygote.log").read_text()


def test_twins_openmp_threads_wait_passively_unless_the_user_chose() -> None:
    env = twin_environment({"PATH": "/bin", "PYTEST_ADDOPTS": "-x", "PYTEST_XDIST_WORKER": "gw0"})
    assert env == {"PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE"}  # this session's own options stay here
    for name, value in (("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "1000000"), ("KMP_BLOCKTIME", "200")):
        assert twin_environment({name: value}) == {name: value}  # the user's choice of how threads wait stands


FORKS_ALIKE = r"""
import ctypes, importlib.util, os, random, sys
try:
    import torch  # as the zygote has it: the heap and mappings its import leaves, holes included
except ImportError:
    torch = None
from pytest_roofline.host.allocator import tune_malloc
spec = importlib.util.spec_from_file_location("zygote_under_test", sys.argv[1])
zygote = importlib.util.module_from_spec(spec)
spec.loader.exec_module(zygote)
malloc = ctypes.CDLL(None).malloc
malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
for scatter in (False, True):
    pipes = [os.pipe() for _ in range(4)]
    children = []
    for seed, (read, write) in enumerate(pipes):  # every fork before any answer is read: all start alike
        pid = os.fork()
        if pid == 0:
            if scatter:
                zygote._scatter_layout(random.Random(seed))
            if sys.argv[2] == "tuned":  # as the twin's plugin then sets it: every block from the heap
                tune_malloc()
            os.write(write, f"{malloc(64 * 1024)} {malloc(4 * 1024 * 1024)}".encode())
            os._exit(0)
        children.append(pid)
    for pid, (read, write) in zip(children, pipes):
        os.close(write)
        with os.fdopen(read) as answer:
            print(int(scatter), answer.read())
        os.waitpid(pid, 0)
"""


@pytest.mark.parametrize("malloc", ["default", "tuned"])
def test_forked_twins_that_allocate_alike_get_addresses_of_their_own(malloc: str) -> None:
    """A fork has its parent's heap and mappings: four forks of a new interpreter with torch imported (as the
    zygote is) that allocate a 64 KiB block and a 4 MiB one get the same addresses without the scatter (one
    draw of the layout for all the pairs started together), each its own with it: under glibc's default
    thresholds (the 4 MiB block mapped) and under the plugin's tuned ones (both from the heap)."""
    lines = subprocess.run([sys.executable, "-c", FORKS_ALIKE, str(forker_module.SCRIPT), malloc],
                           capture_output=True, text=True, check=True, timeout=120).stdout.split("\n")
    found: dict[str, list[tuple[str, str]]] = {"0": [], "1": []}
    for line in filter(None, lines):
        scatter, small, large = line.split()
        found[scatter].append((small, large))
    assert len(found["0"]) == len(found["1"]) == 4
    assert len(set(found["0"])) == 1
    assert len({small for small, _ in found["1"]}) == 4 and len({large for _, large in found["1"]}) == 4
