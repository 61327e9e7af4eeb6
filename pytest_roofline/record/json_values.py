"""Values of a JSON document as read, given their Python types: the helpers every typed record's ``from_dict``
shares."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# A JSON object as read: its values are whatever the JSON held, left untyped rather than object because gates,
# history and the plugin read these blocks (baseline, compare, regions ...) by key without narrowing each value.
JsonObject = Mapping[str, Any]


def finite_number(value: object) -> float | None:
    """The value as a finite float, or None for a non-number (null, a bool, a string), NaN, ±Infinity or 1e400."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer of 400 digits
        return None
    return number if math.isfinite(number) else None


def text_of(value: object) -> str | None:
    """The value where it is a string, else None."""
    return value if isinstance(value, str) else None


