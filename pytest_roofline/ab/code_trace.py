"""Which functions of a repository ran, and which of its files the process imported: the evidence
:func:`pytest_roofline.ab.impact.impact` joins with a change. Plain Python, standard library only.

Python >= 3.12 uses ``sys.monitoring`` (one callback per code object per trace); earlier versions
``sys.setprofile`` (a callback per call). ``benchmarks/impact_trace_cost.py`` measures what either costs.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import CodeType, FrameType, TracebackType
from typing import final

MODULE = "<module>"  # the block of a file's module-level code
ANY_FUNCTION = "*"  # a function of the file whose qualified name the interpreter cannot give (Python 3.10)
_SELF = os.path.realpath(__file__)
_PACKAGE_DIRS = frozenset({"site-packages", "dist-packages"})
_MONITORING_TOOLS = (3, 4)  # sys.monitoring ids no standard tool claims (debugger 0, coverage 1, profiler 2, ...)


@dataclass(frozen=True)
class TestTrace:
    """What one test ran, as :class:`CodeTrace` records it.

    ``functions``: (path, qualified name) of every repository function the test ran: setup, body, teardown and
    the measured calls, plus whatever ran for it outside its own trace (module import, a shared fixture built
    earlier). ``imported``: the repository files its process had imported. Paths are relative to the traced
    root, in posix form.
    """

    __test__ = False  # a pytest test module importing this class must not collect it

    functions: frozenset[tuple[str, str]]
    imported: frozenset[str]


# ---------------------------------------------------------------------------------------------------- tracing

def block_name(qualname: str) -> str:
    """The block a code object's ``co_qualname`` belongs to: lambdas, comprehensions and generator expressions
    are part of the function (or module-level code) that contains them."""
    parts = qualname.split(".")
    while parts and parts[-1].startswith("<") and parts[-1] != MODULE:
        parts.pop()
        if parts and parts[-1] == "<locals>":
            parts.pop()
    return ".".join(parts) or MODULE


class _Files:
    """The root's decision per file name, cached: the tracing callback sees each file name many times."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.realpath(root)
        self._prefix = os.path.join(self.root, "")
        self._files: dict[str, str | None] = {}
        self._venv_dirs: dict[str, bool] = {}

    def relative(self, filename: str) -> str | None:
        """``filename`` relative to the root in posix form; None outside it, in site-packages or in a venv."""
        try:
            return self._files[filename]
        except KeyError:
            pass
        rel: str | None = None
        if filename and not filename.startswith("<"):
            real = os.path.realpath(filename)
            # The tracer's own calls (start, stop) are the instrument, not the code under test.
            if real.startswith(self._prefix) and real != _SELF:
                tail = real[len(self._prefix):]
                parts = PurePosixPath(Path(tail).as_posix()).parts
                if not _PACKAGE_DIRS & set(parts) and not self._in_venv(os.path.dirname(real)):
                    rel = "/".join(parts)
        self._files[filename] = rel
        return rel

    def _in_venv(self, directory: str) -> bool:
        # A virtual environment is a folder holding pyvenv.cfg, whatever its name.
        if len(directory) <= len(self.root):
            return False
        known = self._venv_dirs.get(directory)
        if known is None:
            known = os.path.isfile(os.path.join(directory, "pyvenv.cfg")) or self._in_venv(os.path.dirname(directory))
            self._venv_dirs[directory] = known
        return known


_lock = threading.Lock()
_active: tuple[CodeTrace, ...] = ()  # read without the lock by the callbacks: rebound, never mutated
_tool: int | None = None  # the sys.monitoring tool id held while a trace is active (Python >= 3.12)
_untraced_depth = 0  # nested untraced() blocks (Python >= 3.12: the events are off for the whole process)
_FILES: dict[str, _Files] = {}


def _on_profile(frame: FrameType, event: str, arg: object) -> None:
    if event != "call":
        return
    active = _active
    if not active:
        # A thread that got the hook while a trace ran keeps it after the last trace stops: it drops it here.
        sys.setprofile(None)
        return
    code = frame.f_code
    for trace in active:
        trace._hit(code)


def _on_py_start(code: CodeType, offset: int) -> object:
    for trace in _active:
        trace._hit(code)
    if sys.version_info >= (3, 12):
        return sys.monitoring.DISABLE  # once per code object until restart_events
    return None


