"""Text from untrusted names (test ids, kernel names from a report or a history) made safe for where it goes.

- :func:`printable`: control characters (terminal escape sequences, carriage returns, bidi overrides) shown as
  ``\\x1b``-style escapes, so a kernel named ``\\x1b[2J`` cannot clear or rewrite the terminal.
- :func:`csv_cell`: a text cell starting with ``= + - @`` (or a tab or carriage return) gets a leading ``'`` so
  a spreadsheet opens it as text, not a formula (CSV injection); numbers stay numbers, negative ones included.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

Cell = TypeVar("Cell")  # a CSV cell's value: text comes back as text, anything else as it was

# C0 and C1 controls but newline and tab (the text may be several lines), DEL, and the bidi controls that
# reorder what a reader sees (Trojan Source).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` with every control character but newline and tab written as an escape."""
    return _CONTROL.sub(_escape, str(text))


def csv_cell(value: Cell) -> Cell | str:
    """A CSV cell that no spreadsheet runs as a formula: text starting with ``= + - @``, a tab or a carriage
    return is prefixed with ``'``; numbers and other text are returned as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_row(row: Mapping[str, float | str | None]) -> dict[str, float | str | None]:
    """Every key and cell of a row through :func:`csv_cell`."""
    return {csv_cell(key): csv_cell(value) for key, value in row.items()}
