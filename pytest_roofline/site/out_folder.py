"""The site's output folder: files written into it, the bundled assets copied there, and ``--out`` checked and
replaced whole. A site is written into a fresh folder beside ``--out`` and moved into place only when every page
is written, so that a failed build leaves the old site whole; these steps are kept apart from the pages they hold.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from pytest_roofline._atomic import current_umask
from pytest_roofline.errors import SiteError, SiteOutputError

from . import pages

ASSETS = ("site.css", "site.js")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # JSON may carry a lone surrogate ("\ud800"), which UTF-8 cannot hold: written as its escape
    path.write_text(text, encoding="utf-8", errors="backslashreplace")


def copy_assets(out: Path) -> None:
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise SiteError("the site needs plotly and ruptures: pip install 'pytest-roofline[site]'") from None
    if pages.PLOTLY.get() == pages.PLOTLY_JS:  # else the pages load it from where --plotly-js says
        write(out / pages.PLOTLY_JS, get_plotlyjs())
    for name in ASSETS:
        write(out / name, (resources.files(__package__) / "assets" / name).read_text(encoding="utf-8"))


def check_out(out: Path, history: Path) -> None:
    """A bad ``--out`` is refused before anything is written: a file, a folder that holds no site (the site
    replaces it whole), the history itself or a folder holding it."""
    if out.is_symlink():
        return  # the link itself is replaced, never written through
    if out.exists() and not out.is_dir():
        raise SiteOutputError(f"--out {str(out)!r} is a file, not a folder")
    if history.resolve().is_relative_to(out.resolve()):
        raise SiteOutputError(f"--out {str(out)!r} holds the history {str(history)!r}; the site replaces its folder")
    if out.is_dir() and any(out.iterdir()) and not (out / "index.html").is_file():
        raise SiteOutputError(f"--out {str(out)!r} is a folder that holds no site (no index.html); the site "
                              "replaces its folder whole: name a new or empty one")


@contextlib.contextmanager
def staged(out: Path, history: Path) -> Iterator[Path]:
    """A fresh folder beside ``out`` to write the site into, moved into place when every page is written: a
    failed build (a full disk) leaves the old site whole, and no write can follow a symlink planted in
    ``out``. Any OSError is a :class:`SiteOutputError` naming ``out``."""
    check_out(out, history)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    except OSError as exc:
        raise SiteOutputError(f"cannot write the site to {str(out)!r}: {exc.strerror or exc}") from None
    try:
        yield work
        os.chmod(work, 0o777 & ~current_umask())  # mkdtemp makes it 0700; a site is for others to read
        _replace(work, out)
    except OSError as exc:
        raise SiteOutputError(f"cannot write the site to {str(out)!r}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)  # gone already when it was moved into place


def _replace(work: Path, out: Path) -> None:
    """``work`` becomes ``out``; the old ``out`` (a site, or a symlink: the link, not its target) is removed."""
    if not (out.exists() or out.is_symlink()):
        os.rename(work, out)
        return
    old = out.parent / f".{out.name}.old-{os.getpid()}-{os.urandom(3).hex()}"
    os.rename(out, old)
    try:
        os.rename(work, out)
    except OSError:
        os.rename(old, out)
        raise
    if old.is_symlink():
        old.unlink()
    else:
        shutil.rmtree(old, ignore_errors=True)
