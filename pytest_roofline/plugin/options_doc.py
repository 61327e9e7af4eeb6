"""The options reference (docs/options.md) rendered from the option definitions themselves, so it cannot drift.

:func:`registered_options` replays :func:`~pytest_roofline.plugin.options.add_options` against a recorder that
stands in for pytest's parser, so the table holds exactly what the plugin registers: the ``_OPTIONS`` tuples and
the flags ``add_options`` adds by hand. The docs site's build hook (``docs/hooks.py``) puts
:func:`options_markdown` between the markers of ``docs/options.md``; ``python -m
pytest_roofline.plugin.options_doc --write docs/options.md`` refreshes the copy GitHub shows.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from pytest_roofline.plugin.options import add_options

BEGIN = "<!-- BEGIN generated options table (python -m pytest_roofline.plugin.options_doc --write docs/options.md) -->"
END = "<!-- END generated options table -->"
_INI_SUFFIX = re.compile(r"\s*\(ini: [^)]*\)\s*$")


@dataclass(frozen=True)
class OptionDoc:
    flag: str
    ini: str | None
    ini_type: str | None
    default: str
    help: str
    is_flag: bool = False


class _Recorder:
    """Records ``getgroup``/``addoption``/``addini`` calls the way pytest's parser receives them."""

    def __init__(self) -> None:
        self.options: list[tuple[tuple[str, ...], dict[str, object]]] = []
        self.inis: dict[str, tuple[str, str | None, object]] = {}

    def getgroup(self, *args: object, **kwargs: object) -> _Recorder:
        return self

    def addoption(self, *opts: str, **attrs: object) -> None:
        self.options.append((opts, attrs))

    def addini(self, name: str, help: str, type: str | None = None, default: object = None) -> None:
        self.inis[name] = (help, type, default)


def registered_options() -> list[OptionDoc]:
    """Every command-line option the plugin registers, in registration order, with its ini key and default."""
    recorder = _Recorder()
    add_options(recorder)  # type: ignore[arg-type]
    docs = []
    for opts, attrs in recorder.options:
        dest = attrs.get("dest")
        ini = dest if isinstance(dest, str) and dest in recorder.inis else None  # every dest is a str
        ini_help, ini_type, ini_default = recorder.inis[ini] if ini else ("", None, None)
        help_text = ini_help if ini and not attrs.get("action") else _INI_SUFFIX.sub("", str(attrs.get("help", "")))
        if attrs.get("action") == "store_true":
            default = "on" if (ini_default if ini else attrs.get("default")) else "off"
        else:
            default = str(ini_default) if ini_default not in (None, "") else "–"
        docs.append(OptionDoc(opts[0], ini, ini_type, default, help_text, attrs.get("action") == "store_true"))
    return docs


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def options_markdown() -> str:
    """The options table as Markdown (one row per option: option, ini key, default, meaning)."""
    rows = ["| option | ini | default | meaning |", "|---|---|---|---|"]
    for option in registered_options():
        ini = f"`{option.ini}`" + (f" ({option.ini_type})" if option.ini_type else "") if option.ini else "–"
        default = option.default if option.is_flag or option.default == "–" else f"`{option.default}`"
        rows.append(f"| `{option.flag}` | {ini} | {default} | {_cell(option.help)} |")
    return "\n".join(rows) + "\n"


def fill(page: str) -> str:
    """``page`` with the text between its markers replaced by the current table."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the options page has no {BEGIN!r} ... {END!r} markers")
    return page[:start + len(BEGIN)] + "\n\n" + options_markdown() + "\n" + page[end:]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--write"] and len(args) == 2:
        path = Path(args[1])
        path.write_text(fill(path.read_text()))
        return 0
    if args:
        print("usage: python -m pytest_roofline.plugin.options_doc [--write docs/options.md]", file=sys.stderr)
        return 2
    sys.stdout.write(options_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
