"""Every exception and warning class of pytest-roofline, in one place so callers can catch and filter them.

Warnings can be filtered by category: ``-W ignore::pytest_roofline.errors.RooflineWarning``. The modules that
raise these classes re-export them under their old names (``pytest_roofline.counters.ncu.backend.NoGpu``).
Plain Python: no pytest import, so the core stays usable without it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from pytest_roofline._redact import redact


class RooflineWarning(UserWarning):
    """Something about a roofline measurement deserves attention but does not fail the test."""


# --- raised by pytest_roofline.characterize.build

class BuildError(RuntimeError):
    """The C compiler is missing or rejected the kernel."""


# --- raised by pytest_roofline.characterize.ceiling_cache

class CacheWarning(UserWarning):
    """A cache file could not be trusted and is being replaced."""


# --- raised by pytest_roofline.characterize.cuda_ert

class NvrtcUnavailable(RuntimeError):
    """cupy or its NVRTC library is not installed."""


# --- raised by pytest_roofline.characterize.machine

class DisturbedCharacterizationWarning(UserWarning):
    """Other work on the machine kept the characterization from measuring undisturbed: roofs may be low."""


# --- raised by pytest_roofline.characterize.validate

class RoofError(ValueError):
    """A machine record failed the checks; the message names the file (if any) and every bad key."""

    def __init__(self, problems: Iterable[object], where: str = "") -> None:
        self.problems = list(problems)
        prefix = f"{where}: " if where else ""
        super().__init__(prefix + "; ".join(str(p) for p in self.problems))


# --- raised by pytest_roofline.counters.ncu.backend

class NcuBackendError(RuntimeError):
    """Base class of the ncu backend's outcomes."""


class NcuNotFound(NcuBackendError):
    pass


class NoGpu(NcuBackendError):
    pass


class ProfilingNotSupported(NoGpu):
    """ncu refuses this GPU ("Profiling is not supported on device N"): as if there were none to profile."""


class CountersNotPermitted(NcuBackendError):
    """ERR_NVGPUCTRPERM: the plugin skips the test with this message."""


class ProfiledChildFailed(NcuBackendError):
    def __init__(self, message: str, log_paths: Sequence[Path], returncode: int | None, timed_out: bool) -> None:
        super().__init__(message)
        self.log_paths = list(log_paths)
        self.returncode = returncode
        self.timed_out = timed_out


class NoKernelsInRange(NcuBackendError):
    pass


# --- raised by pytest_roofline.counters.ncu.child

class NvtxMissing(RuntimeError):
    """The child cannot mark its range without the ``nvtx`` package."""


# --- raised by pytest_roofline.counters.ncu.kernel_report

class NoKernelsError(ValueError):
    """The report holds no profiled kernel launch."""


# --- raised by pytest_roofline.counters.ncu.metrics

class UnsupportedComputeCapability(ValueError):
    """The metric tables cover compute capability 7.0 up to 12.x."""


# --- raised by pytest_roofline.counters.ncu.deferred

class NcuUnavailable(RuntimeError):
    """``--roofline-counter=ncu`` was asked for but cannot work here; the message names what is missing."""


# --- raised by pytest_roofline.counters.ncu.parse

class NcuParseError(ValueError):
    """The text holds no ncu CSV table (the messages ncu printed are part of the error)."""


# --- raised by pytest_roofline.counters.ncu.probe

class DriverError(RuntimeError):
    pass


# --- raised by pytest_roofline.counters.ncu.rep

class ReportReaderMissing(RuntimeError):
    """Neither the ``ncu_report`` module nor the ncu CLI is available to read a ``.ncu-rep`` file."""


class ReportReadError(RuntimeError):
    """ncu could not export the report."""


# --- raised by pytest_roofline.counters.ncu.ncu_units

class UnitError(ValueError):
    """A unit this module cannot convert."""


class NonFiniteNumber(ValueError):
    """A report's number is infinite or too large for a float (``1e400``)."""


# --- raised by pytest_roofline.record.loader

class InvalidRecord(ValueError):
    """A file or record read back cannot be trusted; the message starts with the field that failed."""


# --- raised by pytest_roofline.history.store (and its object-store and git-branch backends)

class StoreError(RuntimeError):
    """A history store could not be reached, read or written; the message names the store (never a secret:
    git's and the object store's words pass through the one redaction, ``_redact.redact``)."""

    def __init__(self, message: object = "") -> None:
        super().__init__(redact(str(message)))


class WriteInDoubt(StoreError):
    """A create failed in a way that does not prove the object is absent: the request may have landed (a
    timeout, a server error, a push whose answer was lost). ``history.store.create_once`` reads the name back."""


class NoSuchObject(StoreError):
    """A read found no object of that name (pruned since the listing, or never written): the store answered."""


class GitTimedOut(StoreError):
    """A git command ran past ``history.git_store.GIT_TIMEOUT_S`` and was stopped: what it did remotely is unknown."""


class StoreSettingError(ValueError):
    """A history location (``--roofline-history``, ``--roofline-baseline``, a CLI's HISTORY) is not one of the
    accepted forms; the message says which are (redacted: the text may quote a URL with a credential)."""

    def __init__(self, message: object = "") -> None:
        super().__init__(redact(str(message)))


# --- raised by pytest_roofline.history.selectors

class SelectorError(ValueError):
    """A session selector (``compare A B``) that names no session, or more than one commit; the message says
    what exists."""


# --- raised by pytest_roofline.host.cores

class CoresSettingError(ValueError):
    """``--roofline-cores`` got a value that is not accepted."""


# --- raised by pytest_roofline.measure.regions

class CounterUnavailableError(RuntimeError):
    """The selected counter cannot count this callable (missing dependency, no declaration)."""


# --- raised by pytest_roofline.session.settings

class SettingError(ValueError):
    """A setting or marker argument has a value that is not accepted."""


# --- raised by pytest_roofline.model.roofline

class MissingCeilingError(ValueError):
    """A sample uses a precision or memory level the machine has no ceiling for."""


# --- raised by pytest_roofline.history.results_dir

class ResultsDirError(ValueError):
    """The results directory cannot be written; the message names the path and the reason."""


# --- raised by pytest_roofline.site (the history site)

class HistoryFileWarning(UserWarning):
    """A history file was skipped: it does not parse, is not a history file, or has a newer schema."""


class SiteError(RuntimeError):
    """The history site cannot be built (no readable session, a missing library)."""


class SiteOutputError(SiteError):
    """``report --out`` cannot take the site (a file, a folder that holds no site, unwritable); names it."""


class CompareError(Exception):
    """``--roofline-compare`` cannot run: the message names the option, REF and what went wrong."""


class ChannelClosed(Exception):
    """The other side of a comparison went away (it exited or crashed)."""


class TwinStopped(CompareError):
    """REF's twin went away during the session: the message gives its exit status and the end of its log."""


class StepCannotRun(CompareError):
    """``bisect``: a step's pytest run wrote no results; that commit is skipped, pytest's error shown."""
