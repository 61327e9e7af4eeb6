"""``pytest-roofline doctor`` on the CPU path: what ``--roofline`` needs on any machine, GPU or not.

One :class:`~pytest_roofline.doctor.checks.Check` each: a C compiler (the ERT kernels are built with
it), a writable cache folder, the age of this machine's cached characterization, the allocator policy
(``--roofline-malloc tuned`` needs glibc's ``mallopt``) and the kernel's transparent huge page mode.
Plain Python; nothing here imports torch or runs a measurement.
"""

from __future__ import annotations

import datetime as _dt
import tempfile
from collections.abc import Callable
from pathlib import Path

from pytest_roofline.characterize.ceiling_cache import CACHE_ENV, default_cache_dir
from pytest_roofline.characterize.machine import cache_file_for
from pytest_roofline.doctor.checks import FAIL, OK, WARN, Check

CACHE_OLD_DAYS = 90  # a characterization this old still matches its fingerprint; re-measuring it is cheap


def check_compiler(find: Callable[[], str | None] | None = None, identity: Callable[[], str | None] | None = None
                   ) -> Check:
    from pytest_roofline.characterize.build import compiler_identity, find_compiler

    path = (find or find_compiler)()
    if path is None:
        return Check("compiler", FAIL, "no C compiler ($CC, cc, gcc or clang): the CPU roofs cannot be measured",
                     "install gcc or clang, or set $CC; or pin the ceilings with --roofline-machine FILE")
    return Check("compiler", OK, f"{path} ({(identity or compiler_identity)() or 'version unknown'})")


def check_cache_dir(directory: Path | None = None) -> Check:
    folder = directory or default_cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check("cache dir", FAIL, f"{folder} is not writable ({exc.strerror or exc})",
                     f"set ${CACHE_ENV} to a writable folder")
    return Check("cache dir", OK, f"{folder} (writable)")


def check_characterization(path: Path | None = None, now: _dt.datetime | None = None) -> Check:
    if path is None:
        path = cache_file_for("cpu")
    if not path.is_file():
        return Check("characterization", OK, "none cached for this machine yet: the first --roofline session "
                     f"measures it (~20 s) into {path.name}")
    modified = _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.timezone.utc)
    days = ((now or _dt.datetime.now(_dt.timezone.utc)) - modified).total_seconds() / 86400
    detail = f"{path} measured {days:.0f} day(s) ago"
    if days > CACHE_OLD_DAYS:
        return Check("characterization", WARN, detail, "re-measure it: pytest-roofline characterize --recharacterize")
    return Check("characterization", OK, detail)


def check_allocator(probe: Callable[[], str | None] | None = None) -> Check:
    from pytest_roofline.host.allocator import tune_malloc

    done = (probe or tune_malloc)()  # sets glibc's thresholds in this short-lived process only
    if done is None:
        return Check("allocator", WARN, "not glibc: --roofline-malloc tuned leaves the allocator as it is",
                     "fresh allocations may page-fault in timed calls; reuse buffers across calls")
    return Check("allocator", OK, f"--roofline-malloc tuned (default) applies {done}")


def check_thp(mode: str | None | Callable[[], str | None] = None) -> Check:
    from pytest_roofline.host.allocator import THP_SETTING, thp_mode

    value = mode() if callable(mode) else (mode if mode is not None else thp_mode())
    if value in ("always", "madvise"):
        return Check("huge pages", OK, f"transparent huge pages: {value}")
    fix = f"echo madvise | sudo tee {THP_SETTING} (large buffers then fault in 2 MiB pages)"
    return Check("huge pages", WARN, f"transparent huge pages: {value or 'unknown'}: large buffers page-fault "
                 "4 KiB at a time in timed calls", fix)


def cpu_checks() -> list[Check]:
    """Every CPU-path check, in the order they are printed."""
    return [check_compiler(), check_cache_dir(), check_characterization(), check_allocator(), check_thp()]
