"""Stop a run whose rootdir a ``--roofline-* VALUE`` path moved.

pytest picks its rootdir (which every node id is relative to) before it loads entry-point plugins, so at that
moment it does not know that ``--roofline-baseline`` takes a value: in ``pytest --roofline-baseline /elsewhere``
it takes ``/elsewhere`` for a test path, and the rootdir becomes a common ancestor such as ``/``. Every node id
then differs from the history's and the baseline gate compares nothing. Once the plugin's options are known the
value is no longer a test path; if the rootdir found without it differs, the run stops with a usage error that
shows the ``--option=VALUE`` form, which pytest never mistakes for a path.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest


def spaced_values(args: list[str], options: set[str]) -> list[tuple[str, str]]:
    """``(option, value)`` for each of ``options`` given as two arguments (``--opt VALUE``, not ``--opt=VALUE``)."""
    found = []
    for i, arg in enumerate(args[:-1]):
        if arg in options and not args[i + 1].startswith("-"):
            found.append((arg, args[i + 1]))
    return found


def rootdir_without(early_config: pytest.Config) -> Path | None:
    """The rootdir pytest would pick from the test paths left once the plugin's options took their values; None
    when pytest's (private) setup function cannot be called as this version expects."""
    try:
        from _pytest.config.findpaths import determine_setup
    except ImportError:
        return None
    ns = early_config.known_args_namespace
    # typed loosely: the keywords of a private pytest function whose parameters differ between its versions
    given: dict[str, Any] = {"inifile": getattr(ns, "inifilename", None),
             "override_ini": getattr(ns, "override_ini", None),
             "args": [str(a) for a in getattr(ns, "file_or_dir", None) or []],
             "rootdir_cmd_arg": getattr(ns, "rootdir", None) or None,
             "invocation_dir": early_config.invocation_params.dir, "config": early_config}
    try:
        wanted = inspect.signature(determine_setup).parameters
        result = determine_setup(**{k: v for k, v in given.items() if k in wanted})
    except Exception:  # noqa: BLE001 - a private function of another version: skip the check rather than fail
        return None
    return Path(result[0])


def check_rootdir(early_config: pytest.Config, args: list[str]) -> None:
    from pytest_roofline.plugin.options import value_options

    spaced = spaced_values(list(args), value_options())
    if not spaced:
        return
    expected = rootdir_without(early_config)
    if expected is None or expected == early_config.rootpath:
        return
    shown = " ".join(f"{option}={value}" for option, value in spaced)
    raise pytest.UsageError(
        f"{' '.join(f'{o} {v}' for o, v in spaced)}: pytest took the value for a test path before it knew this "
        f"option, and moved the rootdir to {early_config.rootpath} (it is {expected} without it), which changes "
        f"every node id. Write it with '=': {shown}")
