"""Values of a JSON document as read, given their Python types: the helpers every typed record's ``from_dict``
shares."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
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


def migrated(data: Mapping[str, object], schema: int, newest: int,
             steps: Mapping[int, Callable[[dict[str, object]], dict[str, object]]]) -> dict[str, object]:
    """A document of ``schema`` brought to ``newest`` by ``steps`` (schema -> the step to the next one): the one
    migration of every record here. ValueError for a schema that is not a positive integer or is newer than
    this package's."""
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise ValueError(f"schema: {schema!r} is not a positive integer")
    if schema > newest:
        raise ValueError(f"schema {schema} is newer than this package's {newest}: upgrade pytest-roofline")
    document = dict(data)
    for step in range(schema, newest):
        document = steps[step](document)
    return document