@final
class CodeTrace:
    """Records which functions of files under ``root`` run while active, from every thread.

    Use as a context manager or with :meth:`start`/:meth:`stop`; nested starts of one trace count, the outermost
    stop ends it, a stop without a start does nothing. Several traces may be active at once.

    Python >= 3.12: ``sys.monitoring`` PY_START events, each code object disabled after its first hit (and
    re-enabled by ``restart_events`` when a trace starts), so a function costs one callback per trace. Earlier:
    ``sys.setprofile`` and ``threading.setprofile``, a callback per call; threads already running at start are
    not traced there. When the hook is taken (another profiler, no free monitoring id), :attr:`incomplete`
    says why and :meth:`result` is None.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        with _lock:
            # One cache per root for the process: a trace per test would otherwise resolve every module's path
            # again at each start.
            self._files = _FILES.setdefault(str(self.root), _Files(self.root))
        self._depth = 0
        self._codes: dict[int, tuple[CodeType, tuple[str, str] | None]] = {}  # by id; the code kept alive
        self._functions: set[tuple[str, str]] = set()
        self._imported: set[str] = set()
        self.incomplete: str | None = None

    def __enter__(self) -> CodeTrace:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def active(self) -> bool:
        return self._depth > 0

    def start(self) -> None:
        global _active
        with _lock:
            self._depth += 1
            if self._depth > 1:
                return
            self._imported |= self._snapshot()
            _active = (*_active, self)  # before the hook goes in: a hook that finds no trace removes itself
            problem = _install()
            if problem is not None:
                _active = tuple(t for t in _active if t is not self)
                self.incomplete = problem
                return
            if sys.version_info >= (3, 12):
                sys.monitoring.restart_events()  # code an earlier trace disabled fires again

    def stop(self) -> None:
        global _active
        with _lock:
            if self._depth == 0:
                return
            self._depth -= 1
            if self._depth > 0:
                return
            if self in _active:
                _active = tuple(t for t in _active if t is not self)
                if not _active:
                    _uninstall()
            self._imported |= self._snapshot()
            self._codes.clear()  # the code objects are not held past the trace

    def functions(self) -> frozenset[tuple[str, str]]:
        """(path, qualified name) of every function under the root that ran while the trace was active."""
        return frozenset(self._functions)

    def imported_files(self) -> frozenset[str]:
        """Files under the root that ``sys.modules`` held at start or stop (now as well, while active)."""
        return frozenset(self._imported | self._snapshot()) if self.active else frozenset(self._imported)

    def result(self) -> TestTrace | None:
        """The trace as a :class:`TestTrace`, or None when the hook could not be installed."""
        if self.incomplete is not None:
            return None
        return TestTrace(self.functions(), self.imported_files())

    def _snapshot(self) -> set[str]:
        files = set()
        for module in list(sys.modules.values()):
            filename = getattr(module, "__file__", None)
            if isinstance(filename, str):
                rel = self._files.relative(filename)
                if rel is not None:
                    files.add(rel)
        return files

    def _hit(self, code: CodeType) -> None:
        entry = self._codes.get(id(code))
        if entry is None:
            rel = self._files.relative(code.co_filename)
            qualname = getattr(code, "co_qualname", None)  # Python 3.11+
            key = None if rel is None else (rel, block_name(qualname) if qualname else ANY_FUNCTION)
            self._codes[id(code)] = (code, key)
            if key is not None:
                self._functions.add(key)


def _install() -> str | None:
    """Installs the process-wide hook for the first active trace; returns why it cannot, or None."""
    global _tool
    if sys.version_info >= (3, 12):
        if _tool is not None:
            return None
        monitoring = sys.monitoring
        for tool in _MONITORING_TOOLS:
            if monitoring.get_tool(tool) is None:
                monitoring.use_tool_id(tool, "pytest-roofline change impact")
                monitoring.register_callback(tool, monitoring.events.PY_START, _on_py_start)
                monitoring.set_events(tool, 0 if _untraced_depth else monitoring.events.PY_START)
                _tool = tool
                return None
        return f"no free sys.monitoring tool id among {_MONITORING_TOOLS}"
    current = sys.getprofile()
    if current is not None and current is not _on_profile:
        return f"another profiler is active ({current!r})"
    sys.setprofile(_on_profile)
    threading.setprofile(_on_profile)  # threads started while tracing
    return None


def _uninstall() -> None:
    global _tool
    if sys.version_info >= (3, 12):
        if _tool is not None:
            monitoring = sys.monitoring
            monitoring.set_events(_tool, 0)
            monitoring.register_callback(_tool, monitoring.events.PY_START, None)
            monitoring.free_tool_id(_tool)
            _tool = None
        return
    if sys.getprofile() is _on_profile:
        sys.setprofile(None)
    if threading.getprofile() is _on_profile:
        threading.setprofile(None)


@contextmanager
def untraced() -> Iterator[None]:
    """No trace hook runs inside: for the timed calls, whose time a hook would change. Python >= 3.12: no
    events in the whole process; earlier: no hook in this thread. Code that runs only inside is not recorded."""
    global _untraced_depth
    if sys.version_info >= (3, 12):
        with _lock:
            _untraced_depth += 1
            if _tool is not None:
                sys.monitoring.set_events(_tool, 0)
        try:
            yield
        finally:
            with _lock:
                _untraced_depth -= 1
                if _tool is not None and _untraced_depth == 0:
                    sys.monitoring.set_events(_tool, sys.monitoring.events.PY_START)
        return
    ours = sys.getprofile() is _on_profile
    if ours:
        sys.setprofile(None)
    try:
        yield
    finally:
        if ours and _active:
            sys.setprofile(_on_profile)
