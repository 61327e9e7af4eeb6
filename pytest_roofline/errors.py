"""Warning category of the plugin, so users can filter it (``-W ignore::pytest_roofline.errors.RooflineWarning``)."""

import pytest


class RooflineWarning(pytest.PytestWarning):
    """Something about a roofline measurement deserves attention but does not fail the test."""
