"""The command line's face: one program name, --version, plain-text help, old option names as deprecated
aliases, and a quiet exit when the reader of its output goes away."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_roofline.commands import COMMANDS, build_parser, main


def test_usage_names_the_console_script_for_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert top.startswith("usage: pytest-roofline [-h] [--version] COMMAND")
    assert "``" not in top and ":mod:" not in top  # plain text, not reST
    for name in COMMANDS:
        with pytest.raises(SystemExit):
            main([name, "--help"])
        text = capsys.readouterr().out
        assert text.startswith(f"usage: pytest-roofline {name}"), name
        assert "``" not in text and ":mod:" not in text, name


def test_python_dash_m_says_the_same_name() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_roofline", "--help"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: pytest-roofline ")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("pytest-roofline ")


@pytest.mark.parametrize(("command", "old", "new", "dest", "value"), [
    (["characterize"], "--fresh", "--recharacterize", "fresh", True),
    (["report", "history"], "--machine", "--machine-key", "machine", "box-1"),
    (["thresholds", "history"], "--machine", "--machine-key", "machine", "box-1"),
    (["import-ncu", "report.csv"], "--machine", "--machine-file", "machine", "roofs.json"),
])
def test_old_spellings_still_work_and_say_the_new_name(capsys: pytest.CaptureFixture[str], command: list[str],
                                                       old: str, new: str, dest: str, value: object) -> None:
    extra = [] if value is True else [str(value)]
    args = build_parser().parse_args([*command, new, *extra])
    assert getattr(args, dest) == value and capsys.readouterr().err == ""
    args = build_parser().parse_args([*command, old, *extra])
    assert getattr(args, dest) == value
    assert capsys.readouterr().err == f"pytest-roofline: {old} is deprecated; use {new}\n"
    with pytest.raises(SystemExit):
        main([command[0], "--help"])
    assert old + " " not in capsys.readouterr().out  # the help lists only the one name


FLOOD = """
import sys, types
from pytest_roofline import commands as cli

flood = types.ModuleType("flood")
flood.add_arguments = lambda parser: None
flood.run = lambda args: [print("x" * 60) for _ in range(100_000)] and 0
sys.modules["flood"] = flood
cli.COMMANDS["flood"] = ("flood", "prints far more than a pipe holds")
sys.exit(cli.main(["flood"]))
"""


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    done = subprocess.run(["bash", "-c", f"{sys.executable} {script} | head -n 1"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.stdout == "x" * 60 + "\n"
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
