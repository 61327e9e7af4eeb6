"""pytest-roofline: performance-regression tests with the hierarchical Roofline model.

Importing this package stays cheap: no torch, cupy, matplotlib or subprocess here.
"""

from pytest_roofline.fixture_types import DeclaredMeasure, RooflineFixture
from pytest_roofline.model import KernelSample, Machine, Verdict, evaluate, evaluate_region, lower_bound

__version__ = "0.1.0"
__all__ = ["DeclaredMeasure", "KernelSample", "Machine", "RooflineFixture", "Verdict", "__version__", "evaluate",
           "evaluate_region", "lower_bound"]
