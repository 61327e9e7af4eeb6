"""The pool of twins and what travels between them (ab/pool.py, ab/twin.py, ab/channel.py, ab/follower.py):
which twin counts, when pairs start, a line cut short, and the pool's size and band in the options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.measure.timing import TimingPolicy


def test_the_pool_never_calls_new_a_test_this_checkouts_twin_lacks(tmp_path: Path) -> None:
    """``missing``: this checkout's own twin lacking the id is an error (unstable ids), never ``new``; a REF twin
    lacking it says why with REF's evidence."""
    from types import SimpleNamespace

    from pytest_roofline.ab.parity import Missing
    from pytest_roofline.ab.pool import TwinPool

    def twin(ids: set[str], verdict: str = "new") -> Any:
        return SimpleNamespace(nodeids=ids, error=None, log=tmp_path / "twin.log",
                               missing=lambda nodeid: Missing(verdict, f"{nodeid}: REF's evidence"))

    pool = TwinPool([(twin({"t.py::a"}), twin({"t.py::a", "t.py::b"})),
                     (twin({"t.py::a", "t.py::b"}), twin({"t.py::a", "t.py::b"}))])
    assert pool.missing("t.py::b").verdict == "error"  # pair 0's own twin did not collect it
    assert "this checkout's twin did not collect t.py::b" in pool.missing("t.py::b").explanation
    pool = TwinPool([(twin({"t.py::a", "t.py::c"}), twin({"t.py::a"}))])
    assert pool.missing("t.py::c") == Missing("new", "t.py::c: REF's evidence")


def test_a_line_cut_short_is_a_closed_channel() -> None:
    """A twin that dies while it writes leaves half a JSON line: the pipe is closed, not a JSONDecodeError."""
    import socket

    from pytest_roofline.ab.channel import Channel
    from pytest_roofline.errors import ChannelClosed

    ours, theirs = socket.socketpair()
    theirs.sendall(b'{"op": "rea\n')
    theirs.close()
    with pytest.raises(ChannelClosed, match="not a message"):
        Channel(ours).receive()


def test_the_pool_starts_further_pairs_only_when_asked_and_stops_growing_when_one_cannot_start(
        tmp_path: Path) -> None:
    from types import SimpleNamespace

    from pytest_roofline.ab.pool import TwinPool
    from pytest_roofline.errors import CompareError

    def twin() -> Any:
        return SimpleNamespace(nodeids={"t.py::a"}, error=None, log=tmp_path / "twin.log",
                               process=SimpleNamespace(pid=0, poll=lambda: None))

    started: list[int] = []

    def starter(number: int) -> Any:
        started.append(number)
        if number == 4:
            raise CompareError("--roofline-compare: the twin in /ref did not start")
        return (twin(), twin())

    pool = TwinPool([(twin(), twin()) for _ in range(3)], starter=starter, limit=6, room=lambda pids: None)
    assert started == [] and len(pool.pairs) == 3  # nothing started before a call site asks
    assert pool.grow() and started == [3] and len(pool.pairs) == 4
    assert not pool.grow() and started == [3, 4] and len(pool.pairs) == 4  # the fifth failed: no sixth tried
    assert pool.limit == 4 and pool.grow_error is not None and "did not start" in pool.grow_error
    assert not pool.grow() and started == [3, 4]
    fixed = TwinPool([(twin(), twin())])  # no starter: a fixed pool never grows
    assert not fixed.grow() and fixed.limit == 1


class ScriptedTwin:
    """A twin at the message level: one test with one call site; each turn takes ``seconds``; records whether
    the comparing side asked it for its region at the site's end (a region costs the twin a counted call)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.nodeids = {"t.py::a"}
        self.error: str | None = None
        self.finished: dict[str, Any] = {}
        self.replies: list[dict[str, Any]] = []
        self.asked: list[bool] = []  # per site_end: was the region asked for

    def begin_test(self, nodeid: str) -> Any:
        from pytest_roofline.ab.twin import TestLink

        self.replies.append({"op": "ready", "site": 0, "label": "f"})
        return TestLink(self, nodeid)  # type: ignore[arg-type]

    def send(self, **message: Any) -> None:
        op = message["op"]
        if op in ("warm", "discard", "call"):
            self.replies.append({"op": "t", "s": self.seconds, "faults": 0})
        elif op == "site_end":
            self.asked.append(bool(message.get("count")))
            self.replies.append({"op": "site", "region": {"t_min_s": 1e-3, "flops": 1.0} if message.get("count")
                                 else None})
            self.replies.append({"op": "test_done", "outcome": "passed"})

    def receive(self) -> dict[str, Any]:
        return self.replies.pop(0)

    def end_test(self, link: Any) -> dict[str, Any]:
        return {"op": "test_done", "outcome": "passed"}


def test_only_one_ref_twin_per_call_site_counts_its_call_and_sends_its_region() -> None:
    from pytest_roofline.ab.pool import PoolLink

    pool = [(ScriptedTwin(1e-3), ScriptedTwin(1e-3 * (1 + 0.01 * k))) for k in range(3)]
    link = PoolLink("t.py::a", pool, seed=0)  # type: ignore[arg-type]
    for _ in range(3):
        assert link.join(0) is not None
    result = link.measure_site("f", None, None, TimingPolicy(max_time_s=0.05), 0.03)
    assert result is not None and len(result.pairs) == 3
    assert [ref.asked for _, ref in pool] == [[True], [False], [False]]  # pair 0's REF twin only
    assert [this.asked for this, _ in pool] == [[False]] * 3  # this checkout's work is counted here
    assert result.ref_region() is not None and result.ref_region()["t_min_s"] == 1e-3


class ScriptedChannel:
    """A twin's channel that hands out a script of messages and keeps what the twin sent."""

    def __init__(self, inbox: list[dict[str, Any]]) -> None:
        self.inbox = inbox
        self.sent: list[dict[str, Any]] = []

    def send(self, **message: Any) -> None:
        self.sent.append(message)

    def receive(self) -> dict[str, Any]:
        return self.inbox.pop(0)


