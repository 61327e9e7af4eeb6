"""The plugin's options and ini keys (one ``--roofline-*`` group), read into a validated :class:`Settings`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_roofline.measure.contention import CONTENDED_MODES
from pytest_roofline.measure.gpu_l2 import GPU_L2_MODES
from pytest_roofline.session.settings import (
    CONFIRM_MODES,
    COUNTERS,
    DEVICES,
    MALLOC_POLICIES,
    OPS_MODES,
    PROBE_MODES,
    UNCOUNTED_POLICIES,
    SettingError,
    Settings,
    parse_bool,
    parse_choice,
    parse_compare_max_slowdown,
    parse_count,
    parse_counter,
    parse_fail_on,
    parse_max_drop,
    parse_max_slowdown,
    parse_seconds,
)

if TYPE_CHECKING:
    from pytest_roofline.history.retention import Keep
    from pytest_roofline.history.store import HistoryStore
    from pytest_roofline.host.cores import CoresSetting

# (option, ini key, help, default) -- every option has an ini key of the same name with underscores.
_OPTIONS: tuple[tuple[str, str, str, str], ...] = (
    ("--roofline-dir", "roofline_dir", "directory for results.json, charts and kernel tables", ".roofline"),
    ("--roofline-machine", "roofline_machine",
     "pinned machine ceilings (JSON or TOML) to use instead of characterizing this machine", ""),
    ("--roofline-counter", "roofline_counter",
     (f"where FLOPs and bytes come from: {'|'.join(COUNTERS)} (auto: ncu when a CUDA GPU, Nsight Compute "
      "and counter access are present, else analytic), or a counter a plugin provides"), "auto"),
    ("--roofline-device", "roofline_device",
     f"device to characterize: {'|'.join(DEVICES)} (auto: cuda when torch sees a GPU)", "auto"),
    ("--roofline-max-time", "roofline_max_time",
     "time budget of a call site's whole measurement, warm-up included, in seconds", "1.0"),
    ("--roofline-min-time", "roofline_min_time",
     ("seconds a call site's timed calls span at least before their median counts as settled (within "
      "--roofline-max-time): a short call timed a few times samples one instant of a shared host"), "0.25"),
    ("--roofline-malloc", "roofline_malloc",
     (f"{'|'.join(MALLOC_POLICIES)}: tuned fixes glibc's mmap/trim thresholds so large outputs do not "
     "page-fault in some calls and not others"), "tuned"),
    ("--roofline-cores", "roofline_cores",
     ("cores to measure on: auto (half the machine's cores, the least loaded at each call site, judged "
      "against roofs for that many), all, a count N, or a list such as 0,1 or 0-3"), "auto"),
    ("--roofline-probe", "roofline_probe",
     (f"{'|'.join(PROBE_MODES)}: live times call sites whose bytes stream from DRAM beside a probe of the DRAM "
      "roof and judges each call against it (main memory's bandwidth changes with the host's other tenants)"),
     "live"),
    ("--roofline-gpu-l2", "roofline_gpu_l2",
     (f"{'|'.join(GPU_L2_MODES)}: whether a GPU call site's timed calls start with its L2 flushed (its inputs "
      "come from HBM, as ncu counts them) or warm from the previous call; auto flushes where ncu counts or "
      "HBM's roof binds"), "auto"),
    ("--roofline-confirm", "roofline_confirm",
     (f"{'|'.join(CONFIRM_MODES)}: on measures a test below its min_fraction once more at once and fails it "
      "only if the faster of the two measurements is below too (a host hiccup rarely lasts both)"), "on"),
    ("--roofline-ops", "roofline_ops",
     (f"{'|'.join(OPS_MODES)}: time every op of the analytic counter once more under torch.profiler (apart from "
      "the timed loop, whose verdict stands) for every test, for tests below their min_fraction, or never"),
     "failed"),
    ("--roofline-uncounted", "roofline_uncounted",
     (f"{'|'.join(UNCOUNTED_POLICIES)}: what a region that ran FLOP-bearing ops without a counting rule does "
      "(warn: marked in the summary; fail: the test fails); the marker's uncounted= overrides it"), "warn"),
    ("--roofline-history", "roofline_history",
     ("the history every --roofline session appends one file to (docs/history-format.md): a directory, "
      "s3://BUCKET/PREFIX, gs://..., az://... (credentials from the environment) or git:BRANCH (a branch of "
      "origin); empty: history/ under --roofline-dir (.roofline/history); none: off"), ""),
    ("--roofline-baseline", "roofline_baseline",
     ("compare each test's fraction with a baseline: a results.json, a history file, or a history (a "
      "directory or a store's URL, as --roofline-history: its last --roofline-baseline-sessions sessions of "
      "this machine, of this branch when it has that many)"), ""),
    ("--roofline-baseline-sessions", "roofline_baseline_sessions",
     "how many of a history directory's latest sessions make the baseline", "5"),
    ("--roofline-max-drop", "roofline_max_drop",
     ("the baseline gate fails a test whose fraction fell by more than this share of the baseline's, when the "
      "drop is significant (the marker's max_drop= overrides it)"), "0.10"),
    ("--roofline-max-slowdown", "roofline_max_slowdown",
     ("the baseline gate fails a test whose time per call rose by more than this share of the baseline's, when "
      "the rise is significant (the marker's max_slowdown= overrides it)"), "0.10"),
    ("--roofline-fail-on", "roofline_fail_on",
     ("what a comparison with the baseline fails a test on, comma-separated: time, fraction, work (a change of "
      "the counted FLOPs or bytes), or none (report only); the marker's fail_on= overrides it"), "time,fraction"),
    ("--roofline-compare", "roofline_compare",
     ("a git revision (branch, tag, commit, HEAD~1): measure the same tests at that revision in a twin process, "
      "taking turns call by call, and fail a test significantly slower here than there; last (last~N): the "
      "commit of this machine's and branch's newest (N-th newest) session in --roofline-history, for a nightly "
      "job (none yet, or not fetched: the baseline gate judges against that history, and says so)"), ""),
    ("--roofline-compare-python", "roofline_compare_python",
     ("the Python interpreter REF's twin runs under (a venv holding REF's build of compiled code); empty: this "
      "one"), ""),
    ("--roofline-compare-max-slowdown", "roofline_compare_max_slowdown",
     ("the A/B gate fails a test whose time per call is more than this share above REF's, when significant; "
      "auto: 0.02 at a call site whose process pairs' ratios spread by a standard deviation of 0.025 or less, "
      "else 0.03 (the marker's max_slowdown= overrides it)"), "auto"),
    ("--roofline-contended", "roofline_contended",
     ("auto|judge|excuse: a test below its threshold or regressed while no core was free is measured again at "
      "the end of the session; still contended, judge fails it when it is worse by more than its tolerance "
      "widened by its measurements' spread (at most by half), excuse reports it unfailed; auto: judge in CI (CI "
      "set) or under --roofline-baseline / --roofline-compare, else excuse"), "auto"),
    ("--roofline-compare-pairs", "roofline_compare_pairs",
     ("the most process pairs (a twin of this checkout and one of REF) each call site is compared in; 3 are "
      "started with the session and always used, more are started and used only where 3 do not decide (at least "
      "3)"), "12"),
    ("--roofline-history-keep", "roofline_history_keep",
     ("how much history each machine keeps: N (the newest N sessions), Nd (sessions of the last N days), or all; "
      "each test's newest baseline sessions are always kept"), "200"),
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("roofline", "roofline performance gates")
    group.addoption("--roofline", action="store_true", default=None, dest="roofline",
                    help="measure tests marked @pytest.mark.roofline and gate them on their roofline fraction")
    parser.addini("roofline", "measure roofline-marked tests as if --roofline were given", type="bool",
                  default=False)
    for flag, ini, help_text, default in _OPTIONS:
        group.addoption(flag, dest=ini, default=None, help=f"{help_text} (ini: {ini}; default: {default!r})")
        parser.addini(ini, help_text, default=default)
    group.addoption("--roofline-strict", action="store_true", default=None, dest="roofline_strict",
                    help="let a contended measurement (no free core) fail its gate too (ini: roofline_strict)")
    parser.addini("roofline_strict", "contended measurements may fail their gate", type="bool", default=False)
    group.addoption("--roofline-baseline-any-machine", action="store_true", default=None,
                    dest="roofline_baseline_any_machine",
                    help="compare with baseline sessions of other machines too (ini: roofline_baseline_any_machine)")
    parser.addini("roofline_baseline_any_machine", "compare with other machines' baseline sessions", type="bool",
                  default=False)
    group.addoption("--roofline-compare-all", action="store_true", default=None, dest="roofline_compare_all",
                    help=("--roofline-compare: compare every test with REF, also those the change between REF and "
                          "this checkout cannot reach (ini: roofline_compare_all)"))
    parser.addini("roofline_compare_all", "compare every test with REF, whatever the change reaches", type="bool",
                  default=False)
    group.addoption("--roofline-warn-only", action="store_true", default=None, dest="roofline_warn_only",
                    help=("report every gate failure (threshold, baseline) as a warning and fail no test on its "
                          "performance, to introduce the gate on an existing suite (ini: roofline_warn_only)"))
    parser.addini("roofline_warn_only", "report gate failures as warnings, fail none", type="bool", default=False)
    group.addoption("--roofline-ncu-full", action="store_true", default=None, dest="roofline_ncu_full",
                    help=("ncu counter: keep the full .ncu-rep of each batched run (SASS and every metric ncu adds, "
                          "megabytes) instead of a small trimmed CSV per test (ini: roofline_ncu_full)"))
    parser.addini("roofline_ncu_full", "keep full .ncu-rep reports (ncu counter)", type="bool", default=False)
    group.addoption("--roofline-recharacterize", action="store_true", default=False,
                    dest="roofline_recharacterize",
                    help="measure the machine again instead of using the cached characterization")


def setting(config: pytest.Config, name: str) -> object:
    value = config.getoption(name)
    return config.getini(name) if value is None else value


def read_settings(config: pytest.Config) -> Settings:
    machine_file = str(setting(config, "roofline_machine") or "").strip()
    return Settings(
        enabled=parse_bool(setting(config, "roofline"), "--roofline / ini roofline") or bool(implied_by(config)),
        directory=Path(str(setting(config, "roofline_dir"))),
        machine_file=Path(machine_file) if machine_file else None,
        counter=parse_counter(setting(config, "roofline_counter")),
        device=parse_choice(setting(config, "roofline_device"), DEVICES, "--roofline-device"),
        max_time_s=parse_seconds(setting(config, "roofline_max_time"), "--roofline-max-time"),
        min_time_s=parse_seconds(setting(config, "roofline_min_time"), "--roofline-min-time", allow_zero=True),
        recharacterize=bool(config.getoption("roofline_recharacterize")),
        malloc=parse_choice(setting(config, "roofline_malloc"), MALLOC_POLICIES, "--roofline-malloc"),
        cores=cores_setting(setting(config, "roofline_cores")),
        strict=parse_bool(setting(config, "roofline_strict"), "--roofline-strict / ini roofline_strict"),
        uncounted=parse_choice(setting(config, "roofline_uncounted"), UNCOUNTED_POLICIES, "--roofline-uncounted"),
        probe=parse_choice(setting(config, "roofline_probe"), PROBE_MODES, "--roofline-probe"),
        gpu_l2=parse_choice(setting(config, "roofline_gpu_l2"), GPU_L2_MODES, "--roofline-gpu-l2"),
        confirm=parse_choice(setting(config, "roofline_confirm"), CONFIRM_MODES, "--roofline-confirm"),
        ops=parse_choice(setting(config, "roofline_ops"), OPS_MODES, "--roofline-ops / ini roofline_ops"),
        history=history_setting(setting(config, "roofline_history"), Path(str(setting(config, "roofline_dir"))),
                                root=config.rootpath),
        baseline=baseline_setting(setting(config, "roofline_baseline"), root=config.rootpath),
        baseline_sessions=parse_count(setting(config, "roofline_baseline_sessions"), "--roofline-baseline-sessions"),
        max_drop=parse_max_drop(setting(config, "roofline_max_drop"), "--roofline-max-drop"),
        max_slowdown=parse_max_slowdown(setting(config, "roofline_max_slowdown"), "--roofline-max-slowdown"),
        fail_on=parse_fail_on(setting(config, "roofline_fail_on"), "--roofline-fail-on"),
        history_keep=keep_setting(setting(config, "roofline_history_keep")),
        compare=str(setting(config, "roofline_compare") or "").strip() or None,
        compare_python=str(setting(config, "roofline_compare_python") or "").strip() or None,
        compare_max_slowdown=parse_compare_max_slowdown(setting(config, "roofline_compare_max_slowdown"),
                                                        "--roofline-compare-max-slowdown"),
        compare_pairs=compare_pairs_setting(setting(config, "roofline_compare_pairs")),
        baseline_any_machine=parse_bool(setting(config, "roofline_baseline_any_machine"),
                                        "--roofline-baseline-any-machine"),
        compare_all=parse_bool(setting(config, "roofline_compare_all"), "--roofline-compare-all"),
        warn_only=parse_bool(setting(config, "roofline_warn_only"), "--roofline-warn-only"),
        contended=parse_choice(setting(config, "roofline_contended"), CONTENDED_MODES,
                               "--roofline-contended"),
    )


def compare_pairs_setting(value: object) -> int:
    """``--roofline-compare-pairs``: a whole number >= 3 (a t-interval over fewer pairs decides nothing)."""
    from pytest_roofline.errors import SettingError
    from pytest_roofline.session.settings import parse_count

    where = "--roofline-compare-pairs / ini roofline_compare_pairs"
    number = parse_count(value, where)
    if number < 3:
        raise SettingError(f"{where} must be a whole number >= 3 (process pairs per call site), got {value!r}")
    return number


def history_setting(value: object, directory: Path, root: Path | None = None) -> Path | HistoryStore | None:
    """``--roofline-history``: a directory (a Path), a store's URL (a ``history.store.HistoryStore``, not yet
    contacted), ``none`` (off), or empty (``history/`` under ``--roofline-dir``)."""
    text = str(value or "").strip()
    if text.lower() == "none":
        return None
    if not text:
        return directory / "history"
    return _location(text, "--roofline-history / ini roofline_history", root)


def baseline_setting(value: object, root: Path | None = None) -> Path | HistoryStore | None:
    """``--roofline-baseline``: empty (off), a path (a history directory or file, a results.json), or a
    store's URL."""
    text = str(value or "").strip()
    return _location(text, "--roofline-baseline / ini roofline_baseline", root) if text else None


