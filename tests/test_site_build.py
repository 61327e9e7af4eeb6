"""The history site end to end (without a browser): summaries by hand, pages, links, figures, the CLI."""

from __future__ import annotations

import html.parser
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("plotly", reason="the site needs the 'site' extra: pip install -e '.[site]'")
pytest.importorskip("ruptures", reason="the site needs the 'site' extra: pip install -e '.[site]'")

from site_helpers import write_history

from pytest_roofline.commands import main
from pytest_roofline.site.generate import build_site
from pytest_roofline.site.history_reader import read_history
from pytest_roofline.site.model import history_frame, summarize


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("site")
    history = base / ".roofline" / "history"
    write_history(history)
    out = base / "out"
    build_site(history, out)
    return history, out


def _session_file(directory: Path, day: int, fraction: float) -> None:
    document = {"format": "pytest-roofline-history", "schema": 1,
                "session": {"id": str(day), "start": f"2026-01-{day:02d}T02:00:00+00:00",
                            "git": {"commit": f"{day:040x}"}},
                "machine": {"key": "m", "peak_flops": {"fp32": 1e11}, "bandwidth": {"DRAM": 1e10}},
                "tests": [{"nodeid": "t.py::test_a", "fraction": fraction, "min_fraction": 0.3,
                           "bound": "memory:DRAM", "outcome": "passed"}]}
    (directory / f"{day}.json").write_text(json.dumps(document))


def test_summary_of_a_test_by_hand(tmp_path: Path) -> None:
    fractions = [0.50, 0.52, 0.48, 0.51, 0.49, 0.50, 0.51, 0.40, 0.42, 0.41, 0.40, 0.39]
    for day, fraction in enumerate(fractions, start=1):
        _session_file(tmp_path, day, fraction)
    frame = history_frame(read_history(tmp_path))
    summary = summarize("m", "t.py::test_a", frame)
    assert summary.latest == 0.39 and summary.threshold == 0.3 and summary.bound == "memory:DRAM"
    assert summary.baseline == (0.50, 0.48, 0.52)  # the first 5 sessions: median, low, high
    # now: median of the last 3 (0.41, 0.40, 0.39) = 0.40; a week before day 12 is day 5: days 3-5 give 0.49.
    assert summary.baseline_change == pytest.approx(0.40 / 0.50 - 1)
    assert summary.week_change == pytest.approx(0.40 / 0.49 - 1)
    # last 5 (median 0.40) against days 3-7 (median 0.50), every recent value lower.
    assert summary.comparison.verdict == "regressed"
    assert summary.comparison.change == pytest.approx(-0.2)


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [value for name, value in attrs if name in ("href", "src") and value]


def links_of(page: Path) -> list[str]:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.links


def test_site_has_every_page_and_every_link_resolves_offline(site: tuple[Path, Path]) -> None:
    history, out = site
    pages = sorted(out.rglob("*.html"))
    # index, 2 machine pages, 2 x 6 test pages, 2 trajectory pages (test_matmul on each machine)
    assert len(pages) == 17
    assert len(list(out.glob("m/*/traj/*.html"))) == 2
    for page in pages:
        for link in links_of(page):
            assert not re.match(r"^[a-z]+:", link), f"{page.name} reaches outside the site: {link}"
            assert (page.parent / link.split("#")[0]).is_file(), f"{page.relative_to(out)}: {link} is missing"
    index = (out / "index.html").read_text(encoding="utf-8")
    nodeids = {t["nodeid"] for p in history.rglob("*.json") for t in json.loads(p.read_text())["tests"]}
    assert len(nodeids) == 6
    for nodeid in nodeids:
        _path, _, name = nodeid.rpartition("::")
        assert f'data-test="{nodeid}"' in index and name in index


def test_failing_sessions_link_their_kept_artifacts(site: tuple[Path, Path]) -> None:
    _, out = site
    page = next(out.glob("m/*/t/test_attention-*.html"))
    artifacts = [link for link in links_of(page) if "artifacts/" in link]
    # write_history keeps the artifacts of the last 3 failing sessions (over both machines) only
    assert artifacts and all((page.parent / link).is_file() for link in artifacts)
    assert "(not kept)" in page.read_text(encoding="utf-8")


