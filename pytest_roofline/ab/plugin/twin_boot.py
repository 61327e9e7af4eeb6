"""Started by the comparing session as ``PYTHON twin_boot.py PACKAGE_DIR CWD_ON_PATH -- PYTEST_ARGS`` in REF's
worktree: runs pytest there with *this* pytest-roofline (the measuring code must be the same on both sides;
only the code under test differs), whatever REF's checkout holds, and REF's own code for everything else.

Run as a file, not ``-m``, so that nothing is imported from the worktree before the plugin is in place.
"""

import importlib.util
import os
import sys


def _load_plugin_package(package_dir: str) -> None:
    init = os.path.join(package_dir, "__init__.py")
    spec = importlib.util.spec_from_file_location("pytest_roofline", init, submodule_search_locations=[package_dir])
    if spec is None or spec.loader is None:
        raise SystemExit(f"pytest-roofline twin: cannot load the plugin from {package_dir}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["pytest_roofline"] = module
    spec.loader.exec_module(module)


def _has_entry_point() -> bool:
    from importlib import metadata

    return any(ep.value.startswith("pytest_roofline") for ep in metadata.entry_points(group="pytest11"))


def run(argv: list[str]) -> int:
    """``PACKAGE_DIR CWD_ON_PATH -- PYTEST_ARGS``: pytest in this process (the cwd is the twin's checkout)."""
    package_dir, cwd_on_path, separator, *args = argv
    if separator != "--":
        raise SystemExit("usage: twin_boot.py PACKAGE_DIR CWD_ON_PATH -- PYTEST_ARGS")
    _load_plugin_package(package_dir)
    if cwd_on_path == "1":  # as the comparing session had it (python -m pytest puts the cwd first)
        sys.path.insert(0, os.getcwd())
    import pytest

    if not _has_entry_point():  # another interpreter (--roofline-compare-python) without the plugin installed
        args = ["-p", "pytest_roofline.plugin", *args]
    return int(pytest.main(args))


def main() -> int:
    sys.path.pop(0)  # this script's folder: not a place to import anything from
    return run(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
