"""``--roofline-compare last``'s REF from the history, and the chain of nightly A/B ratios (history/nightly.py,
history/chain.py), against hand-derived numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.commands import main
from pytest_roofline.history.chain import Z95, trajectory
from pytest_roofline.history.nightly import last_back, resolve_last
from pytest_roofline.record.sessions import Session
from pytest_roofline.record.tests import TestRecord

NODE = "perf/test_x.py::test_gemm"


def session(index: int, commit: str, branch: str | None = "main", key: str = "box-00000000",
            compare: dict[str, Any] | None = None, time_s: float = 1e-3) -> Session:
    record: dict[str, Any] = {"nodeid": NODE, "fraction": 0.5, "time_s": time_s}
    if compare is not None:
        record["compare"] = compare
    return Session(id=f"s{index}", start=f"2026-11-{index + 1:02d}T03:00:00+00:00", machine_key=key, commit=commit,
                   branch=branch, source=f"s{index}.json", tests={NODE: TestRecord.from_dict(record)})


def ab(ref: str, ratio: float, half_width: float, verdict: str = "steady") -> dict[str, Any]:
    """An A/B record whose 95 % interval is ratio ×/÷ exp(half_width) (log scale)."""
    return {"commit": ref, "verdict": verdict,
            "changes": {"time": {"ratio": ratio, "ci": [ratio * math.exp(-half_width), ratio * math.exp(half_width)]}}}


def test_last_and_last_n_are_told_from_git_revisions() -> None:
    assert [last_back(r) for r in ("last", "history:last", "last~7", "last~0", "HEAD~1", "lastly", None)] == \
        [1, 1, 7, 1, None, None, None]


def test_last_is_the_newest_other_commit_of_this_machine_and_branch() -> None:
    sessions = [session(0, "a" * 40), session(1, "b" * 40), session(2, "c" * 40, branch="feature"),
                session(3, "d" * 40, key="other-11111111"), session(4, "e" * 40), session(5, "e" * 40)]
    night = resolve_last(sessions, key="box-00000000", branch="main", head="f" * 40)
    assert night.commit == "e" * 40 and night.session is sessions[5]
    # a rerun of the night's own commit is not its REF; distinct commits count back
    assert resolve_last(sessions, key="box-00000000", branch="main", head="e" * 40).commit == "b" * 40
    assert resolve_last(sessions, key="box-00000000", branch="main", head="f" * 40, back=3).commit == "a" * 40
    assert resolve_last(sessions, key="box-00000000", branch=None, head="e" * 40).commit == "c" * 40  # detached
    short = resolve_last(sessions, key="box-00000000", branch="main", head="f" * 40, back=4)
    assert short.commit is None and short.why == ("the history holds 3 earlier commit(s) of machine box-00000000 on "
                                                  "branch 'main', fewer than the 4 that last~4 needs")
    first = resolve_last(sessions, key="new-22222222", branch="main", head="f" * 40)
    assert first.why == "the history holds no session of machine new-22222222 yet (a first night)"


def test_a_chain_is_the_product_of_its_ratios_and_its_interval_grows_with_each_link() -> None:
    a, b, c, d = ("a" * 40, "b" * 40, "c" * 40, "d" * 40)
    sessions = [session(0, a), session(1, b, compare=ab(a, 1.10, 0.02)), session(2, c, compare=ab(b, 1.00, 0.02)),
                session(3, d, compare=ab(c, 1.05, 0.04, "regressed"), time_s=1.3e-3)]
    path = trajectory(sessions, NODE)
    assert [n.commit for n in path.nights] == [a, b, c, d]
    assert [round(n.level, 6) for n in path.nights] == [1.0, 1.1, 1.1, round(1.1 * 1.05, 6)]
    se = [0.02 / Z95, 0.02 / Z95, 0.04 / Z95]  # each link's standard error, from its 95 % interval
    last = path.nights[-1]
    assert math.log(last.high / last.level) == pytest.approx(Z95 * math.sqrt(sum(s * s for s in se)))
    assert last.verdict == "regressed" and last.ratio == pytest.approx(1.05) and last.raw == pytest.approx(1.3)
    assert path.nights[0].ratio is None and path.misclosure is None and path.dof == 0


def test_a_skipped_night_joins_through_its_ref_and_an_unknown_ref_starts_a_segment() -> None:
    a, b, c, x, y = ("a" * 40, "b" * 40, "c" * 40, "9" * 40, "8" * 40)
    sessions = [session(0, a), session(1, b, compare=ab(a, 1.02, 0.02)),
                session(2, c, compare=ab(a, 1.04, 0.02)),  # its REF is two nights back: joined through a
                session(3, y, compare=ab(x, 0.95, 0.02))]  # REF never on the chain (pruned)
    nights = {n.commit: n for n in trajectory(sessions, NODE).nights}
    assert nights[c].level == pytest.approx(1.04) and nights[c].segment == 0
    assert nights[y].segment == 1 and nights[x].segment == 1 and nights[y].level == pytest.approx(0.95)


def test_an_anchor_night_closes_the_loop_by_least_squares() -> None:
    """Three links of 1 % each, and an anchor comparison of the fourth night with the first saying 1.00, all of
    equal error s: the chain path has variance 3 s², the anchor s², so the fourth night's log level is
    (3x / 3s²) / (1/3s² + 1/s²) = 3x/4 with variance 3s²/4; the misclosure 3x over a loop of 4 s²."""
    a, b, c, d = ("a" * 40, "b" * 40, "c" * 40, "d" * 40)
    half = 0.01
    s = half / Z95
    x = math.log(1.01)
    sessions = [session(0, a), session(1, b, compare=ab(a, 1.01, half)), session(2, c, compare=ab(b, 1.01, half)),
                session(3, d, compare=ab(c, 1.01, half)), session(4, d, compare=ab(a, 1.00, half))]
    path = trajectory(sessions, NODE)
    night = {n.commit: n for n in path.nights}[d]
    assert math.log(night.level) == pytest.approx(3 * x / 4)
    assert math.log(night.high / night.level) == pytest.approx(Z95 * math.sqrt(3 * s * s / 4))
    assert path.dof == 1 and path.misclosure == pytest.approx((3 * x) ** 2 / (4 * s * s))


def test_history_chain_prints_each_night(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commits = ["a" * 40, "b" * 40, "c" * 40]
    for index, commit in enumerate(commits):
        record: dict[str, Any] = {"nodeid": NODE, "fraction": 0.5, "time_s": 1e-3}
        if index:
            record["compare"] = ab(commits[index - 1], 1.2 if index == 2 else 1.0, 0.01,
                                   "regressed" if index == 2 else "steady")
        document = {"format": "pytest-roofline-history", "schema": 1,
                    "session": {"id": f"n{index}", "start": f"2026-11-0{index + 1}T03:00:00+00:00",
                                "git": {"commit": commit, "branch": "main", "dirty": False}},
                    "machine": {"key": "box-00000000", "name": "box", "peak_flops": {"fp32": 1e11},
                                "bandwidth": {"DRAM": 1e10}},
                    "tests": [record]}
        folder = tmp_path / "box-00000000"
        folder.mkdir(exist_ok=True)
        (folder / f"2026110{index + 1}T030000Z-{commit[:12]}-abcd.json").write_text(json.dumps(document))
    assert main(["history", "chain", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{NODE}: 3 night(s), 2 A/B comparison(s)" in out
    lines = [line for line in out.splitlines() if line.startswith("  2026")]
    assert len(lines) == 3 and "first night" in lines[0] and "×1.200" in lines[2] and "regressed" in lines[2]
    assert main(["history", "chain", str(tmp_path), "-k", "nothing"]) == 1