def _figures(page: Path) -> list[dict]:
    text = page.read_text(encoding="utf-8")
    return [json.loads(body.replace("<\\/", "</")) for body in
            re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', text, re.DOTALL)]


def test_every_figure_is_valid_for_plotly(site: tuple[Path, Path]) -> None:
    import plotly.graph_objects as go

    _, out = site
    checked = 0
    for page in sorted(out.glob("m/*/*.html")) + sorted(out.glob("m/*/t/*.html")):
        for figure in _figures(page):
            go.Figure(figure)  # raises on any property plotly does not know
            checked += 1
    for page in out.glob("m/*/traj/*.html"):
        (spec,) = _figures(page)
        go.Figure(data=spec["roofs"], layout=spec["layout"])
        assert [line["labels"] for line in spec["sessions"][-1]["lines"]] == [["1", "2", "4"]]
        checked += 1
    assert checked == 2 * 2 + 12 * 2 + 2


def test_report_command(site: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history, _ = site
    keys = sorted(p.name for p in history.iterdir())
    assert main(["report", str(history), "--out", str(tmp_path / "one"), "--machine-key", keys[0],
                 "--since", "2025-01-09"]) == 0
    assert "6 tests over 9 sessions" in capsys.readouterr().out  # nights 3..11 (Jan 9-17) of one machine
    index = (tmp_path / "one" / "index.html").read_text(encoding="utf-8")
    assert keys[0] in index and keys[1] not in index
    assert main(["report", str(tmp_path / "missing")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "--out", str(tmp_path / "x")]) == 1
    assert "no readable history session" in capsys.readouterr().err


def test_points_sit_at_the_level_their_bytes_were_counted_at(tmp_path: Path) -> None:
    # As the analytic counter writes them: a small matmul's bytes at L2, a big one's at L3, none at DRAM.
    variants = [("64", {"L2": 8.0}, 524288.0, 1e-5), ("512", {"L3": 64.0}, 268435456.0, 6.7e-3)]
    for day in (1, 2):
        document = {"format": "pytest-roofline-history", "schema": 1,
                    "session": {"id": str(day), "start": f"2026-01-0{day}T02:00:00+00:00"},
                    "machine": {"key": "m", "peak_flops": {"fp32": 2e11},
                                "bandwidth": {"L2": 3.5e11, "L3": 3.7e11, "DRAM": 1.1e11}},
                    "tests": [{"nodeid": f"t.py::test_mm[{n}]", "function": "t.py::test_mm", "params": {"n": int(n)},
                               "fraction": 0.5, "ai": ai, "flops": flops, "time_s": t, "kernels": []}
                              for n, ai, flops, t in variants]}
        (tmp_path / f"{day}.json").write_text(json.dumps(document))
    build_site(tmp_path, tmp_path / "out")
    (spec,) = _figures(next((tmp_path / "out").glob("m/*/traj/*.html")))
    (line,) = spec["sessions"][-1]["lines"]
    assert line["x"] == [8.0, 64.0]
    assert line["y"] == [5.243e10, 4.006e10]  # 524288 / 1e-5 and 268435456 / 6.7e-3, 4 significant digits
    assert line["labels"] == ["64", "512"]
    roofline = _figures(next((tmp_path / "out").glob("m/*/t/test_mm_512-*.html")))[1]
    every_session = next(trace for trace in roofline["data"] if trace["name"] == "every session")
    assert every_session["x"] == [64.0, 64.0]


def test_a_second_parameter_makes_separate_lines_joined_along_the_first(tmp_path: Path) -> None:
    records = [{"nodeid": f"t.py::test_step[{batch}-{amp}]", "function": "t.py::test_step",
                "params": {"batch": batch, "amp": amp}, "fraction": 0.5, "ai": {"DRAM": 2.0 * batch},
                "flops": 1e9 * batch, "time_s": 0.01, "kernels": [{"name": "gemm<float>", "flops": {"fp32": 1e6},
                                                                    "bytes": {"DRAM": 1e5}, "time_s": None}]}
               for amp in (True, False) for batch in (4, 1, 2)]
    document = {"format": "pytest-roofline-history", "schema": 1,
                "session": {"id": "1", "start": "2026-01-01T02:00:00+00:00"},
                "machine": {"key": "m", "peak_flops": {"fp32": 2e11}, "bandwidth": {"DRAM": 1.1e11}},
                "tests": records}
    (tmp_path / "1.json").write_text(json.dumps(document))
    build_site(tmp_path, tmp_path / "out")
    (spec,) = _figures(next((tmp_path / "out").glob("m/*/traj/*.html")))
    lines = {line["name"]: line for line in spec["sessions"][0]["lines"]}
    assert list(lines) == ["amp=False", "amp=True"]  # parameter order: False before True
    assert lines["amp=True"]["labels"] == ["1", "2", "4"]  # batches in order, whatever the record order
    assert lines["amp=True"]["x"] == [2.0, 4.0, 8.0]
    page = next((tmp_path / "out").glob("m/*/t/*.html")).read_text(encoding="utf-8")
    assert "gemm&lt;float&gt;" in page and "gemm<float>" not in page


def test_a_session_without_a_measurement_shows_no_nan(tmp_path: Path) -> None:
    for day in range(1, 8):
        measured = day != 4
        record = {"nodeid": "t.py::test_a", "outcome": "passed" if measured else "error",
                  "fraction": 0.5 if measured else None, "min_fraction": 0.3 if measured else None,
                  "time_s": 0.01 if measured else None, "bound": "memory:DRAM" if measured else None,
                  "flops": 1e6, "ai": {"DRAM": 1.0}, "artifacts": [], "kernels": []}
        document = {"format": "pytest-roofline-history", "schema": 1,
                    "session": {"id": str(day), "start": f"2026-01-0{day}T02:00:00+00:00"},
                    "machine": {"key": "m", "peak_flops": {"fp32": 1e9}, "bandwidth": {"DRAM": 1e8}},
                    "tests": [record]}
        (tmp_path / f"{day}.json").write_text(json.dumps(document))
    build_site(tmp_path, tmp_path / "out")
    for page in (tmp_path / "out").rglob("*.html"):
        assert not re.search(r"\bnan\b|NaN", page.read_text(encoding="utf-8")), page.name
    page = next((tmp_path / "out").glob("m/*/t/*.html"))
    (fraction, _roofline) = _figures(page)
    assert len(fraction["data"][0]["y"]) == 6  # the session with no measurement has no point


def test_the_roofline_draws_the_roofs_the_test_was_judged_against(tmp_path: Path) -> None:
    """On 1 of 2 cores a test is judged against 1-core roofs: the chart must draw those, not the machine's."""
    for day in (1, 2):
        document = {"format": "pytest-roofline-history", "schema": 1,
                    "session": {"id": str(day), "start": f"2026-01-0{day}T02:00:00+00:00"},
                    "machine": {"key": "m", "peak_flops": {"fp32": 2e11}, "bandwidth": {"DRAM": 1e11}},
                    "tests": [{"nodeid": "t.py::test_mm", "function": "t.py::test_mm", "params": {},
                               "fraction": 0.5, "ai": {"DRAM": 10.0}, "flops": 5e8, "time_s": 1e-2, "kernels": [],
                               "judged_roofs": {"name": "m, 1 core", "peak_flops": {"fp32": 1e11},
                                                "bandwidth": {"DRAM": 5e10}}}]}
        (tmp_path / f"{day}.json").write_text(json.dumps(document))
    build_site(tmp_path, tmp_path / "out")
    roofline = _figures(next((tmp_path / "out").glob("m/*/t/test_mm-*.html")))[1]
    names = [trace["name"] for trace in roofline["data"]]
    assert "fp32 100 GFLOP/s" in names and "DRAM 50 GB/s" in names
    assert not any("200 GFLOP/s" in name or "100 GB/s" in name for name in names)
