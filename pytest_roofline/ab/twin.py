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
from dataclasses import dataclass
from pathlib import Path

from pytest_roofline.ab.channel import Channel, Message
from pytest_roofline.ab.parity import CollectError, Missing, why_missing
from pytest_roofline.ab.worktree import Checkout
from pytest_roofline.errors import ChannelClosed, CompareError, TwinStopped
from pytest_roofline.record.region_record import RegionRecord

PACKAGE_DIR = Path(__file__).parent.parent  # this package's folder: a twin imports this plugin from it
TWIN_BOOT = Path(__file__).parent / "plugin" / "twin_boot.py"  # starts pytest in a twin (pytest glue: ab/plugin/)

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


def map_path(value: str, toplevel: Path, worktree: Path) -> str:
    """An absolute path inside this repository (``/repo/tests/test_a.py::test_x``) as the same place in REF's
    worktree; anything else as it is (relative paths already resolve there: the twin runs in the same
    sub-folder)."""
    path, sep, rest = value.partition("::")
    if not os.path.isabs(path):
        return value
    absolute = Path(os.path.normpath(path))
    for top in (toplevel, toplevel.resolve()):
        try:
            return str(worktree / absolute.relative_to(top)) + sep + rest
        except ValueError:
            continue
    return value


def twin_arguments(args: Sequence[str], toplevel: Path | None = None, worktree: Path | None = None) -> list[str]:
    """This session's command-line arguments without the ones the twin must not inherit; absolute paths into
    this repository (``toplevel``) pointed at REF's ``worktree``."""
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
        if toplevel is not None and worktree is not None:
            if arg.startswith("-") and "=" in arg:
                arg = f"{name}={map_path(arg.split('=', 1)[1], toplevel, worktree)}"
            elif not arg.startswith("-"):
                arg = map_path(arg, toplevel, worktree)
        kept.append(arg)
    return kept


# How an OpenMP runtime's idle threads wait. By default they spin after each parallel region (libgomp, which
# PyTorch's Linux wheels use: about 300,000 spins, milliseconds; Intel's: 200 ms), and the two twins of a pair take
# turns on the same cores: the side that just finished spins on the cores the other side's timed call runs on.
# Two identical processes taking turns on two cores read a conv and a GEMM about twice as slow as alone, and
# within a tenth of it with passive waiting (docs/ab-compare.md). A side's time must not depend on how the other
# side's code leaves its threads.
OMP_WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def twin_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """A twin's environment: this process's (``base``), less what belongs to this session
    alone, with OpenMP's idle threads waiting passively (``OMP_WAIT_POLICY=PASSIVE``: libgomp, LLVM's and
    Intel's runtimes all read it) unless the user chose how they wait."""
    env = dict(os.environ if base is None else base)
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)  # this session's extra options are this session's
    if not any(name in env for name in OMP_WAIT_VARIABLES):
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


@dataclass
class TestLink:
    """This side's view of the twin during one test."""

    __test__ = False
    twin: Twin
    nodeid: str
    active: bool = True  # False once the twin's test ended or stopped comparing (ab.pool opens its sites)

    def turn(self, op: str, batch: int, rewarm: bool) -> tuple[float, int]:
        self.twin.send(op=op, batch=batch, rewarm=rewarm)
        message = self.twin.receive()
        if message.get("op") != "t":
            raise self.twin.stopped(f"it answered a turn with {str(message.get('op'))[:40]!r}")
        return float(message["s"]), int(message.get("faults", 0))

    def close_site(self, region: bool = True) -> RegionRecord | None:
        """End the call site; ``region``: whether the twin counts its call and sends its region back (one
        REF twin per site does: counting in every twin cost each a second of startup and a count per test)."""
        self.twin.send(op="site_end", count=region)
        message = self.twin.receive()
        return message.get("region")


