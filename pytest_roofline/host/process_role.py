"""Which role this process plays: the child the ncu counter profiles is marked by an environment variable.

Its own tiny module so that the pytest glue can ask at configure time without importing the ncu backend.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

CHILD_ENV = "PYTEST_ROOFLINE_NCU_CHILD"


def is_profiled_child(environ: Mapping[str, str] | None = None) -> bool:
    return (os.environ if environ is None else environ).get(CHILD_ENV) == "1"
