"""Issue 26: ``report`` publishes nothing from outside the history, and writes its site into a fresh folder
moved into place (no write through a symlink in --out; a bad --out is exit 2 naming it). Issue 69: the site is
built past any one forged record, names it on the index, escapes every string it shows and names pages by a
digest no forged node id can share."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import warnings
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.commands import main
from pytest_roofline.errors import HistoryFileWarning
from pytest_roofline.site.history_reader import parse_time

pytest.importorskip("plotly")
pytest.importorskip("ruptures")

SECRET = "CI_SECRET_TOKEN=do-not-publish-4c1e"


def session(directory: Path, index: int, artifacts: list[str]) -> None:
    document = {"format": "pytest-roofline-history", "schema": 1,
                "session": {"id": f"s{index}", "start": f"2026-01-0{index + 1}T02:00:00+00:00",
                            "git": {"commit": f"{index:040x}"}},
                "machine": {"key": "m", "peak_flops": {"fp32": 1e11}, "bandwidth": {"DRAM": 1e10}},
                "tests": [{"nodeid": "t.py::test_a", "fraction": 0.2, "min_fraction": 0.3, "outcome": "failed",
                           "artifacts": artifacts}]}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{index}.json").write_text(json.dumps(document))


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``<root>/.roofline/{history,sessions}`` and, beside the roofline dir, files no site may publish."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret.png").write_text(SECRET)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text(SECRET)
    kept = tmp_path / ".roofline" / "sessions" / "s0"
    kept.mkdir(parents=True)
    (kept / "chart.png").write_bytes(b"\x89PNG chart")
    (kept / "k.kernels.csv").write_text("name,flops\nk,1\n")
    (kept / "notes.txt").write_text("not an artifact kind")
    history = tmp_path / ".roofline" / "history"
    history.mkdir()
    (history / "link.png").symlink_to(tmp_path / "secret.png")  # inside by name, outside once resolved
    os.mkfifo(kept / "fifo.png")
    session(history, 0, [".roofline/sessions/s0/chart.png", str(kept / "k.kernels.csv"), "/proc/self/environ",
                         "/etc/passwd", "../secret.png", ".roofline/history/../../.git/config",
                         str(history / "link.png"), ".roofline/sessions/s0/notes.txt",
                         ".roofline/sessions/s0/fifo.png", ".roofline/sessions/s0/gone.png"])
    return tmp_path


def test_only_artifacts_inside_the_history_are_copied(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI_SECRET_TOKEN", "do-not-publish-4c1e")
    assert main(["report", ".roofline/history", "--out", "site"]) == 0
    copied = sorted(p.name for p in (root / "site" / "artifacts").rglob("*") if p.is_file())
    assert copied == ["chart.png", "k.kernels.csv"]
    for page in (root / "site").rglob("*"):
        if page.is_file():
            assert b"do-not-publish-4c1e" not in page.read_bytes(), page
    text = next((root / "site").glob("m/*/t/test_a-*.html")).read_text(encoding="utf-8")
    for name in ("environ", "passwd", "secret.png", "config", "link.png"):
        assert f"{name} (not copied: outside the history)</span>" in text
    for name in ("notes.txt", "fifo.png"):
        assert f"{name} (not copied: not a regular .png, .csv, .ncu-rep or .json file)</span>" in text
    assert "gone.png (not kept)</span>" in text


def test_a_symlink_planted_in_out_is_replaced_not_written_through(root: Path) -> None:
    victim = root / "victim.txt"
    victim.write_text("untouched")
    assert main(["report", ".roofline/history", "--out", "site"]) == 0
    (root / "site" / "site.css").unlink()
    (root / "site" / "site.css").symlink_to(victim)
    assert main(["report", ".roofline/history", "--out", "site"]) == 0
    assert victim.read_text() == "untouched"
    assert not (root / "site" / "site.css").is_symlink() and "body" in (root / "site" / "site.css").read_text()
    linked = root / "elsewhere"
    linked.mkdir()
    (linked / "keep.txt").write_text("untouched")
    (root / "linked-site").symlink_to(linked)  # --out itself a link: the link is replaced, its target kept
    assert main(["report", ".roofline/history", "--out", "linked-site"]) == 0
    assert (root / "linked-site" / "index.html").is_file() and not (root / "linked-site").is_symlink()
    assert (linked / "keep.txt").read_text() == "untouched"
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".site") or ".tmp" in p.name) == []


@pytest.mark.parametrize(("out", "message"), [
    ("a-file", "report: --out 'a-file' is a file, not a folder"),
    ("/proc/site", "report: cannot write the site to '/proc/site': "),
    ("project", ("report: --out 'project' is a folder that holds no site (no index.html); the site replaces its "
                "folder whole: name a new or empty one")),
    (".roofline", "report: --out '.roofline' holds the history '.roofline/history'; the site replaces its folder"),
])
def test_a_bad_out_is_exit_2_naming_it(root: Path, capsys: pytest.CaptureFixture[str], out: str,
                                        message: str) -> None:
    (root / "a-file").write_text("a file")
    (root / "project").mkdir()
    (root / "project" / "main.py").write_text("print()")
    assert main(["report", ".roofline/history", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and "Traceback" not in err
    assert (root / "a-file").read_text() == "a file" and (root / "project" / "main.py").is_file()


def test_a_full_disk_leaves_the_old_site_whole(root: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_roofline.site import generate as build

    assert main(["report", ".roofline/history", "--out", "site"]) == 0
    before = {p.relative_to(root / "site"): p.read_bytes() for p in (root / "site").rglob("*") if p.is_file()}

    def full(path: Path, text: Any) -> None:
        if path.name == "index.html":
            raise OSError(errno.ENOSPC, "No space left on device")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text[:100], encoding="utf-8")  # truncated, as a full disk leaves it

    monkeypatch.setattr(build, "_write", full)
    assert main(["report", ".roofline/history", "--out", "site"]) == 2
    assert capsys.readouterr().err.startswith("report: cannot write the site to 'site': No space left on device")
    after = {p.relative_to(root / "site"): p.read_bytes() for p in (root / "site").rglob("*") if p.is_file()}
    assert after == before
    assert [p.name for p in root.iterdir() if p.name.startswith(".site")] == []


# --- Issue 69: one forged record next to a good one. The site is built past it, names it on the index, and
# shows no string from it as markup (plotly reads its labels as HTML).

INJECTED = "<img src=x onerror=alert(1)>"
SCRIPT_JSON = re.compile(r'<script type="application/json" id="[^"]*">(.*?)</script>', re.DOTALL)


def record_document(index: int, tests: list[dict[str, Any]], **session: Any) -> dict[str, Any]:
    """A history document of one session on machine "m" (roofs: fp32 100 GFLOP/s, DRAM 10 GB/s)."""
    return {"format": "pytest-roofline-history", "schema": 1,
            "session": {"id": f"s{index}", "start": f"2026-01-{index + 1:02d}T02:00:00+00:00",
                        "git": {"commit": f"{index:040x}"}, **session},
            "machine": {"key": "m", "peak_flops": {"fp32": 1e11}, "bandwidth": {"DRAM": 1e10}}, "tests": tests}


def measured(nodeid: str = "t.py::test_a", **fields: Any) -> dict[str, Any]:
    """A test record with a roofline point: 1 GFLOP in 20 ms at 10 FLOP/byte."""
    return {"nodeid": nodeid, "function": nodeid.split("[")[0], "fraction": 0.5, "min_fraction": 0.3,
            "outcome": "passed", "bound": "memory:DRAM", "time_s": 0.02, "flops": 1e9,
            "flops_by_precision": {"fp32": 1e9}, "bytes": {"DRAM": 1e8}, "ai": {"DRAM": 10.0}, **fields}


def write_json(folder: Path, name: str, document: object) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(document))


def build(history: Path, out: Path) -> str:
    """``report HISTORY --out OUT`` (exit 0 asserted); the index page's text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HistoryFileWarning)
        assert main(["report", str(history), "--out", str(out)]) == 0
    return (out / "index.html").read_text(encoding="utf-8")


