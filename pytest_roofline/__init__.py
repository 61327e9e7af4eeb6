"""pytest-roofline: performance-regression tests with the hierarchical Roofline model.

Importing this package stays cheap: no torch, cupy, matplotlib or subprocess here.
"""

from pytest_roofline._version import __version__
from pytest_roofline.fixture_types import DeclaredMeasure, RooflineFixture
from pytest_roofline.model import KernelSample, Machine, Verdict, evaluate, evaluate_region, lower_bound

__all__ = ["DeclaredMeasure", "KernelSample", "Machine", "RooflineFixture", "Verdict", "__version__", "evaluate",
           "evaluate_region", "lower_bound"]