def test_a_twin_counts_its_call_only_when_its_region_is_asked_for() -> None:
    from types import SimpleNamespace

    from pytest_roofline.ab.follower import Follower

    class Counter:
        counted = 0

        def count(self, fn: Any, args: Any, kwargs: Any) -> tuple[Any, list[Any]]:
            Counter.counted += 1
            return fn(*args, **kwargs), []

    class Recorder:
        def region(self, counter: Any, label: str, kernels: Any, timing: Any, roofs: Any = None) -> Any:
            return SimpleNamespace(to_dict=lambda: {"label": label, "kernels": kernels})

    calls: list[int] = []
    for asked, counts in ((False, 0), (True, 1)):
        Counter.counted = 0
        channel = ScriptedChannel([{"op": "begin"}, {"op": "call", "batch": 1}, {"op": "site_end", "count": asked}])
        follower = Follower(channel)  # type: ignore[arg-type]
        site = follower.measure_site(Recorder(), Counter(), "f",  # type: ignore[arg-type]
                                     lambda x: calls.append(x) or x, (3,), {}, None)
        assert site == 3
        assert Counter.counted == counts
        assert (channel.sent[-1]["region"] is not None) == asked


def test_a_twin_skips_the_untimed_call_only_where_the_turn_says_so() -> None:
    from pytest_roofline.ab.lockstep import follow

    class Calls:
        runs = 0

        def run(self) -> tuple[float, int, int]:
            Calls.runs += 1
            return 1e-3, 0, 0

    # warm: 1 call, never rewarmed; timed turns of 2 and 1 calls, each after one untimed call (2 more) unless
    # the turn says not
    for rewarm, runs in ((None, 1 + 3 + 2), (True, 6), (False, 1 + 3)):
        Calls.runs = 0
        said = {} if rewarm is None else {"rewarm": rewarm}
        script = [{"op": "begin"}, {"op": "warm", "batch": 1, "rewarm": True}, {"op": "call", "batch": 2, **said},
                  {"op": "call", "batch": 1, **said}, {"op": "site_end", "count": False}]
        assert follow(ScriptedChannel(script), Calls(), 0, "f", lambda timing, roofs: {})  # type: ignore[arg-type]
        assert Calls.runs == runs


def test_the_pool_size_is_one_number_in_the_option_the_settings_and_the_pool() -> None:
    from pytest_roofline.ab.pairs import MAX_PROCESS_PAIRS
    from pytest_roofline.plugin.options import _OPTIONS
    from pytest_roofline.session.settings import Settings

    option = next(default for flag, _, _, default in _OPTIONS if flag == "--roofline-compare-pairs")
    import dataclasses

    settings = next(f.default for f in dataclasses.fields(Settings) if f.name == "compare_pairs")
    assert int(option) == settings == MAX_PROCESS_PAIRS == 12


def test_the_compare_band_is_auto_by_default_in_the_option_and_the_settings() -> None:
    import dataclasses

    from pytest_roofline.plugin.options import _OPTIONS
    from pytest_roofline.session.settings import SettingError, Settings, parse_compare_max_slowdown

    option = next(default for flag, _, _, default in _OPTIONS if flag == "--roofline-compare-max-slowdown")
    settings = next(f.default for f in dataclasses.fields(Settings) if f.name == "compare_max_slowdown")
    assert option == "auto" and settings is None
    where = "--roofline-compare-max-slowdown"
    assert parse_compare_max_slowdown("auto", where) is None and parse_compare_max_slowdown(" Auto", where) is None
    assert parse_compare_max_slowdown("0.05", where) == 0.05
    for bad in ("loose", "0", "-0.1", "11"):
        with pytest.raises(SettingError, match=r"--roofline-compare-max-slowdown must be 'auto' \(2 % where the "
                                                r"process pairs agree within 2.5 %, else 3 %\) or a number > 0"):
            parse_compare_max_slowdown(bad, where)


def test_a_twin_keeps_no_time_of_the_discarded_turn() -> None:
    from pytest_roofline.ab.lockstep import follow

    class Calls:
        runs = 0

        def run(self) -> tuple[float, int, int]:
            self.runs += 1
            return 0.001 * self.runs, 0, 0  # each call slower than the last: which ones were kept shows

    judged: list[Any] = []

    def judge(stats: Any, roofs: Any) -> dict[str, Any]:
        judged.append(stats)
        return {}

    channel = ScriptedChannel([{"op": "begin"}, {"op": "warm", "batch": 1},
                               {"op": "discard", "batch": 1, "rewarm": False},
                               {"op": "call", "batch": 1, "rewarm": False},
                               {"op": "call", "batch": 1, "rewarm": False}, {"op": "site_end", "count": True}])
    calls = Calls()
    assert follow(channel, calls, 0, "f", judge)  # type: ignore[arg-type]
    assert calls.runs == 4 and [m["s"] for m in channel.sent if m["op"] == "t"] == [0.001, 0.002, 0.003, 0.004]
    stats = judged[0]
    assert stats.rounds == 2 and stats.warmup_rounds == 1 and stats.min_s == pytest.approx(0.003)