def skipped_items(index: str) -> list[str]:
    """The items of the index's list of skipped files, as HTML."""
    section = re.search(r'<section class="skipped">(.*?)</section>', index, re.DOTALL)
    return re.findall(r"<li>(.*?)</li>", section.group(1)) if section else []


@pytest.mark.parametrize(("start", "why"), [
    # a time in the year 10000 once in UTC: the shared reader's parse_start refuses what astimezone overflows on
    ("9999-12-31T23:59:59-01:00", "&#x27;9999-12-31T23:59:59-01:00&#x27; is not an ISO 8601 time"),
    ("z", "&#x27;z&#x27; is not an ISO 8601 time"),
    ("", "&#x27;&#x27; is not an ISO 8601 time"),
    ("2019-12-31T23:59:59+00:00",
     "&#x27;2019-12-31T23:59:59+00:00&#x27; is outside 2020-01-01 .. the reader&#x27;s clock + 1 h"),
])
def test_a_start_that_is_no_time_skips_its_file_and_the_index_names_it(tmp_path: Path, start: str,
                                                                       why: str) -> None:
    history = tmp_path / "history"
    write_json(history, "good.json", record_document(0, [measured()]))
    write_json(history, "forged.json", record_document(1, [measured()], start=start))
    index = build(history, tmp_path / "site")
    assert skipped_items(index) == [f"<code>forged.json</code>: session.start: {why}"]
    assert "1 sessions on 1 machine" in index
    assert len(list((tmp_path / "site").glob("m/*/t/test_a-*.html"))) == 1


