"""The documentation: the README stays a door whose first block CI runs, the options reference is generated from
the option definitions (and its committed copy is current), and the MkDocs site builds with --strict."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_roofline import __version__
from pytest_roofline.plugin.options_doc import END, fill, options_markdown, registered_options

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
OPTION = re.compile(r"^  (--roofline(?:-[a-z0-9]+)*)\b", re.MULTILINE)  # the flag column of pytest --help


def registered_by_pytest(pytester: pytest.Pytester) -> set[str]:
    """Every ``--roofline*`` flag ``pytest --help`` lists: what the plugin really registers."""
    result = pytester.runpytest("--help")
    assert result.ret == 0
    return set(OPTION.findall(result.stdout.str()))


def test_the_generated_options_table_holds_every_registered_option(pytester: pytest.Pytester) -> None:
    registered = registered_by_pytest(pytester)
    assert "--roofline" in registered and "--roofline-recharacterize" in registered  # the help was read
    table = options_markdown()
    assert {flag for flag in registered if f"| `{flag}` |" not in table} == set()
    assert {o.flag for o in registered_options()} == registered


def test_the_committed_options_page_is_current() -> None:
    page = (DOCS / "options.md").read_text()
    assert page == fill(page), (
        "docs/options.md is stale: python -m pytest_roofline.plugin.options_doc --write docs/options.md")
    assert END in page


def test_options_table_rows_carry_ini_keys_and_defaults() -> None:
    rows = {line.split("|")[1].strip(" `"): line for line in options_markdown().splitlines()[2:]}
    assert "`roofline_max_time` | `1.0` |" in rows["--roofline-max-time"]
    assert "`roofline_strict` (bool) | off |" in rows["--roofline-strict"]
    assert "| – | off |" in rows["--roofline-recharacterize"]
    assert "(ini:" not in options_markdown()


def test_the_readme_is_a_door_whose_first_block_ci_runs() -> None:
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 200
    assert lines[2:6] == [
        "```bash",
        "pip install -e '.[torch,dev,site]' 'torch==2.13.0' && pytest --roofline example_suite",
        "pytest",
        "```",
    ]
    for needed in ("pip install 'pytest-roofline[torch]'", "min_fraction", "--roofline-baseline",
                   "--roofline-compare origin/main", ".roofline/", "-m roofline"):
        assert needed in text, needed


def test_every_relative_link_of_the_readme_resolves() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert local and all((ROOT / link).exists() for link in local), [l for l in local if not (ROOT / l).exists()]
    linked = {Path(link).name for link in local}
    assert {"getting-started.md", "writing-tests.md", "thresholds.md", "options.md", "ci.md", "history.md",
            "ab-compare.md"} <= linked


def overlong_prose(text: str, limit: int) -> list[str]:
    """The lines of a markdown page over ``limit`` characters, leaving out what cannot be wrapped without
    changing what it shows: fenced and indented code blocks and table rows."""
    long: list[str] = []
    fenced = indented = False
    previous = ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        indented = not fenced and line.startswith("    ") and (indented or not previous.strip())
        previous = line
        if not (fenced or indented or line.startswith("```") or line.lstrip().startswith("|")) and len(line) > limit:
            long.append(f"{number}: {line[:60]}…")
    return long


def test_overlong_prose_finds_a_long_line_and_spares_code_and_tables() -> None:
    text = "\n".join(["short", "x " * 70, "", "    " + "y" * 130, "| " + "z" * 130, "```", "w" * 130, "```"])
    assert overlong_prose(text, 120) == [f"2: {('x ' * 30)}…"]


def test_the_docs_are_wrapped_to_the_configured_line_length() -> None:
    limit = int(re.search(r"^line-length = (\d+)$", (ROOT / "pyproject.toml").read_text(), re.MULTILINE).group(1))
    pages = [README, ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
    long = {page.name: found for page in pages if (found := overlong_prose(page.read_text(), limit))}
    assert long == {}, f"wrap these lines to {limit} columns: {long}"


def test_the_site_builds_strict(tmp_path: Path, record_property, capsys: pytest.CaptureFixture[str]) -> None:
    missing = [m for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
               if importlib.util.find_spec(m.split(".")[0]) is None
               or (m == "mkdocstrings_handlers.python" and importlib.util.find_spec(m) is None)]
    if missing:
        pytest.skip(f"the docs tools are not installed ({', '.join(missing)}): pip install -e '.[docs]'")
    site = tmp_path / "site"
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    elapsed = time.perf_counter() - start
    record_property("docs_build_s", round(elapsed, 2))
    with capsys.disabled():
        print(f"\nmkdocs build --strict: {elapsed:.1f} s")
    assert result.returncode == 0, result.stdout + result.stderr
    options_page = (site / "options" / "index.html").read_text()
    assert {f for f in (o.flag for o in registered_options()) if f"<code>{f}</code>" not in options_page} == set()
    api = (site / "api" / "index.html").read_text()
    assert "RooflineFixture" in api and "declare" in api
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", api)))
    packed = text.replace(" ", "")  # types are split into cross-reference tags: compare without spaces
    # measure's and declare's parameters, each a row of a parameters table: name, type, description
    for row in ("fn Callable[..., Result] The function measured.",
                "flops float | Mapping[str, float] | None FLOPs per call",
                "precision str The precision of a", "level str | None The memory level of a",
                "name str | None The kernel's name"):
        assert row.replace(" ", "") in packed, row
    assert "peak_flops" in text  # the model's fields
    assert ":class:" not in text  # no raw reST roles
    changelog = (site / "changelog" / "index.html").read_text()
    assert "Unreleased" in changelog and f"pytest-roofline {__version__}" in api
    # no internal issue numbers in what users read
    for page in [README, *DOCS.glob("*.md"), *DOCS.glob("*.yml")]:
        assert not re.search(r"\bissues? \d+", page.read_text(), re.IGNORECASE), page.name
    # Every page under docs/ is in the nav (mkdocs.yml's validation makes an omitted page fail --strict).
    assert {p.stem for p in DOCS.glob("*.md")} <= {p.parent.name for p in site.glob("*/index.html")} | {"index"}
