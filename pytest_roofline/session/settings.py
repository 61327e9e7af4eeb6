"""Settings of a roofline session and the marker's arguments, validated into frozen dataclasses.

Command-line options win over ini keys, which win over defaults. Errors name the option or marker
argument and say what is accepted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_roofline.errors import SettingError
from pytest_roofline.model import DEVICES as DEVICES_RUN

if TYPE_CHECKING:
    from pytest_roofline.history.retention import Keep
    from pytest_roofline.history.store import HistoryStore
    from pytest_roofline.host.cores import CoresSetting
    from pytest_roofline.measure.timing import TimingPolicy

COUNTERS = ("auto", "analytic", "declared", "ncu")
DEVICES = ("auto", "cpu", "cuda")
MALLOC_POLICIES = ("tuned", "default")
UNCOUNTED_POLICIES = ("warn", "fail")
PROBE_MODES = ("live", "off")
OPS_MODES = ("always", "failed", "off")  # the per-op timing pass (measure/ops/times.py): every test, failing ones, none
CONFIRM_MODES = ("on", "off")  # mirrors probes.PROBE_MODES without importing it (numpy) at plugin import
MARKER_ARGUMENTS = ("min_fraction", "uncounted", "max_drop", "max_slowdown", "fail_on")
FAIL_ON_QUANTITIES = ("time", "fraction", "work")  # gates.comparison.QUANTITIES, without its import
FRACTION_DEVICES = DEVICES_RUN  # the keys of min_fraction={...}: where a call site's work ran (device_roofs)


@dataclass(frozen=True)
class Settings:
    """A session's settings, from its options and ini keys (plugin.options), validated."""

    enabled: bool
    directory: Path
    machine_file: Path | None
    counter: str
    device: str
    max_time_s: float
    recharacterize: bool
    malloc: str
    cores: CoresSetting | None = None  # None: measure wherever the OS runs the call
    strict: bool = False  # a contended measurement may fail its gate too
    uncounted: str = "warn"  # warn|fail: a region ran FLOP-bearing ops the counter has no rule for
    probe: str = "live"  # live|off: time DRAM-bound call sites beside a probe of the DRAM roof (probes.py)
    gpu_l2: str = "auto"  # auto|flush|warm: a GPU call site's L2 before each timed call (measure/gpu_l2.py)
    confirm: str = "on"  # on|off: a test below its threshold is measured once more before it fails
    ops: str = "failed"  # always|failed|off: the per-op timing pass (op_times) for every test, failing ones, none
    # --roofline-history: one file per session there (None: off); a directory, or a history.store.HistoryStore
    history: Path | HistoryStore | None = None
    # --roofline-baseline: a results.json, a history file or a history directory (Paths), or a HistoryStore
    baseline: Path | HistoryStore | None = None
    baseline_sessions: int = 5  # the last N sessions of a history directory
    max_drop: float = 0.10  # the baseline gate fails a significant drop of more than this share
    max_slowdown: float = 0.10  # ... and a significant rise of the time per call by more than this share
    fail_on: tuple[str, ...] = ("time", "fraction")  # the quantities a comparison fails a test on
    history_keep: Keep | None = None  # what --roofline-history keeps (None: everything)
    compare: str | None = None  # --roofline-compare REF: measure REF's twin in lockstep (None: off)
    compare_python: str | None = None  # the interpreter REF's twin runs under (None: this one)
    # the A/B gate fails a test slower than this share, when significant; None: auto (2 % or 3 % by the pairs'
    # spread: ab.paired_stats.auto_band)
    compare_max_slowdown: float | None = None
    compare_pairs: int = 12  # the most process pairs per call site (--roofline-compare-pairs; 3 always)
    baseline_any_machine: bool = False  # compare with other machines' sessions too
    compare_all: bool = False  # --roofline-compare-all: pair every test, whatever the change reaches
    warn_only: bool = False  # report every gate failure as a warning; fail no test on its performance
    min_time_s: float = 0.25  # the timed calls of a call site span at least this long (within max_time_s)
    contended: str = "auto"  # auto|judge|excuse: a test still contended when measured again (contention.py)

    @property
    def requested_counter(self) -> str:
        """``--roofline-counter``, except that ``auto`` counts analytically in a ``--roofline-compare`` session
        (and in its twins): ncu would count in a child of its own while the pairs time in the twins, and nothing
        would be compared (the H100 read every test "new (not in REF)")."""
        return "analytic" if self.compare and self.counter == "auto" else self.counter

    def timing_policy(self) -> TimingPolicy:
        from pytest_roofline.measure.timing import TimingPolicy

        return TimingPolicy(max_time_s=self.max_time_s, min_time_s=min(self.min_time_s, self.max_time_s))