def test_a_start_past_the_clock_skips_its_file(tmp_path: Path) -> None:
    history = tmp_path / "history"
    write_json(history, "good.json", record_document(0, [measured()]))
    write_json(history, "future.json", record_document(1, [measured()], start="3000-01-01T00:00:00+00:00"))
    (item,) = skipped_items(build(history, tmp_path / "site"))
    assert item == ("<code>future.json</code>: session.start: &#x27;3000-01-01T00:00:00+00:00&#x27; is outside "
                    "2020-01-01 .. the reader&#x27;s clock + 1 h")


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-06-01T12:00:00+02:00", datetime(2026, 6, 1, 10, tzinfo=timezone.utc)),
    ("2026-06-01T12:00:00", datetime(2026, 6, 1, 12, tzinfo=timezone.utc)),  # naive: UTC
    ("2026-06-01T13:00:00+00:00", datetime(2026, 6, 1, 13, tzinfo=timezone.utc)),  # the clock + 1 h: the latest
    ("2026-06-01T14:59:59+02:00", datetime(2026, 6, 1, 12, 59, 59, tzinfo=timezone.utc)),  # compared in UTC
    ("2020-01-01T00:00:00+00:00", datetime(2020, 1, 1, tzinfo=timezone.utc)),  # validate.EARLIEST_START
    ("2020-01-01T00:00:00", datetime(2020, 1, 1, tzinfo=timezone.utc)),
])
def test_parse_time_gives_utc_within_the_sane_range(text: str, expected: datetime) -> None:
    now = datetime(2026, 6, 1, 12, tzinfo=timezone.utc)
    value = parse_time(text, now)
    assert value == expected and value.utcoffset() == timedelta(0)


OUTSIDE = "is outside 2020-01-01 .. the reader's clock + 1 h"


