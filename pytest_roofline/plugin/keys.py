"""What every plugin module may need and none should import a mode for: the stash keys of a session and its
tests, and which kind of process this is (REF's twin)."""

from __future__ import annotations

import os

import pytest

from pytest_roofline.session.state import RooflineState, TestEntry

STATE = pytest.StashKey[RooflineState]()
ENTRY = pytest.StashKey[TestEntry]()
TEARDOWN_ERROR = pytest.StashKey[str]()  # set in the call phase, raised in teardown: an error, not a failure

FD_VARIABLE = "PYTEST_ROOFLINE_TWIN_FD"  # ab.twin.FD_VARIABLE, without importing it at plugin import


def is_twin() -> bool:
    """This process is REF's twin of an A/B session (``--roofline-compare``)."""
    return FD_VARIABLE in os.environ
