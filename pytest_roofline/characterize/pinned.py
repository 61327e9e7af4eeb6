"""Pinned machine files: ceilings written down by hand (or saved from a characterization) in JSON or TOML.

Accepted layout (the one ``Machine.to_dict()`` writes; ``compute`` is accepted for ``peak_flops`` so the
``characterize --json`` output can be pinned as it is, and a cache file's ``machine`` record works too)::

    name = "my-box"                      # optional
    [peak_flops]                         # FLOP/s
    fp64 = 113.3e9
    fp32 = "225.6 GFLOP/s"               # a string may carry an explicit unit
    [bandwidth]                          # bytes/s
    L1 = 536e9
    DRAM = "31.6 GB/s"
    [info]                               # optional, free-form

Plain numbers are SI (FLOP/s, bytes/s). A plain number below 1e6 is rejected: it is almost surely in
GB/s or GFLOP/s, and a roof off by 1e9 would silently pass every test. Every roof, number or unit string, and
``info.capacities`` ({level: bytes or '4 MiB'}) then go through the checks of ``characterize/validate.py``
(plausible range, bandwidth not rising from L1 to DRAM, peaks not below ``info.gemm_flops``); a failure is a
``ValueError`` naming the file and the key.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from pytest_roofline.characterize import validate
from pytest_roofline.characterize.precision import cpuinfo_flags, native_precisions
from pytest_roofline.model import Machine
from pytest_roofline.record.loader import MAX_DEPTH, Invalid, nesting_depth_exceeds, read_bytes

LEVEL_PATTERN = re.compile(r"^(L[1-4]|DRAM|HBM)$")
PRECISION_PATTERN = re.compile(r"^(fp64|fp32|tf32|bf16|fp16|fp8|int8)(_tensor)?$")
ACCEPTED_KEYS = ("name", "peak_flops", "compute", "bandwidth", "info")
# What `characterize --json` writes beside the ceilings: kept apart in ``info["pinned_from"]`` (where the roofs
# came from), except whether that run kept its record, which says nothing about the numbers pinned now.
SUMMARY_KEYS = ("device", "fingerprint", "seconds", "date", "method", "sources", "threads", "kept", "not_kept")
_SMALLEST_PLAUSIBLE = 1e6

_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15,
           "ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40}
_QUANTITY = re.compile(r"^\s*([-+0-9.eE]+)\s*([kmgtpKMGTP]i?)?\s*(B/s|bytes/s|FLOP/s|FLOPS|flop/s|flops)\s*$")


class _Problem(Exception):
    pass


def load_machine_file(path: str | Path) -> Machine:
    """Read pinned ceilings; raise ``ValueError`` naming the file and what is wrong when it is not usable."""
    file = Path(path)
    try:
        data = _parse(file)
        return _machine_from(data, default_name=file.stem)
    except _Problem as problem:
        raise ValueError(f"machine file {file}: {problem}") from None


def _parse(file: Path) -> object:
    try:
        data = read_bytes(file)  # a regular file of bounded size, as every file read back
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError, Invalid) as error:
        raise _Problem(f"cannot read it ({error})") from None
    if nesting_depth_exceeds(data):
        raise _Problem(f"nested deeper than {MAX_DEPTH} levels")
    suffix = file.suffix.lower()
    if suffix == ".json":
        return _parse_json(text)
    if suffix == ".toml":
        return _parse_toml(text)
    try:
        return _parse_json(text)
    except _Problem:
        try:
            return _parse_toml(text)
        except _Problem:
            raise _Problem("neither valid JSON nor valid TOML (use a .json or .toml suffix for a precise error)") \
                from None


def _parse_json(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise _Problem(f"invalid JSON: {error}") from None


def _parse_toml(text: str) -> object:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        try:
            import tomli as tomllib
        except ImportError:
            raise _Problem("TOML needs the 'tomli' package on Python 3.10 (pip install tomli)") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise _Problem(f"invalid TOML: {error}") from None


def _machine_from(data: object, default_name: str) -> Machine:
    if isinstance(data, dict) and isinstance(data.get("machine"), dict) and "format" in data:
        data = data["machine"]  # a characterization cache file
    if not isinstance(data, dict):
        raise _Problem(f"top level must be a table/object with keys {', '.join(ACCEPTED_KEYS)}")
    unknown = sorted(set(data) - set(ACCEPTED_KEYS) - set(SUMMARY_KEYS))
    if unknown:
        raise _Problem(f"unknown key(s) {', '.join(map(repr, unknown))}; accepted: {', '.join(ACCEPTED_KEYS)}")
    if "peak_flops" in data and "compute" in data:
        raise _Problem("give compute ceilings as 'peak_flops' or 'compute', not both")
    compute = _ceilings(data.get("peak_flops", data.get("compute", {})), "peak_flops", PRECISION_PATTERN,
                        "FLOP/s", "fp64, fp32, tf32, bf16, fp16, fp8, int8, optionally with '_tensor'")
    bandwidth = _ceilings(data.get("bandwidth", {}), "bandwidth", LEVEL_PATTERN, "B/s", "L1..L4, DRAM, HBM")
    if not compute and not bandwidth:
        raise _Problem("no ceilings: give at least one of [peak_flops] (FLOP/s) or [bandwidth] (bytes/s)")
    info = data.get("info", {})
    if not isinstance(info, dict):
        raise _Problem("'info' must be a table/object")
    capacities, problems = validate.parse_capacities(info.get("capacities"))
    if problems:
        raise _Problem("; ".join(map(str, problems)))
    summary = {key: data[key] for key in SUMMARY_KEYS if key in data and key not in ("kept", "not_kept")}
    info = {**info, "source": "pinned", **({"capacities": capacities} if "capacities" in info else {}),
            **({"pinned_from": summary} if summary else {})}
    name = data.get("name", default_name)
    machine = Machine(name=str(name), peak_flops=compute, bandwidth=bandwidth, info=info)
    problems = validate.check_machine(machine)
    if problems:
        raise _Problem("; ".join(map(str, problems)))
    return validate.reconcile(machine, native_precisions(cpuinfo_flags()))


def _ceilings(table: object, what: str, pattern: re.Pattern[str], unit: str, accepted: str) -> dict[str, float]:
    if not isinstance(table, dict):
        raise _Problem(f"'{what}' must be a table/object mapping names to {unit} values")
    out: dict[str, float] = {}
    for raw_key, raw_value in table.items():
        key = _normalise_name(str(raw_key), pattern)
        if key is None:
            raise _Problem(f"{what}: unknown name {raw_key!r}; accepted: {accepted}")
        out[key] = _value(raw_value, f"{what}.{raw_key}", unit)
    return out


def _normalise_name(key: str, pattern: re.Pattern[str]) -> str | None:
    for candidate in (key, key.upper(), key.lower()):
        if pattern.match(candidate):
            return candidate
    return None


def _value(raw: object, where: str, unit: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise _Problem(f"{where}: expected a number in {unit} or a string like '31.5 G{unit}', got {raw!r}")
    if isinstance(raw, str):
        value = _with_unit(raw, where, unit)
    else:
        value = float(raw)
        if 0 < value < _SMALLEST_PLAUSIBLE:
            raise _Problem(f"{where}: {raw!r} {unit} is implausibly small; values are SI ({unit}), "
                           f"so write {raw!r}e9 or the string '{raw} G{unit}'")
    if not value > 0 or value == float("inf"):
        raise _Problem(f"{where}: must be a positive finite number, got {raw!r}")
    return value


def _with_unit(text: str, where: str, unit: str) -> float:
    match = _QUANTITY.match(text)
    if not match:
        raise _Problem(f"{where}: cannot read {text!r}; write a number in {unit} or e.g. '31.5 G{unit}'")
    number, prefix, found_unit = match.groups()
    is_bytes = found_unit.lower() in ("b/s", "bytes/s")
    if is_bytes != (unit == "B/s"):
        raise _Problem(f"{where}: {text!r} is in {found_unit} but this ceiling needs {unit}")
    try:
        return float(number) * _PREFIX[(prefix or "").lower()]
    except ValueError:
        raise _Problem(f"{where}: {number!r} is not a number") from None
