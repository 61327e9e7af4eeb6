"""The characterization's progress in a pytest session: one updating line on a terminal, a few lines in a log.

The characterization reports every sweep point (``  update sweep 12/60: 1.68 MiB -> 0.5 GB/s``). On a terminal
each message replaces the last on one line; in a CI log (not a terminal) the sweep points are left out and the
rest (what is measured, each roof, warnings, done) stays, a dozen lines. Plain Python: the writers are given.
"""

from __future__ import annotations

import re
from collections.abc import Callable

SWEEP_POINT = re.compile(r"^\s*(\S+ )?sweep \d+/\d+:")


class Progress:
    """``progress(message)`` for :func:`characterize`; ``finish()`` ends an updating line."""

    def __init__(self, write_line: Callable[[str], None], rewrite: Callable[[str], None] | None,
                 width: int = 80, prefix: str = "roofline: ") -> None:
        self.write_line, self.rewrite, self.width, self.prefix = write_line, rewrite, width, prefix
        self.open = False  # an updating line is on the screen, not ended

    def __call__(self, message: str) -> None:
        text = f"{self.prefix}{message.strip()}"
        rewrite = self.rewrite
        if rewrite is None:  # a log: every message but the sweep points
            if not SWEEP_POINT.match(message):
                self.write_line(text)
            return
        if message.startswith(("done", "warning")):  # kept on the screen
            self.finish()
            self.write_line(text)
            return
        line = text if len(text) < self.width else text[:self.width - 4] + "..."
        rewrite(line.ljust(self.width - 1))
        self.open = True

    def finish(self) -> None:
        if self.open and self.rewrite is not None:
            self.rewrite(" " * (self.width - 1))
            self.rewrite("")
        self.open = False


def for_reporter(reporter: object, prefix: str = "roofline: ") -> Progress:
    """A :class:`Progress` on pytest's terminal reporter: updating on a terminal, filtered otherwise."""
    tw = getattr(reporter, "_tw", None)
    tty = bool(getattr(tw, "isatty", lambda: False)() if callable(getattr(tw, "isatty", None))
               else getattr(tw, "hasmarkup", False))
    width = int(getattr(tw, "fullwidth", 80) or 80)
    rewrite = getattr(reporter, "rewrite", None) if tty else None
    return Progress(reporter.write_line, rewrite, width, prefix)  # type: ignore[attr-defined]