class Twin:
    def __init__(self, process: subprocess.Popen[bytes], channel: Channel, checkout: Checkout,
                 log: Path) -> None:
        self.process = process
        self.channel = channel
        self.checkout = checkout
        self.log = log
        self.nodeids: set[str] = set()
        self.collect_errors: list[CollectError] = []  # REF's collection errors
        self.rootdir: Path = checkout.cwd  # the twin's rootdir, as it reported it
        self.finished: dict[str, Message] = {}
        self.error: str | None = None  # why the twin stopped, once it did

    @classmethod
    def start(cls, checkout: Checkout, pytest_args: Sequence[str], roofline_args: Sequence[str], log: Path,
              python: str | None = None) -> Twin:
        """A twin of ``checkout``, a new interpreter (``python``, else this one) that reports its collection
        before this returns. A fresh interpreter draws its own address-space layout, as the comparing side did."""
        package_dir, boot = str(PACKAGE_DIR), str(TWIN_BOOT)
        cwd_on_path = "1" if ("" in sys.path or os.getcwd() in sys.path) else "0"
        ours, theirs = socket.socketpair()
        env = twin_environment()
        command = [python or sys.executable, boot, package_dir, cwd_on_path, "--",
                   *twin_arguments(pytest_args, checkout.toplevel, checkout.path), *roofline_args]
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            try:
                process = subprocess.Popen(command, cwd=checkout.cwd, env={**env, FD_VARIABLE: str(theirs.fileno())},
                                           stdout=out, stderr=subprocess.STDOUT, pass_fds=(theirs.fileno(),))
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
        if message.get("op") != "collected":
            twin.stop()
            raise CompareError(f"--roofline-compare: the twin in {checkout.cwd} did not report its collection; its "
                               f"output:\n{twin.log_tail()}")
        twin.nodeids = set(message.get("nodeids") or [])
        twin.collect_errors = [e for e in map(CollectError.of, message.get("errors") or []) if e is not None]
        if message.get("rootdir"):
            twin.rootdir = Path(str(message["rootdir"]))
        return twin

    def stopped(self, why: str) -> TwinStopped:
        """The twin is gone (or speaks nonsense): remember why, with its exit status and the end of its log, for
        this test and every later one."""
        if self.error is None:
            status = self.process.poll()
            if status is None:
                try:
                    status = self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    status = None
            said = "is still running but" if status is None else f"exited with status {status}:"
            whose = "this checkout's" if not self.checkout.commit else f"REF {self.checkout.ref}'s"
            self.error = (f"{whose} twin (pid {self.process.pid}) {said} {why}; its log "
                          f"{self.log} ends:\n{self.log_tail()}")
        return TwinStopped(self.error)

    def send(self, **message: object) -> None:
        try:
            self.channel.send(**message)
        except ChannelClosed as exc:
            raise self.stopped(f"the connection closed ({exc})") from None

    def receive(self) -> Message:
        try:
            return self.channel.receive()
        except ChannelClosed as exc:
            raise self.stopped(f"the connection closed ({exc})") from None

    def missing(self, nodeid: str) -> Missing:
        """Why REF has no twin test for ``nodeid`` (new, with the evidence; or an error: not compared)."""
        if self.error is not None:
            return Missing("error", f"not compared: {self.error}")
        return why_missing(nodeid, self.nodeids, self.collect_errors, self.rootdir,
                           f"{self.checkout.ref} ({self.checkout.commit[:12]})")

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
            self.send(op="run", nodeid=nodeid)
        except TwinStopped:
            return None
        return TestLink(self, nodeid)

    def end_test(self, link: TestLink) -> Message | None:
        """Let the twin's test finish (any call site this side did not reach is not compared); its outcome."""
        if self.error is not None:
            return None
        try:
            if link.nodeid not in self.finished:
                self.send(op="end_test")
                while True:
                    message = self.receive()
                    if message["op"] == "test_done":
                        self.finished[link.nodeid] = message
                        break
                    if message["op"] == "ready":  # a call site this side never reached
                        self.send(op="end_test")
        except TwinStopped:
            return None
        return self.finished.get(link.nodeid)

    def ask_to_exit(self) -> None:
        """Tell the twin to end its session (it tears its fixtures down, then leaves without a summary)."""
        try:
            self.channel.send(op="exit")
        except ChannelClosed:
            pass

    def wait_exit(self, timeout_s: float = 30.0) -> None:
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.channel.close()

    def stop(self) -> None:
        self.ask_to_exit()
        self.wait_exit()
