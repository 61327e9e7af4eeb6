"""Keep the profiler's own log lines off the terminal.

``torch.profiler`` (Kineto) writes ``USDT:... SyncActivityProfilerHandler.cpp:52] profiler_start`` and the like
straight to file descriptor 2 from C++, where neither ``KINETO_LOG_LEVEL`` nor ``TORCH_CPP_LOG_LEVEL`` reaches
and, outside a test's capture (the gate runs after it), pytest does not catch them. :func:`profiler_stderr`
points descriptor 2 at a temporary file around the profiled pass and restores it after; what else was written
there meanwhile (a warning of the measured code) is passed on, only the profiler's lines are dropped.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

# Lines the torch profiler writes to stderr, "KIND:DATE TIME PID:TID FILE.cpp:LINE] message", for example
# "USDT:<date> <time> 15934:15934 SyncActivityProfilerHandler.cpp:52] profiler_start"
PROFILER_LINE = re.compile(rb"^[A-Z]+:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \d+:\d+ \w+\.(cpp|h):\d+\]")


def foreign_lines(data: bytes) -> bytes:
    """``data`` without the profiler's log lines."""
    return b"".join(line for line in data.splitlines(keepends=True) if not PROFILER_LINE.match(line))


@contextmanager
def profiler_stderr() -> Iterator[None]:
    """Divert file descriptor 2 for the block; on leaving, restore it and write back every line that is not
    the profiler's. Does nothing when descriptor 2 cannot be duplicated (a closed stderr)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    with tempfile.TemporaryFile() as diverted:
        os.dup2(diverted.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError, AttributeError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            diverted.seek(0)
            kept = foreign_lines(diverted.read())
            if kept:
                os.write(2, kept)
