"""MkDocs hook (mkdocs.yml ``hooks:``): fills the options reference from the plugin's option definitions at build
time, so the published table is always the one the plugin registers; shows the version being built in the site's
name; and publishes the repository's CHANGELOG.md as the changelog page (one file, read on GitHub and on the
site)."""

from __future__ import annotations

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


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if page.file.src_uri != "options.md":
        return markdown
    from pytest_roofline.plugin.options_doc import fill

    return fill(markdown)
