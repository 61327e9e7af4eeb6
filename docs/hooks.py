"""MkDocs hook (mkdocs.yml ``hooks:``): fills the options reference from the plugin's option definitions at build
time, so the published table is always the one the plugin registers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def on_config(config: Any, **kwargs: Any) -> Any:
    # Document the checkout being built, not whichever pytest_roofline happens to be installed.
    root = str(Path(config.config_file_path).resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    return config


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if page.file.src_uri != "options.md":
        return markdown
    from pytest_roofline.plugin.options_doc import fill

    return fill(markdown)