@pytest.mark.parametrize(("text", "message"), [
    ("2026-06-01T13:00:01+00:00", f"session.start: '2026-06-01T13:00:01+00:00' {OUTSIDE}"),  # a second past
    ("2026-06-01T15:00:01+02:00", f"session.start: '2026-06-01T15:00:01+02:00' {OUTSIDE}"),  # 13:00:01 UTC
    ("2026-06-02T11:59:59+00:00", f"session.start: '2026-06-02T11:59:59+00:00' {OUTSIDE}"),  # the old day of skew
    ("2019-12-31T23:59:59+00:00", f"session.start: '2019-12-31T23:59:59+00:00' {OUTSIDE}"),
    ("2020-01-01T00:30:00+01:00", f"session.start: '2020-01-01T00:30:00+01:00' {OUTSIDE}"),  # 2019 in UTC
    ("2000-01-01T00:00:00+00:00", f"session.start: '2000-01-01T00:00:00+00:00' {OUTSIDE}"),  # the old earliest
    # years 0 and 10000 once in UTC: astimezone overflows, and the text is refused as no time
    ("0001-01-01T00:30:00+01:00", "session.start: '0001-01-01T00:30:00+01:00' is not an ISO 8601 time"),
    ("9999-12-31T23:59:59-01:00", "session.start: '9999-12-31T23:59:59-01:00' is not an ISO 8601 time"),
    ("2026-13-01T00:00:00", "session.start: '2026-13-01T00:00:00' is not an ISO 8601 time"),
    ("x" * 100, "session.start: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... is not an ISO 8601 time"),
])
def test_parse_time_refuses_what_is_no_sane_start(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_time(text, datetime(2026, 6, 1, 12, tzinfo=timezone.utc))
    assert str(caught.value) == message


def test_a_compare_ratio_of_1e300_is_left_out_and_named(tmp_path: Path) -> None:
    # Let through, the A/B chain of the test page would chain exp(log(1e300) + its interval): the shared reader
    # refuses the record (validate.RATIO_RANGE), and the site names it.
    history = tmp_path / "history"
    write_json(history, "good.json", record_document(0, [measured()]))
    forged = measured(compare={"commit": f"{0:040x}", "verdict": "regressed",
                               "changes": {"time": {"ratio": 1e300, "ci": [1e-300, 1e301]}}})
    write_json(history, "forged.json", record_document(1, [forged, measured("t.py::test_b")]))
    index = build(history, tmp_path / "site")
    assert skipped_items(index) == [
        ("<code>forged.json</code>: skipped 1 test record(s) that cannot be trusted: tests[0] "
         "(&#x27;t.py::test_a&#x27;): compare.changes.time.ratio: 1e+300 is not a finite number in [1e-06, 1e+06]")]
    assert "2 sessions on 1 machine" in index  # the file's other test is kept
    assert len(list((tmp_path / "site").glob("m/*/t/test_b-*.html"))) == 1


TEST_A = "tests[0] (&#x27;t.py::test_a&#x27;)"


@pytest.mark.parametrize(("change", "why"), [
    ({"time_s": 1e-300, "flops": 1e300}, f"{TEST_A}: time_s: 1e-300 is not a finite number in [1e-12, 1e+07]"),
    ({"time_s": 0.02, "flops": 1e300}, f"{TEST_A}: flops: 1e+300 is not a finite number in [0, 1e+24]"),
    ({"ai": {"DRAM": 1e300}}, f"{TEST_A}: ai.DRAM: 1e+300 is not a finite number in [1e-12, 1e+12]"),
    ({"ai": {"DRAM": 5e-324}}, f"{TEST_A}: ai.DRAM: 5e-324 is not a finite number in [1e-12, 1e+12]"),
    ({"kernels": [{"name": "k", "flops": {"fp32": 1e300}, "bytes": {"DRAM": 1.0}, "time_s": 1e-3}]},
     f"{TEST_A}: kernels[0].flops.fp32: 1e+300 is not a finite number in [0, 1e+24]"),
    ({"judged_roofs": {"peak_flops": {"fp32": 1e300}, "bandwidth": {"DRAM": 1e10}}},
     f"{TEST_A}: judged_roofs.peak_flops.fp32: 1e+300 is not a finite number in [1000, 1e+20]"),
])
def test_numbers_past_physical_ranges_are_left_out_and_named(tmp_path: Path, change: dict[str, Any],
                                                            why: str) -> None:
    history = tmp_path / "history"
    write_json(history, "good.json", record_document(0, [measured()]))
    write_json(history, "forged.json", record_document(1, [measured(**change)]))
    index = build(history, tmp_path / "site")
    assert skipped_items(index) == [
        f"<code>forged.json</code>: skipped 1 test record(s) that cannot be trusted: {why}"]
    page = next((tmp_path / "site").glob("m/*/t/test_a-*.html")).read_text(encoding="utf-8")
    assert "1 sessions, 1 measured" in page


def test_machine_roofs_past_physical_ranges_skip_the_file(tmp_path: Path) -> None:
    history = tmp_path / "history"
    write_json(history, "good.json", record_document(0, [measured()]))
    forged = record_document(1, [measured()])
    forged["machine"]["bandwidth"] = {"DRAM": 1e-300}
    write_json(history, "forged.json", forged)
    assert skipped_items(build(history, tmp_path / "site")) == [
        "<code>forged.json</code>: machine.bandwidth.DRAM: 1e-300 is not a finite number in [1000, 1e+20]"]


def test_a_chain_past_what_a_float_holds_is_drawn_bounded_and_the_page_stands(tmp_path: Path) -> None:
    # 60 nights each x1e6 (every ratio at the top of validate.RATIO_RANGE, so none is refused): the chained level
    # would reach e^829, past a float's e^709; history/chain.py bounds each level at e^MAX_LOG_LEVEL (e^700).
    from pytest_roofline.history.chain import MAX_LOG_LEVEL
    from pytest_roofline.site.charts import sig

    history = tmp_path / "history"
    for night in range(60):
        compare = {"commit": f"{night - 1:040x}", "verdict": "regressed",
                   "changes": {"time": {"ratio": 1e6, "ci": [9e5, 1e6]}}} if night else None
        document = record_document(night, [measured(**({"compare": compare} if compare else {}))],
                                   start=(datetime(2026, 1, 1, 2, tzinfo=timezone.utc)
                                          + timedelta(days=night)).isoformat())
        write_json(history, f"{night:02d}.json", document)
    index = build(history, tmp_path / "site")
    assert skipped_items(index) == []
    page = next((tmp_path / "site").glob("m/*/t/test_a-*.html")).read_text(encoding="utf-8")
    assert "Not drawn" not in page
    assert '<h2>Nightly A/B chain</h2><div class="chart" id="chain"' in page
    assert '<p class="muted">60 nights, 59 A/B comparisons; last night ×' in page
    (chain,) = re.findall(r'<script type="application/json" id="chain-data">(.*?)</script>', page)
    band, level, _raw = json.loads(chain)["data"]
    levels = level["y"]
    # every night drawn as a finite number (sig() writes an infinite or NaN level as null), rising x1e6 a night
    # until the bound, then held there
    assert len(levels) == 60 and all(isinstance(y, float) for y in [*levels, *band["y"]])
    assert levels[0] == 1.0 and levels == sorted(levels)
    assert levels[5] == pytest.approx(1e30, rel=1e-3)
    assert levels[-1] == sig(math.exp(MAX_LOG_LEVEL)) and max(band["y"]) == levels[-1]
    assert "<h2>Roofline</h2>" in page and '<div class="chart" id="fraction"' in page


def mark(n: int) -> str:
    return f"<img src=x onerror=alert({n})>"


def commit(night: int) -> str:
    return f"{night}" * 40  # a full object id, told apart by its first 12 characters


def forged_strings(history: Path) -> None:
    """8 sessions whose every string a page shows carries markup (where the shared reader lets markup through:
    not in session ids, commits, branches and machine keys, which have forms of their own, nor in outcomes and
    verdicts, words of closed sets), beside the names of skipped files: one with markup in its name and format,
    one each with markup where a form refuses it, and records with markup where a closed set refuses it."""

    level, precision = mark(1), mark(2)
    for night in range(8):
        tests = [measured(f"t.py::test_{mark(3)}[{batch}-{mark(4)}]", function=f"t.py::test_{mark(3)}",
                          params={"batch": batch, "kind": mark(4)}, bound=f"memory:{mark(5)}",
                          outcome="failed" if night == 7 else "passed", fraction=0.5 if night < 4 else 0.25,
                          flops_by_precision={precision: 1e9 * batch}, flops=1e9 * batch, bytes={level: 1e8},
                          ai={level: 10.0 * batch},
                          kernels=[{"name": mark(7), "flops": {precision: 1e9}, "bytes": {level: 1e8},
                                    "time_s": 0.01}],
                          baseline={"verdict": "regressed", "explanation": mark(9), "statistic": mark(10),
                                    "sessions": ["s0", "s1"]},
                          artifacts=[f"{mark(11)}.png"],
                          compare={"commit": commit(night - 1), "verdict": "regressed",
                                   "changes": {"time": {"ratio": 1.1, "ci": [1.0, 1.2]}}} if night else None)
                 for batch in (1, 2)]
        if night == 7:  # an A/B block whose reference is markup, not a commit: the record alone is left out
            tests.append(measured("t.py::test_forged", compare={"commit": mark(12), "verdict": "regressed"}))
            # words outside their closed sets: each record is left out
            tests.append(measured("t.py::test_forged_outcome", outcome=mark(6)))
            tests.append(measured("t.py::test_forged_verdict", baseline={"verdict": mark(8)}))
        document = record_document(night, tests, git={"commit": commit(night), "branch": "main"})
        document["machine"] = {"key": "m", "name": mark(17), "peak_flops": {precision: 1e11},
                               "bandwidth": {level: 1e10}}
        write_json(history, f"{night}.json", document)
    write_json(history, f"{mark(18)}.json", {"format": mark(19)})
    forms = {"id": {"id": mark(14)}, "commit": {"git": {"commit": mark(12)}}, "branch": {"git": {"branch": mark(15)}}}
    for night, (name, session) in enumerate(forms.items(), start=20):
        write_json(history, f"forged-{name}.json", record_document(night, [measured()], **session))
    forged_key = record_document(23, [measured()])
    forged_key["machine"]["key"] = f"m{mark(16)}"
    write_json(history, "forged-key.json", forged_key)


def strings_in(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*strings_in(k), *strings_in(v)]]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []


def test_markup_in_any_string_of_the_history_reaches_no_page_unescaped(tmp_path: Path) -> None:
    history = tmp_path / "history"
    forged_strings(history)
    out = tmp_path / "site"
    index = build(history, out)
    files = [p for p in out.rglob("*") if p.is_file()]
    pages = [p for p in files if p.suffix == ".html"]
    assert len(pages) == 5  # index, machine, 2 tests, trajectory
    for path in files:
        assert b"<img src=x" not in path.read_bytes(), path
    figures: list[str] = []
    for page in pages:
        for text in SCRIPT_JSON.findall(page.read_text(encoding="utf-8")):
            assert not re.search(r"[<>&\u2028\u2029]", text), page  # the inline JSON escapes them
            figures += strings_in(json.loads(text))
    assert figures and not [s for s in figures if "<img" in s]
    shown = {int(n) for s in figures for n in re.findall(r"&lt;img src=x onerror=alert\((\d+)\)&gt;", s)}
    # every string that reaches a figure reaches it escaped: roof and level names, test names and parameters,
    # bound, kernel names; commits as their first 12 characters
    assert shown == {1, 2, 3, 4, 5, 7}
    assert commit(7)[:12] in figures
    assert "&lt;img src=x onerror=alert(1)&gt; 10 GB/s" in figures  # the DRAM roof's trace name
    # the files the shared reader refuses, each named on the index with the field, escaped
    assert sorted(skipped_items(index)) == sorted([
        ("<code>7.json</code>: skipped 3 test record(s) that cannot be trusted: tests[2] (&#x27;t.py::test_forged"
         "&#x27;): compare.commit: &#x27;&lt;img src=x onerror=alert(12)&gt;&#x27; is not a full hexadecimal commit "
         "id; tests[3] (&#x27;t.py::test_forged_outcome&#x27;): outcome: &#x27;&lt;img src=x onerror=alert(6)&gt;"
         "&#x27; is not one of passed, failed, skipped, xfailed, xpassed, error, not run; tests[4] (&#x27;t.py::"
         "test_forged_verdict&#x27;): baseline.verdict: &#x27;&lt;img src=x onerror=alert(8)&gt;&#x27; is not one "
         "of regressed, improved, steady, noisy, inconclusive, changed, new"),
        ("<code>&lt;img src=x onerror=alert(18)&gt;.json</code>: format: &#x27;&lt;img src=x onerror=alert(19)"
         "&gt;&#x27;, not &#x27;pytest-roofline-history&#x27; (nor a results.json)"),
        ("<code>forged-branch.json</code>: session.git.branch: &#x27;&lt;img src=x onerror=alert(15)&gt;&#x27; is "
         "not a branch name"),
        ("<code>forged-commit.json</code>: session.git.commit: &#x27;&lt;img src=x onerror=alert(12)&gt;&#x27; is "
         "not a full hexadecimal commit id"),
        ("<code>forged-id.json</code>: session.id: &#x27;&lt;img src=x onerror=alert(14)&gt;&#x27; is not a session "
         "id ([A-Za-z0-9._:+-], at most 100)"),
        ("<code>forged-key.json</code>: machine.key: &#x27;m&lt;img src=x onerror=alert(16)&gt;&#x27; is not a "
         "machine key ([a-z0-9-], at most 80)"),
    ])