def _location(text: str, where: str, root: Path | None) -> Path | HistoryStore:
    from pytest_roofline.errors import StoreSettingError
    from pytest_roofline.history.location import is_location_url, open_store

    if not is_location_url(text):
        return Path(text)
    try:
        return open_store(text, where=where, root=root)
    except StoreSettingError as exc:
        raise SettingError(str(exc)) from None


def keep_setting(value: object) -> Keep | None:
    from pytest_roofline.history.retention import parse_keep

    return parse_keep(value, "--roofline-history-keep / ini roofline_history_keep")


def cores_setting(value: object) -> CoresSetting:
    from pytest_roofline.host.cores import CoresSettingError, parse_cores

    try:
        return parse_cores(value, "--roofline-cores / ini roofline_cores")
    except CoresSettingError as exc:
        raise SettingError(str(exc)) from None


# Options that only mean something under --roofline: given on the command line, they turn it on (a CI line
# `pytest --roofline-compare main` that forgot --roofline must not pass without measuring anything).
GATE_OPTIONS = ("roofline_compare", "roofline_compare_python", "roofline_compare_max_slowdown", "roofline_baseline",
                "roofline_baseline_sessions", "roofline_baseline_any_machine", "roofline_max_drop",
                "roofline_max_slowdown", "roofline_fail_on", "roofline_history", "roofline_history_keep",
                "roofline_strict", "roofline_warn_only", "roofline_contended", "roofline_confirm")


