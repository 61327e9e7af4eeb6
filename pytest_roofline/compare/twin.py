"""The twin: a pytest process in REF's worktree that runs the same tests when this session says so, and at each
call site takes turns with this side (:mod:`.lockstep`). This module starts it and speaks for this side.

The twin is told which tests to run one at a time; inside a test, its ``roofline.measure`` calls are matched to
this side's by their order in the test. A test or call site on one side only is not compared (new, removed).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_roofline.compare.channel import Channel
from pytest_roofline.compare.worktree import Checkout
from pytest_roofline.errors import ChannelClosed, CompareError

FD_VARIABLE = "PYTEST_ROOFLINE_TWIN_FD"
START_TIMEOUT_S = 600.0  # collection in the twin (imports, conftests) may take long on a cold machine
# Options of this session the twin never gets: it is told its own roofline settings, and runs serially.
_DROPPED_WITH_VALUE = {"-n", "--numprocesses", "--dist", "--maxprocesses", "--junitxml", "--junit-xml",
                       "--roofline-compare", "--roofline-compare-python", "--roofline-baseline", "--roofline-dir",
                       "--roofline-history", "--roofline-machine", "--roofline-cores", "--roofline-probe",
                       "--roofline-confirm", "--roofline-ops", "--basetemp", "--rootdir", "-c",
                       "--roofline-compare-max-slowdown", "--result-log", "--confcutdir"}
_DROPPED_FLAGS = {"--roofline", "--roofline-recharacterize", "--roofline-strict", "--roofline-warn-only",
                  "-x", "--exitfirst", "--lf", "--last-failed", "--ff", "--failed-first", "--sw", "--stepwise"}


def twin_arguments(args: Sequence[str]) -> list[str]:
    """This session's command-line arguments without the ones the twin must not inherit."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _DROPPED_WITH_VALUE:
            skip = "=" not in arg
            continue
        if arg in _DROPPED_FLAGS:
            continue
        kept.append(arg)
    return kept


@dataclass
class TestLink:
    """This side's view of the twin during one test."""

    __test__ = False
    twin: Twin
    nodeid: str
    seed: int = 0  # of the order inside each pair (the test's own, so a rerun draws the same orders)
    site: int = 0
    active: bool = True  # False once the twin's test ended or stopped comparing
    results: list[dict[str, Any]] = field(default_factory=list)  # per call site: the twin's region, or None

    def open_site(self, label: str, cores: Sequence[int] | None, roofs: dict[str, Any] | None = None) -> bool:
        """Wait for the twin to reach this test's next call site; True when it did (then: turns, then
        :meth:`close_site`), False when its test ended first (this call site is not compared)."""
        index = self.site
        self.site += 1
        if not self.active:
            return False
        message = self.twin.receive()
        if message["op"] == "test_done":
            self.active = False
            self.twin.finished[self.nodeid] = message
            return False
        if message["op"] != "ready" or message.get("site") != index:
            self.active = False
            return False
        self.twin.channel.send(op="begin", cores=list(cores) if cores else None, roofs=roofs)
        return True

    def turn(self, op: str, batch: int) -> tuple[float, int]:
        self.twin.channel.send(op=op, batch=batch)
        message = self.twin.receive()
        return float(message["s"]), int(message.get("faults", 0))

    def close_site(self) -> dict[str, Any] | None:
        self.twin.channel.send(op="site_end")
        message = self.twin.receive()
        return message.get("region")


class Twin:
    def __init__(self, process: subprocess.Popen[bytes], channel: Channel, checkout: Checkout, log: Path) -> None:
        self.process = process
        self.channel = channel
        self.checkout = checkout
        self.log = log
        self.nodeids: set[str] = set()
        self.finished: dict[str, dict[str, Any]] = {}
        self.error: str | None = None  # why the twin stopped, once it did

    @classmethod
    def start(cls, checkout: Checkout, pytest_args: Sequence[str], roofline_args: Sequence[str], log: Path,
              python: str | None = None) -> Twin:
        import pytest_roofline

        package_dir = str(Path(pytest_roofline.__file__).parent)
        boot = str(Path(__file__).parent.parent / "plugin" / "twin_boot.py")  # pytest glue: lives with the plugin
        cwd_on_path = "1" if ("" in sys.path or os.getcwd() in sys.path) else "0"
        ours, theirs = socket.socketpair()
        env = {**os.environ, FD_VARIABLE: str(theirs.fileno())}
        env.pop("PYTEST_XDIST_WORKER", None)
        env.pop("PYTEST_ADDOPTS", None)  # this session's extra options are this session's
        command = [python or sys.executable, boot, package_dir, cwd_on_path, "--",
                   *twin_arguments(pytest_args), *roofline_args]
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            try:
                process = subprocess.Popen(command, cwd=checkout.cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                           pass_fds=(theirs.fileno(),))
            except OSError as exc:
                raise CompareError(f"--roofline-compare: cannot start the twin ({command[0]}): {exc}") from None
        theirs.close()
        ours.settimeout(START_TIMEOUT_S)
        twin = cls(process, Channel(ours), checkout, log)
        try:
            message = twin.channel.receive()
        except (ChannelClosed, TimeoutError, OSError) as exc:
            twin.stop()
            raise CompareError(f"--roofline-compare: the twin in {checkout.cwd} did not start ({exc}); its output:"
                               f"\n{twin.log_tail()}") from None
        ours.settimeout(None)
        twin.nodeids = set(message.get("nodeids") or [])
        return twin

    def receive(self) -> dict[str, Any]:
        try:
            return self.channel.receive()
        except ChannelClosed as exc:
            self.error = f"the twin stopped ({exc}); its output ends:\n{self.log_tail()}"
            raise

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"

    def begin_test(self, nodeid: str) -> TestLink | None:
        """Tell the twin to run ``nodeid``; None when REF has no such test or the twin has stopped."""
        if self.error is not None or nodeid not in self.nodeids:
            return None
        try:
            self.channel.send(op="run", nodeid=nodeid)
        except ChannelClosed as exc:
            self.error = f"the twin stopped ({exc})"
            return None
        import zlib

        return TestLink(self, nodeid, seed=zlib.crc32(nodeid.encode("utf-8", "surrogatepass")))

    def end_test(self, link: TestLink) -> dict[str, Any] | None:
        """Let the twin's test finish (any call site this side did not reach is not compared); its outcome."""
        if self.error is not None:
            return None
        try:
            if link.nodeid not in self.finished:
                self.channel.send(op="end_test")
                while True:
                    message = self.receive()
                    if message["op"] == "test_done":
                        self.finished[link.nodeid] = message
                        break
                    if message["op"] == "ready":  # a call site this side never reached
                        self.channel.send(op="end_test")
        except ChannelClosed:
            return None
        return self.finished.get(link.nodeid)

    def stop(self) -> None:
        try:
            self.channel.send(op="exit")
        except ChannelClosed:
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.channel.close()
