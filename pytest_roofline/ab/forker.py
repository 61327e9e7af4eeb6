"""Twins forked from one zygote instead of started as new interpreters (``ab/plugin/twin_zygote.py``).

A twin as a new interpreter spends ~3.5 s of CPU importing torch, pytest and its plugins before it collects; a
compare session starts 6 to 10 of them, a quarter of its time on a 2-core runner. The zygote imports those once
and forks a twin per request; each twin still collects, configures and allocates on its own, so its heap pages
are its own (the level of variance the process pairs sample). Linux only (``fork``, ``pidfd_open``,
``SCM_RIGHTS``), and only for twins of this interpreter; anything else starts new interpreters as before.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ZYGOTE_FD = "PYTEST_ROOFLINE_ZYGOTE_FD"
SCRIPT = Path(__file__).resolve().parent / "plugin" / "twin_zygote.py"  # pytest glue: ab/plugin/
READY_TIMEOUT_S = 120.0  # the zygote's imports (torch) before it answers its first request


def supported() -> bool:
    return (sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(os, "pidfd_open")
            and hasattr(socket, "send_fds"))


class ForkedProcess:
    """The part of ``subprocess.Popen`` a twin's owner uses (``pid``, ``poll``, ``wait``, ``kill``) for a process
    that is the zygote's child, not ours: its end is seen through a pidfd, its status asked of the zygote."""

    def __init__(self, pid: int, forker: Forker) -> None:
        self.pid = pid
        self.forker = forker
        self.returncode: int | None = None
        self.gone = False  # ended before its pidfd could be opened
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            self.gone = True
        except OSError:  # no pidfd here (an old kernel, a seccomp filter): its status is asked of the zygote
            pass

    def _ended(self, timeout: float) -> bool:
        if self.gone:
            return True
        if self.pidfd is not None:
            return bool(select.select([self.pidfd], [], [], timeout)[0])
        deadline = time.monotonic() + timeout
        while self.forker.status(self.pid) is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def _status(self) -> int:
        for _ in range(20):  # the zygote reaps its children every 0.2 s
            status = self.forker.status(self.pid)
            if status is not None:
                return status
            time.sleep(0.1)
        return -1  # ended, status unknown (the zygote is gone)

    def poll(self) -> int | None:
        if self.returncode is None and self._ended(0):
            self.returncode = self._status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._ended(timeout if timeout is not None else 1e9):
                raise subprocess.TimeoutExpired(f"twin pid {self.pid}", timeout or 0.0)
            self.returncode = self._status()
        return self.returncode

    def kill(self) -> None:
        try:
            if self.pidfd is not None:  # never another process that reused the pid
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            elif not self.gone:
                os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class Forker:
    """The comparing side's end of the zygote: ``spawn`` a twin, ask a twin's exit status, ``close``."""

    def __init__(self, process: subprocess.Popen[bytes], control: socket.socket) -> None:
        self.process = process
        self.control = control
        self.lock = threading.Lock()  # pairs start in parallel threads: one request and its answer at a time
        self.broken: str | None = None

    @classmethod
    def start(cls, package_dir: str, log: Path, env: Mapping[str, str], avoid: Sequence[Path] = ()) -> Forker | None:
        """The zygote, importing in the background; None where twins cannot be forked here. ``avoid``: the
        checkouts compared; a zygote whose imports load a module from one of them (the project under test is
        a library torch imports) ends at once, and twins start as new interpreters."""
        if not supported():
            return None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log.parent.mkdir(parents=True, exist_ok=True)
        try:
            with log.open("wb") as out:
                process = subprocess.Popen([sys.executable, str(SCRIPT), package_dir, *map(str, avoid)],
                                           env={**env, ZYGOTE_FD: str(theirs.fileno())}, stdin=subprocess.DEVNULL,
                                           stdout=out, stderr=subprocess.STDOUT, pass_fds=(theirs.fileno(),))
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        return cls(process, ours)

    def _ask(self, request: dict[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        with self.lock:
            if self.broken is not None:
                raise OSError(self.broken)
            try:
                self.control.settimeout(READY_TIMEOUT_S)
                socket.send_fds(self.control, [json.dumps(request).encode()], list(fds))
                answer = self.control.recv(1 << 16)
            except OSError as exc:
                self.broken = f"the twins' zygote did not answer ({exc})"
                raise OSError(self.broken) from None
            try:
                if not answer:
                    raise ValueError(f"it has ended (status {self.process.poll()})")
                return dict(json.loads(answer))
            except ValueError as exc:  # no answer, or not one this side understands: no more forks
                self.broken = f"the twins' zygote: {exc}"
                raise OSError(self.broken) from None

    def spawn(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path,
              sock: socket.socket) -> ForkedProcess:
        """A twin: ``argv`` as ``twin_boot.py`` takes it, in ``cwd`` with ``env``, its output in ``log``, its end
        of the channel ``sock``. Raises OSError when the zygote cannot fork it (start a new interpreter then)."""
        answer = self._ask({"op": "spawn", "argv": list(argv), "cwd": str(cwd), "env": dict(env),
                            "log": str(log)}, [sock.fileno()])
        if "pid" not in answer:
            self.broken = f"the twins' zygote could not fork: {answer.get('error')}"
            raise OSError(self.broken)
        return ForkedProcess(int(answer["pid"]), self)

    def status(self, pid: int) -> int | None:
        try:
            value = self._ask({"op": "status", "pid": pid}).get("status")
        except OSError:
            return None
        return None if value is None else int(value)

    def close(self) -> None:
        """End the zygote (its twins go on until they are told to exit)."""
        with self.lock:
            self.control.close()
            self.broken = "closed"
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