@dataclass(frozen=True)
class MarkerOptions:
    """Arguments of ``@pytest.mark.roofline(...)``."""

    min_fraction: float | None = None  # one threshold for every device
    min_fraction_by_device: Mapping[str, float] | None = None  # min_fraction={"cpu": 0.2, "cuda": 0.5}
    uncounted: str | None = None  # warn|fail: FLOP-bearing ops without a rule (None: the session's setting)
    max_drop: float | None = None  # the baseline gate's allowed drop for this test (None: --roofline-max-drop)
    max_slowdown: float | None = None  # the allowed rise of its time per call (None: --roofline-max-slowdown)
    fail_on: tuple[str, ...] | None = None  # the quantities a comparison fails it on (None: --roofline-fail-on)

    @classmethod
    def from_marker(cls, args: Sequence[object], kwargs: Mapping[str, object]) -> MarkerOptions:
        accepted = ", ".join(MARKER_ARGUMENTS)
        if args:
            raise SettingError(
                f"@pytest.mark.roofline takes keyword arguments only ({accepted}); got positional {args!r}. "
                f"Write @pytest.mark.roofline(min_fraction={args[0]!r})."
            )
        unknown = sorted(set(kwargs) - set(MARKER_ARGUMENTS))
        if unknown:
            raise SettingError(
                f"@pytest.mark.roofline got unknown argument(s) {', '.join(unknown)}; accepted: {accepted}"
            )
        value = kwargs.get("min_fraction")
        uncounted = kwargs.get("uncounted")
        max_drop = kwargs.get("max_drop")
        max_slowdown = kwargs.get("max_slowdown")
        fail_on = kwargs.get("fail_on")
        by_device = parse_fraction_by_device(value) if isinstance(value, Mapping) else None
        return cls(
            min_fraction=None if value is None or by_device is not None else parse_fraction(
                value, "@pytest.mark.roofline(min_fraction=...)"),
            min_fraction_by_device=by_device,
            uncounted=None if uncounted is None else parse_choice(uncounted, UNCOUNTED_POLICIES,
                                                                  "@pytest.mark.roofline(uncounted=...)"),
            max_drop=None if max_drop is None else parse_max_drop(max_drop, "@pytest.mark.roofline(max_drop=...)",
                                                                  text=False),
            max_slowdown=None if max_slowdown is None else parse_max_slowdown(
                max_slowdown, "@pytest.mark.roofline(max_slowdown=...)", text=False),
            fail_on=None if fail_on is None else parse_fail_on(fail_on, "@pytest.mark.roofline(fail_on=...)"),
        )


    def fraction_for(self, device: str | None) -> float | None:
        """The threshold of a test whose call sites ran on ``device`` (``cuda`` if any ran on a GPU): the one
        number, or that device's entry (None where the mapping has none: reported, not gated there)."""
        if self.min_fraction_by_device is None:
            return self.min_fraction
        return self.min_fraction_by_device.get(device or "cpu")


def parse_fraction_by_device(value: Mapping[object, object]) -> dict[str, float]:
    """``min_fraction={"cpu": 0.2, "cuda": 0.5}``: a number in (0, 1] per device; keys cpu and cuda."""
    accepted = ", ".join(repr(d) for d in FRACTION_DEVICES)
    where = "@pytest.mark.roofline(min_fraction={...})"
    unknown = [k for k in value if k not in FRACTION_DEVICES]
    if unknown or not value:
        got = f"unknown key(s) {', '.join(repr(k) for k in unknown)}" if unknown else "an empty mapping"
        raise SettingError(f"{where} takes one number in (0, 1] per device, keys {accepted}; got {got}. "
                           "Example: min_fraction={'cpu': 0.2, 'cuda': 0.5}")
    return {str(k): parse_fraction(v, f"@pytest.mark.roofline(min_fraction={{{k!r}: ...}})") for k, v in value.items()}