def test_the_inline_json_escapes_what_html_and_javascript_read() -> None:
    from pytest_roofline.site import pages

    value = {"a": "</script><!-- & \u2028\u2029"}
    text = pages.json_text(value)
    assert text == '{"a":"\\u003c/script\\u003e\\u003c!-- \\u0026 \\u2028\\u2029"}'
    assert json.loads(text) == value


def test_plotly_text_escapes_markup_and_template_fields() -> None:
    from pytest_roofline.site.charts import plotly_text

    assert plotly_text("memory:<img src=x onerror=alert(1)> %{x} & b") == \
        "memory:&lt;img src=x onerror=alert(1)&gt; &#37;{x} &amp; b"


# Two node ids of one crc32 (0xe506ee73): the test pages were named by it, so the second overwrote the first.
TWINS = ("tests/d29685295/test_x.py::test_a", "tests/d32060020/test_x.py::test_a")


def test_node_ids_of_one_crc32_get_their_own_pages(tmp_path: Path) -> None:
    assert zlib.crc32(TWINS[0].encode()) == zlib.crc32(TWINS[1].encode()) == 0xE506EE73
    history = tmp_path / "history"
    write_json(history, "good.json", record_document(0, [measured(TWINS[0]), measured(TWINS[1], fraction=0.25)]))
    build(history, tmp_path / "site")
    found = sorted((tmp_path / "site").glob("m/*/t/*.html"))
    assert [p.name for p in found] == sorted(f"test_a-{hashlib.sha256(t.encode()).hexdigest()[:20]}.html"
                                             for t in TWINS)
    titles = sorted(re.search(r"<h1>(.*?)</h1>", p.read_text(encoding="utf-8")).group(1)  # type: ignore[union-attr]
                    .replace("<wbr>", "") for p in found)
    assert titles == sorted(TWINS)


