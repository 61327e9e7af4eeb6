"""Which tests a batched ncu child profiles together (see ``counters/ncu/batch.py``), and ``--roofline-ncu-full``.

Serial session: the test that needs counts now and the session's later tests that use the ``roofline`` fixture
(up to ``MAX_BATCH``). xdist worker: only those of the same module, since a worker does not know which of the
later tests it will be given (``--dist loadfile`` keeps a module on one worker, so nothing is profiled twice).
Batched runs take the existing ncu lock, so workers' children run one at a time.
"""

from __future__ import annotations

import pytest

from pytest_roofline.counters.ncu.batch import MAX_BATCH


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def batch_candidates(item: pytest.Item, limit: int = MAX_BATCH) -> tuple[str, ...]:
    items = item.session.items
    try:
        start = items.index(item)
    except ValueError:
        return (item.nodeid,)
    same_module = hasattr(item.config, "workerinput")
    chosen = [item.nodeid]
    for later in items[start + 1:]:
        if len(chosen) >= limit:
            break
        if "roofline" not in getattr(later, "fixturenames", ()):
            continue
        if same_module and _module(later.nodeid) != _module(item.nodeid):
            continue
        chosen.append(later.nodeid)
    return tuple(chosen)


def ncu_full(config: pytest.Config) -> bool:
    value = config.getoption("roofline_ncu_full", None)
    return bool(config.getini("roofline_ncu_full") if value is None else value)