def parse_fraction(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingError(f"{where} must be a number in (0, 1], got {value!r} ({type(value).__name__})")
    number = float(value)
    if not (math.isfinite(number) and 0 < number <= 1):
        raise SettingError(f"{where} must be a number in (0, 1], got {value!r}")
    return number


def _share(value: object, where: str, accepted: str, text: bool) -> float:
    """A number from a marker argument (or, with ``text``, an option or ini string); the message says what is
    accepted. Range checks are the caller's."""
    if isinstance(value, str) and text:
        try:
            value = float(value)
        except ValueError:
            raise SettingError(f"{where} must be {accepted}, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingError(f"{where} must be {accepted}, got {value!r} ({type(value).__name__})")
    return float(value)


def parse_max_drop(value: object, where: str, *, text: bool = True) -> float:
    """The baseline gate's allowed drop of the fraction, a share in (0, 1): 0.1 fails a test that lost more than
    10 % of its baseline fraction (when significant). ``text``: accept a string (an option or ini value)."""
    number = _share(value, where, "a number in (0, 1) such as 0.1 (10 %)", text)
    if not (math.isfinite(number) and 0 < number < 1):
        raise SettingError(f"{where} must be a number in (0, 1) such as 0.1 (a drop of 10 %), got {value!r}")
    return number


def parse_max_slowdown(value: object, where: str, *, text: bool = True) -> float:
    """The allowed rise of a test's time per call, a share > 0: 0.1 fails a test more than 10 % slower (when
    significant). ``text``: accept a string (an option or ini value)."""
    accepted = "a number > 0 such as 0.1 (10 % slower)"
    number = _share(value, where, accepted, text)
    if not (math.isfinite(number) and 0 < number <= 10):
        raise SettingError(f"{where} must be {accepted} (at most 10), got {value!r}")
    return number


AUTO = "auto"


def parse_compare_max_slowdown(value: object, where: str) -> float | None:
    """``--roofline-compare-max-slowdown``: ``auto`` (None: the band by the process pairs' spread) or a fixed
    share as :func:`parse_max_slowdown`."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return None
    try:
        return parse_max_slowdown(value, where)
    except SettingError:
        raise SettingError(f"{where} must be 'auto' (2 % where the process pairs agree within 2.5 %, else 3 %) or "
                           f"a number > 0 such as 0.03 (3 % slower; at most 10), got {value!r}") from None


def parse_fail_on(value: object, where: str) -> tuple[str, ...]:
    """What a comparison fails a test on: a comma-separated string or a sequence of ``time``, ``fraction``,
    ``work`` (``none``: nothing, report only)."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple, set, frozenset)):
        raise SettingError(f"{where} must be a list of {', '.join(FAIL_ON_QUANTITIES)} (or none), got {value!r}")
    names = [str(i).strip().lower() for i in items if str(i).strip()]
    if names == ["none"]:
        return ()
    unknown = sorted(set(names) - set(FAIL_ON_QUANTITIES))
    if unknown or not names:
        raise SettingError(f"{where} must name one or more of {', '.join(FAIL_ON_QUANTITIES)} (comma-separated; "
                           f"none: report only), got {value!r}")
    return tuple(q for q in FAIL_ON_QUANTITIES if q in names)


def parse_count(value: object, where: str) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise SettingError(f"{where} must be a whole number >= 1, got {value!r}") from None
    if number < 1:
        raise SettingError(f"{where} must be a whole number >= 1, got {value!r}")
    return number


def parse_counter(value: object) -> str:
    """``--roofline-counter``: a built-in counter, or the name of one a plugin makes (checked at first use)."""
    text = str(value).strip().lower()
    if text in COUNTERS or re.fullmatch(r"[a-z_][a-z0-9_.-]*", text):
        return text
    raise SettingError(f"--roofline-counter must be one of {', '.join(COUNTERS)} or the name of a counter a "
                       f"plugin provides (pytest_roofline_make_counter); got {value!r}")


def parse_choice(value: object, choices: Sequence[str], where: str) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise SettingError(f"{where} must be one of {', '.join(choices)}; got {value!r}")
    return text


def parse_seconds(value: object, where: str, *, allow_zero: bool = False) -> float:
    accepted = "a number of seconds >= 0" if allow_zero else "a positive number of seconds"
    try:
        if not isinstance(value, (str, int, float)):
            raise TypeError(value)
        number = float(value)
    except (TypeError, ValueError):
        raise SettingError(f"{where} must be {accepted}, got {value!r}") from None
    if not (math.isfinite(number) and (number > 0 or (allow_zero and number == 0))):
        raise SettingError(f"{where} must be {accepted}, got {value!r}")
    return number


def parse_bool(value: object, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    raise SettingError(f"{where} must be true or false, got {value!r}")