def implied_by(config: pytest.Config, namespace: argparse.Namespace | None = None) -> list[str]:
    """The gate options given on the command line (their ini keys): any of them implies ``--roofline``.
    ``namespace``: the parsed options (``early_config.known_args_namespace`` before ``config.option`` is)."""
    namespace = config.option if namespace is None else namespace
    return [name for name in GATE_OPTIONS if getattr(namespace, name, None) not in (None, False)]


def value_options() -> set[str]:
    """The options that take a value (``--roofline-baseline PATH``)."""
    return {flag for flag, *_ in _OPTIONS}


def first_history(settings: Settings) -> bool:
    """``--roofline-baseline`` names the history directory this session writes, which does not exist yet: the
    first run of a CI recipe on a fresh runner (every test is new), not a typo."""
    reference, history = settings.baseline, settings.history
    if not isinstance(reference, Path) or not isinstance(history, Path):
        return False  # a store that holds nothing yet reads as empty: every test is new, no usage error
    return (not reference.exists()
            and reference.resolve() == history.resolve())


def recorded_arguments(config: pytest.Config) -> list[str]:
    """The command line as the history keeps it: the roofline options and the test selection (paths and node
    ids, ``-k`` and ``-m``), each redacted; never another plugin's option or ``-o`` (a ``--token=`` or an ini
    value would reach a store every runner of a fleet reads)."""
    from pytest_roofline._redact import redact

    given = [str(a) for a in config.invocation_params.args]
    takes_value = value_options()
    positional = {str(a) for a in getattr(config, "args", ())}  # a worker's config may be a stand-in
    kept: list[str] = []
    i = 0
    while i < len(given):
        arg = given[i]
        name = arg.split("=", 1)[0]
        if name == "--roofline" or name.startswith("--roofline-"):
            kept.append(arg)
            if "=" not in arg and name in takes_value and i + 1 < len(given):
                kept.append(given[i + 1])
                i += 1
        elif not arg.startswith("-") and arg in positional:
            kept.append(arg)
        i += 1
    option = getattr(config, "option", None)
    for flag, value in (("-k", getattr(option, "keyword", None)), ("-m", getattr(option, "markexpr", None))):
        if value:
            kept += [flag, str(value)]
    return [redact(a) for a in kept]