def test_a_digest_collision_is_told_apart_not_written_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.site import model

    monkeypatch.setattr(model, "slug", lambda text: "same")  # every name's digest collides
    assert model.page_names(["b", "a", "c", "a"], ".html") == {"a": "same.html", "b": "same-2.html",
                                                               "c": "same-3.html"}
    history = tmp_path / "history"
    write_json(history, "good.json", record_document(0, [measured("t.py::test_a"),
                                                         measured("t.py::test_b", fraction=0.25)]))
    build(history, tmp_path / "site")
    pages = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "site" / "m" / "same" / "t").iterdir()}
    assert sorted(pages) == ["same-2.html", "same.html"]
    assert "<h1>t.py::<wbr>test_a</h1>" in pages["same.html"] and "<h1>t.py::<wbr>test_b</h1>" in pages["same-2.html"]


def test_a_page_whose_arithmetic_fails_says_so_and_the_index_names_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.site import generate as site_build

    def overflow(machine: str, sessions: object) -> str:
        raise OverflowError("math range error")

    monkeypatch.setattr(site_build, "_machine_page", overflow)
    history = tmp_path / "history"
    write_json(history, "good.json", record_document(0, [measured()]))
    index = build(history, tmp_path / "site")
    assert skipped_items(index) == ["<code>m: roofs over time</code>: OverflowError: math range error"]
    page = next((tmp_path / "site").glob("m/*/machine.html")).read_text(encoding="utf-8")
    assert '<h1>m</h1><p class="note">Not drawn: OverflowError: math range error.</p>' in page


def test_a_lone_surrogate_is_written_as_its_escape(tmp_path: Path) -> None:
    history = tmp_path / "history"
    write_json(history, "good.json", record_document(0, [measured("t.py::test_\ud800", bound="memory:\udc00")]))
    build(history, tmp_path / "site")
    page = next((tmp_path / "site").glob("m/*/t/test-*.html")).read_text(encoding="utf-8")
    assert "<h1>t.py::<wbr>test_\\ud800</h1>" in page and "<b>memory:\\udc00</b>" in page


def test_the_index_names_the_first_100_skipped_files_and_counts_the_rest() -> None:
    from pytest_roofline.site.generate import skipped_section
    from pytest_roofline.site.history_reader import Skipped

    section = skipped_section([Skipped(f"{i}.json", "not a JSON object") for i in range(102)])
    items = skipped_items(section)
    assert len(items) == 101 and items[0] == "<code>0.json</code>: not a JSON object"
    assert items[-2:] == ["<code>99.json</code>: not a JSON object", "and 2 more"]
    assert "<h3>102 files skipped or cut</h3>" in section
