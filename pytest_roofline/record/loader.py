"""What a record read back must look like before anything uses it (docs/untrusted-history.md).

History directories are merged from many CI jobs, forks included: every file read back (a history file, a
``results.json``, a baseline) is untrusted. :func:`read_json` bounds what is read (a regular file, at most
``MAX_FILE_BYTES``, nested at most ``MAX_DEPTH`` deep, checked before ``json.loads`` recurses);
:func:`check_header` and :func:`check_test` check types and ranges, naming the field that fails. A file whose
header fails is skipped; a test record that fails is skipped alone. Plain Python: no pytest, no numpy.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_roofline.errors import InvalidRecord as Invalid  # the name the readers catch
from pytest_roofline.record.json_values import finite_number as _finite
from pytest_roofline.record.outcomes import AB_VERDICTS, GATE_VERDICTS, NOT_GATED, OUTCOMES
from pytest_roofline.record.tests import SCHEMA, TestRecord

MAX_FILE_BYTES = 32 * 2**20  # a 1000-test history file is about 8 MB
MAX_DEPTH = 64  # the deepest record the plugin writes nests about 10 deep
MAX_FRACTION = 1.2  # output.session_output.IMPOSSIBLE_FRACTION: above it the roof was wrong, not the code fast
HISTORY_FORMAT = "pytest-roofline-history"
HISTORY_SCHEMA = 1  # the newest history schema this package writes and reads (record.sessions.SCHEMA)
# Physical ranges of every number read back: wide enough for any machine and test there is, narrow enough that
# the products and quotients computed from them (FLOP/s, ridge points, log axes, chained A/B ratios) stay finite.
TIME_RANGE = (1e-12, 1e7)  # seconds of one call: a picosecond to about four months
MAX_WORK = 1e24  # FLOPs or bytes of one call
ROOF_RANGE = (1e3, 1e20)  # a roof: FLOP/s of a precision, bytes/s of a memory level
AI_RANGE = (1e-12, 1e12)  # FLOPs per byte (or 0)
RATIO_RANGE = (1e-6, 1e6)  # an A/B ratio and the ends of its intervals
# A session's start: after this plugin could have written it, and no later than the reader's clock allows for
# skew between runners; a start beyond it would stay the newest session for as long as the skew lasts.
EARLIEST_START = _dt.datetime(2020, 1, 1, tzinfo=_dt.timezone.utc)
MAX_CLOCK_SKEW_S = 3600.0
COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a full SHA-1 or SHA-256 object id, as git prints it
# a session id as the plugin makes them (``20261125T082801.379Z-28663``) or a user's own: printable, short
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,99}")
KEY_TEXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
BRANCH = re.compile(r"[A-Za-z0-9._/+-]{1,255}")

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))


def nesting_depth_exceeds(data: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text nests deeper than ``limit``, found without parsing it (strings left out), so that
    ``[`` × 100,000 is refused before ``json.loads`` recurses; stops at the first level too deep."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    depth = 0
    for byte in brackets:
        depth += 1 if byte in b"[{" else -1
        if depth > limit:
            return True
    return False


def read_bytes(path: Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; Invalid for anything else (a FIFO, /dev/zero, a
    folder, a file too large), OSError when it cannot be opened. Never blocks on a FIFO: it is not opened."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise Invalid("not a regular file")
    if info.st_size > max_bytes:
        raise Invalid(f"{info.st_size} bytes, more than the {max_bytes} a record file may have")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # replaced between stat and open
            raise Invalid("not a regular file")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew after the stat
        raise Invalid(f"more than the {max_bytes} bytes a record file may have")
    return data


def read_json(path: Path, max_bytes: int = MAX_FILE_BYTES) -> object:
    """A JSON document from a file, bounded in size and depth. Raises Invalid (a ValueError, as are
    UnicodeDecodeError and JSONDecodeError) or OSError. NaN and Infinity parse as floats, for
    :func:`check_test` to name the field that holds them."""
    return parse_json(read_bytes(path, max_bytes))


def parse_json(data: bytes) -> object:
    """A JSON document from bytes already bounded in size (a file's, or an object store's), bounded in
    depth; raises Invalid, UnicodeDecodeError or JSONDecodeError (all ValueErrors)."""
    if nesting_depth_exceeds(data):
        raise Invalid(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:  # belt and braces: the scan above already refused it
        raise Invalid(f"nested deeper than {MAX_DEPTH} levels") from None


# --- values ------------------------------------------------------------------------------------------------

def _text(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _check_number(value: object, field: str, low: float, high: float, *, low_open: bool = True,
                  optional: bool = True) -> None:
    if value is None and optional:
        return
    number = _finite(value)
    inside = number is not None and (number > low if low_open else number >= low) and number <= high
    if not inside:
        bounds = f"{'(' if low_open else '['}{low:g}, {'inf)' if high == math.inf else f'{high:g}]'}"
        raise Invalid(f"{field}: {_text(value)} is not a finite number in {bounds}")


def _positive(value: object, field: str) -> None:
    """A time: within :data:`TIME_RANGE`."""
    _check_number(value, field, TIME_RANGE[0], TIME_RANGE[1], low_open=False)


def _non_negative(value: object, field: str, high: float = MAX_WORK) -> None:
    _check_number(value, field, 0.0, high, low_open=False)


def parse_start(value: object, field: str = "session.start", *, now: float | None = None) -> _dt.datetime:
    """A session's start as an aware UTC time: an ISO 8601 string (a naive one is UTC) from
    :data:`EARLIEST_START` to the clock's ``now`` plus :data:`MAX_CLOCK_SKEW_S`; Invalid naming the field
    otherwise. Sessions are ordered by this time, never by the text."""
    if not isinstance(value, str) or len(value) > 64:
        raise Invalid(f"{field}: {_text(value)} is not an ISO 8601 time")
    try:
        start = _dt.datetime.fromisoformat(value)
        if start.tzinfo is None:
            start = start.replace(tzinfo=_dt.timezone.utc)
        start = start.astimezone(_dt.timezone.utc)
    except (ValueError, OverflowError):
        raise Invalid(f"{field}: {_text(value)} is not an ISO 8601 time") from None
    latest = (time.time() if now is None else now) + MAX_CLOCK_SKEW_S
    if start < EARLIEST_START or start.timestamp() > latest:
        raise Invalid(f"{field}: {_text(value)} is outside {EARLIEST_START:%Y-%m-%d} .. the reader's clock + "
                      f"{MAX_CLOCK_SKEW_S / 3600:g} h")
    return start


def parse_commit(value: object, field: str = "session.git.commit") -> str | None:
    """A commit as a full lower-case hexadecimal object id (None: outside git); Invalid for anything else: a
    ref name (``HEAD``, ``main``), a short or upper-case hash would be resolved by git to some other commit."""
    if value is None:
        return None
    if not isinstance(value, str) or not COMMIT.fullmatch(value):
        raise Invalid(f"{field}: {_text(value)} is not a full hexadecimal commit id")
    return value


def _matching(value: object, field: str, pattern: re.Pattern[str], what: str) -> None:
    if value is not None and (not isinstance(value, str) or not pattern.fullmatch(value)):
        raise Invalid(f"{field}: {_text(value)} is not {what}")


def _fraction(value: object, field: str, high: float = MAX_FRACTION) -> None:
    _check_number(value, field, 0.0, high)


def _string(value: object, field: str, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise Invalid(f"{field}: {_text(value)} is not a string")


def _word(value: object, field: str, words: Sequence[str]) -> None:
    """A word of a closed set (absent: unset)."""
    if value is not None and value not in words:
        raise Invalid(f"{field}: {_text(value)} is not one of {', '.join(words)}")


def _mapping(value: object, field: str) -> Mapping[str, object]:
    """A JSON object (absent: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid(f"{field}: {_text(value)} is not an object")
    return value


def _list(value: object, field: str) -> Sequence[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Invalid(f"{field}: {_text(value)} is not a list")
    return value


def _number_map(value: object, field: str, *, roofs: bool = False) -> None:
    """``{name: number}``: FLOPs and bytes finite in [0, :data:`MAX_WORK`], roofs in :data:`ROOF_RANGE`."""
    for key, number in _mapping(value, field).items():
        if roofs:
            _check_number(number, f"{field}.{key}", ROOF_RANGE[0], ROOF_RANGE[1], low_open=False, optional=False)
        elif number is not None:
            _non_negative(number, f"{field}.{key}")


def _intensities(value: object, field: str) -> None:
    """``{level: FLOPs per byte}``: 0, or within :data:`AI_RANGE` (a log axis starts below the lowest)."""
    for key, number in _mapping(value, field).items():
        if number is not None and number != 0:
            _check_number(number, f"{field}.{key}", AI_RANGE[0], AI_RANGE[1], low_open=False)


def _roofs(value: object, field: str) -> None:
    roofs = _mapping(value, field)
    _string(roofs.get("name"), f"{field}.name")
    _number_map(roofs.get("peak_flops"), f"{field}.peak_flops", roofs=True)
    _number_map(roofs.get("bandwidth"), f"{field}.bandwidth", roofs=True)


def _samples(value: object, field: str) -> None:
    for i, sample in enumerate(_list(value, field)):
        _check_number(sample, f"{field}[{i}]", TIME_RANGE[0], TIME_RANGE[1], low_open=False, optional=False)


def _ratio(value: object, field: str) -> None:
    _check_number(value, field, RATIO_RANGE[0], RATIO_RANGE[1], low_open=False)


def _compare(value: object, field: str) -> None:
    """An A/B block (``tests[].compare``): its ratios and intervals within :data:`RATIO_RANGE`, its times and
    fractions as a test's, its commit a full object id."""
    if value is None:
        return
    block = _mapping(value, field)
    _word(block.get("verdict"), f"{field}.verdict", AB_VERDICTS)
    changes = _mapping(block.get("changes"), f"{field}.changes")
    for quantity in ("time", "fraction"):
        moved = _mapping(changes.get(quantity), f"{field}.changes.{quantity}")
        where = f"{field}.changes.{quantity}"
        for key in ("now", "reference"):
            (_positive if quantity == "time" else _fraction)(moved.get(key), f"{where}.{key}")
        _ratio(moved.get("ratio"), f"{where}.ratio")
        for key in ("ci", "claim_ci"):
            for i, bound in enumerate(_list(moved.get(key), f"{where}.{key}")):
                _ratio(bound, f"{where}.{key}[{i}]")
    for i, ratio in enumerate(_list(block.get("pair_ratios"), f"{field}.pair_ratios")):
        _ratio(ratio, f"{field}.pair_ratios[{i}]")
    for key in ("max_drop", "max_slowdown", "between_cv"):
        _check_number(block.get(key), f"{field}.{key}", 0.0, RATIO_RANGE[1], low_open=False)
    parse_commit(block.get("commit"), f"{field}.commit")


def _timing(value: object, field: str) -> None:
    timing = _mapping(value, field)
    _samples(timing.get("samples_s"), f"{field}.samples_s")
    for key in ("median_s", "min_s", "max_s"):
        _positive(timing.get(key), f"{field}.{key}")
    rounds = timing.get("rounds")
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0):
        raise Invalid(f"{field}.rounds: {_text(rounds)} is not a whole number >= 0")


def _kernels(value: object, field: str) -> None:
    for i, kernel in enumerate(_list(value, field)):
        where = f"{field}[{i}]"
        kernel = _mapping(kernel, where)
        _string(kernel.get("name"), f"{where}.name")
        _positive(kernel.get("time_s"), f"{where}.time_s")
        _number_map(kernel.get("flops"), f"{where}.flops")
        _number_map(kernel.get("bytes"), f"{where}.bytes")


def _measured(record: Mapping[str, object], field: str) -> None:
    """What a test record and each of its regions share: times, work, intensity, kernels."""
    _fraction(record.get("fraction"), f"{field}fraction")
    for key in ("time_s", "t_min_s"):
        _positive(record.get(key), f"{field}{key}")
    _non_negative(record.get("flops"), f"{field}flops")
    for key in ("flops_by_precision", "bytes"):
        _number_map(record.get(key), f"{field}{key}")
    _intensities(record.get("ai"), f"{field}ai")
    _string(record.get("bound"), f"{field}bound")
    _kernels(record.get("kernels"), f"{field}kernels")


def check_test(record: object) -> dict[str, object]:
    """Raise Invalid naming the first field of a ``results.json`` / history test record that cannot be
    trusted: fractions finite in (0, 1.2] (``min_fraction`` in (0, 1]), times positive and finite, work finite
    and not negative, names strings, ``params`` an object of plain values, ``artifacts`` a list of strings."""
    if not isinstance(record, dict):
        raise Invalid(f"{_text(record)} is not an object")
    nodeid = record.get("nodeid")
    if not isinstance(nodeid, str) or not nodeid:
        raise Invalid(f"nodeid: {_text(nodeid)} is not a non-empty string")
    _word(record.get("outcome"), "outcome", OUTCOMES)
    _word(record.get("not_gated"), "not_gated", NOT_GATED)
    _string(record.get("function"), "function")
    _fraction(record.get("min_fraction"), "min_fraction", 1.0)
    _measured(record, "")
    for key, value in _mapping(record.get("params"), "params").items():
        if value is not None and not isinstance(value, (str, bool)) and _finite(value) is None:
            raise Invalid(f"params.{key}: {_text(value)} is not a string, a finite number, a bool or null")
    for i, path in enumerate(_list(record.get("artifacts"), "artifacts")):
        _string(path, f"artifacts[{i}]", optional=False)
    if record.get("judged_roofs") is not None:
        _roofs(record.get("judged_roofs"), "judged_roofs")
    baseline = _mapping(record.get("baseline"), "baseline")
    _fraction(baseline.get("fraction"), "baseline.fraction")
    _word(baseline.get("verdict"), "baseline.verdict", GATE_VERDICTS)
    _compare(record.get("compare"), "compare")
    for i, region in enumerate(_list(record.get("regions"), "regions")):
        where = f"regions[{i}]"
        region = _mapping(region, where)
        _measured(region, f"{where}.")
        _timing(region.get("timing"), f"{where}.timing")
        for j, part in enumerate(_list(region.get("parts"), f"{where}.parts")):
            part = _mapping(part, f"{where}.parts[{j}]")
            _positive(part.get("t_min_s"), f"{where}.parts[{j}].t_min_s")
            _timing(part.get("timing"), f"{where}.parts[{j}].timing")
    return record


def check_machine(machine: object, field: str = "machine") -> None:
    """A machine block: an object (or null) whose roofs are positive finite numbers and name a string."""
    if machine is None:
        return
    _roofs(machine, field)
    _string(_mapping(machine, field).get("key"), f"{field}.key")


def check_header(document: object, *, now: float | None = None) -> str:
    """``"history"`` or ``"results"``: which record the document is, its session and machine blocks parsed (a
    history's start is a time in range, :func:`parse_start`; a commit a full object id, :func:`parse_commit`;
    ids, branches and machine keys of their forms); Invalid naming the field otherwise (newer schemas are
    refused by the readers, which know theirs)."""
    if not isinstance(document, dict):
        raise Invalid("not a JSON object")
    if document.get("format") == HISTORY_FORMAT:
        kind = "history"
    elif "tests" in document and "schema" in document and "format" not in document:
        kind = "results"
    else:
        raise Invalid(f"format: {_text(document.get('format'))}, not {HISTORY_FORMAT!r} (nor a results.json)")
    schema = document.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int):
        raise Invalid(f"schema: {_text(schema)} is not an integer")
    newest = HISTORY_SCHEMA if kind == "history" else SCHEMA
    if schema > newest:  # its fields may mean something else: not checked by this reader's rules
        raise Invalid(f"schema {schema!r} is newer than this reader's {newest}")
    session = _mapping(document.get("session"), "session")
    _matching(session.get("id"), "session.id", SESSION_ID, "a session id ([A-Za-z0-9._:+-], at most 100)")
    if kind == "history" or session.get("start") is not None:  # a results.json of an old plugin may lack it
        parse_start(session.get("start"), now=now)
    git = _mapping(session.get("git"), "session.git")
    parse_commit(git.get("commit"))
    _matching(git.get("branch"), "session.git.branch", BRANCH, "a branch name")
    check_machine(document.get("machine"))
    key = _mapping(document.get("machine"), "machine").get("key")
    # the writer's keys are <name>-<8 hex>; a key names a folder, so it is at least a plain file name
    if key is not None and (not isinstance(key, str) or not KEY_TEXT.fullmatch(key)):
        raise Invalid(f"machine.key: {_text(key)} is not a machine key ([a-z0-9-], at most 80)")
    if not isinstance(document.get("tests"), list):
        raise Invalid(f"tests: {_text(document.get('tests'))} is not a list")
    return kind


def valid_tests(tests: Sequence[object], schema: int = SCHEMA) -> tuple[list[TestRecord], list[str]]:
    """The test records that pass :func:`check_test`, typed, and one line per record skipped: ``tests[3]
    ('a.py::t'): fraction: nan is not a finite number in (0, 1.2]``."""
    kept: list[TestRecord] = []
    problems: list[str] = []
    for i, record in enumerate(tests):
        try:
            checked = check_test(record)
        except Invalid as exc:
            nodeid = record.get("nodeid") if isinstance(record, dict) else None
            name = f" ({_text(nodeid)})" if isinstance(nodeid, str) else ""
            problems.append(f"tests[{i}]{name}: {exc}")
        else:
            kept.append(TestRecord.from_dict(checked, schema))
    return kept, problems


def describe_skipped(path: object, problems: Sequence[str], shown: int = 3) -> str:
    """One line for a file's skipped test records, the first few named with their field."""
    more = f"; and {len(problems) - shown} more" if len(problems) > shown else ""
    return (f"{path}: skipped {len(problems)} test record(s) that cannot be trusted: "
            + "; ".join(problems[:shown]) + more)
