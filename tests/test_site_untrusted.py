"""Issue 26: ``report`` publishes nothing from outside the history, and writes its site into a fresh folder
moved into place (no write through a symlink in --out; a bad --out is exit 2 naming it)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.commands import main

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
    from pytest_roofline.site import build

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
