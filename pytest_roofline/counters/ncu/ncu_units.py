"""Numbers and units as Nsight Compute prints them, turned into SI base units.

ncu prints base units with ``--csv`` (``byte``, ``nsecond``, ``cycle/second`` or ``hz``) but auto-scales them
otherwise (``Mbyte``, ``usecond``/``us``, ``Ghz``, ``Gbyte/s``). Prefixes are decimal: sample 06 has
``dram__bytes_read.sum = 3.35 Mbyte`` over ``Duration = 23.42 us`` and a Memory Throughput of
``143.20 Gbyte/s``; 3.35e6 / 23.42e-6 = 143.0e9, while binary prefixes would give 150e9.
Some ncu versions print thousands separators even in base units (``"1,619,999,997.89"``).
"""

from __future__ import annotations

import math

from pytest_roofline.errors import NonFiniteNumber, UnitError  # noqa: F401 (re-exported under its old name)

_PREFIX: dict[str, float] = {
    "": 1.0,
    "p": 1e-12,
    "n": 1e-9,
    "u": 1e-6,
    "\u00b5": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
}

# Base units that take a prefix, with the spelling ncu uses and a few it might use.
_SCALABLE_BASES: dict[str, str] = {
    "byte": "byte",
    "bytes": "byte",
    "b": "byte",
    "second": "second",
    "seconds": "second",
    "s": "second",
    "sec": "second",
    "hz": "hz",
    "cycle": "cycle",
    "cycles": "cycle",
    "inst": "inst",
    "insts": "inst",
}

NOT_AVAILABLE = frozenset({"n/a", "na", "nan", "-", "--"})

# Units ncu prints that count things (no prefix to scale): a unit that is neither one of these nor a
# (prefixed) base unit above is refused by import-ncu, rather than read as seconds or bytes.
COUNTING_UNITS = frozenset({
    "", "%", "(!)", "warp", "warps", "block", "blocks", "thread", "threads", "register", "registers", "sector",
    "sectors", "request", "requests", "wavefront", "wavefronts", "transaction", "transactions", "pass",
    "passes", "sm", "sms", "instruction", "instructions", "lane", "lanes", "cta", "ctas", "grid", "kernel",
    "launch", "launches", "context", "stream", "bank", "banks", "conflict", "conflicts", "op", "ops", "flop",
    "flops", "fma", "hit", "hits", "miss", "misses", "tag", "tags", "wave", "waves", "cluster", "clusters",
    "count", "counts", "value", "element", "elements", "percent", "ratio",
})


def _split_prefix(part: str) -> tuple[float, str]:
    """``"Mbyte"`` -> (1e6, "byte"); ``"us"`` -> (1e-6, "second"); ``"warp"`` -> (1.0, "warp")."""
    text = part.strip()
    if not text:
        return 1.0, ""
    base = _SCALABLE_BASES.get(text.lower())
    if base is not None:  # a whole word first: "s", "B", "byte", "hz"
        return 1.0, base
    if len(text) > 1 and text[0] in _PREFIX:
        rest = _SCALABLE_BASES.get(text[1:].lower())
        if rest is not None:
            return _PREFIX[text[0]], rest
    # Counting units (warp, block, thread, register, sector, pass, SM, %) are kept as they are.
    return 1.0, text


def is_known_unit(unit: str) -> bool:
    """Whether every part of ``unit`` (``Gbyte/s``: ``Gbyte`` and ``s``) is a base unit, with or without a
    prefix, or a counting unit ncu prints; ``fortnight`` is not."""
    for part in (unit or "").strip().split("/"):
        _, base = _split_prefix(part)
        counted = base.lower() in COUNTING_UNITS or (len(base) > 1 and base[0] in _PREFIX
                                                     and base[1:].lower() in COUNTING_UNITS)  # Msector
        if base not in _SCALABLE_BASES.values() and not counted:
            return False
    return True


def unit_factor(unit: str) -> tuple[float, str]:
    """Factor that turns a value in ``unit`` into SI base units, and the base unit's name.

    ``"Gbyte/s"`` -> (1e9, "byte/second"); ``"usecond"`` -> (1e-6, "second"); ``"Ghz"`` -> (1e9, "hz");
    ``"cycle/second"`` -> (1.0, "hz"); ``"%"`` -> (1.0, "%"); ``""`` -> (1.0, "").
    """
    text = (unit or "").strip()
    if "/" in text:
        numerator, denominator = text.split("/", 1)
        num_factor, num_base = _split_prefix(numerator)
        den_factor, den_base = _split_prefix(denominator)
        base = f"{num_base}/{den_base}"
        if base == "cycle/second":
            base = "hz"  # ncu 2020 prints cycle/second where later versions print hz
        return num_factor / den_factor, base
    return _split_prefix(text)


def parse_number(text: str) -> float | None:
    """A number as ncu prints it; ``None`` for ``n/a`` and empty cells (absent, not zero).

    Thousands separators are removed (the commas sit inside quoted fields, so CSV parsing is unaffected).
    Raises ``ValueError`` for text that is not a number (``"(128, 1, 1)"``, ``"SIMT"``), and
    :class:`NonFiniteNumber` (a ValueError) for ``inf`` or a number too large for a float (``1e400``).
    """
    cleaned = (text or "").strip().replace(",", "").replace("\u202f", "").replace("\u00a0", "")
    if cleaned.lower() in NOT_AVAILABLE or not cleaned:
        return None
    value = float(cleaned)
    if math.isnan(value):
        return None
    if math.isinf(value):
        raise NonFiniteNumber(f"{text.strip()!r} is not a finite number")
    return value


def to_si(text: str, unit: str) -> float | None:
    """``to_si("3.35", "Mbyte") == 3.35e6``; ``None`` where ncu printed ``n/a``."""
    value = parse_number(text)
    if value is None:
        return None
    factor, _ = unit_factor(unit)
    return value * factor
