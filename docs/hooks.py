"""MkDocs hook (mkdocs.yml ``hooks:``): fills the options reference from the plugin's option definitions at build
time, so the published table is always the one the plugin registers; shows the version being built in the site's
name; publishes the repository's CHANGELOG.md as the changelog page (one file, read on GitHub and on the
site); and shows a file where a page says ``<!-- include: docs/PATH -->`` (the CI workflows: one copy to keep)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any


def on_config(config: Any, **kwargs: Any) -> Any:
    # Document the checkout being built, not whichever pytest_roofline happens to be installed.
    root = str(Path(config.config_file_path).resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from pytest_roofline import __version__

    config["site_name"] = f"pytest-roofline {__version__}"
    return config


def on_page_read_source(page: Any, config: Any, **kwargs: Any) -> str | None:
    if page.file.src_uri != "changelog.md":
        return None
    changelog = Path(config.config_file_path).resolve().parent / "CHANGELOG.md"
    # links in CHANGELOG.md point into docs/ (for GitHub); on the site the pages are siblings
    return changelog.read_text(encoding="utf-8").replace("](docs/", "](")


INCLUDE = re.compile(r"^<!-- include: (docs/[\w./-]+) -->$", re.MULTILINE)
LANGUAGES = {".yml": "yaml", ".yaml": "yaml", ".py": "python", ".toml": "toml"}


def include_files(markdown: str, root: Path) -> str:
    """Each ``<!-- include: docs/PATH -->`` line replaced by that file as a fenced block, headed by its path."""
    def block(match: re.Match[str]) -> str:
        path = root / match.group(1)
        language = LANGUAGES.get(path.suffix, "")
        return f"`{match.group(1)}`:\n\n```{language}\n{path.read_text(encoding='utf-8').rstrip()}\n```"

    return INCLUDE.sub(block, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, **kwargs: Any) -> str:
    markdown = include_files(markdown, Path(config.config_file_path).resolve().parent)
    if page.file.src_uri != "options.md":
        return markdown
    from pytest_roofline.plugin.options_doc import fill

    return fill(markdown)
