"""The roofline model: machine ceilings, kernel samples, verdicts, and where counted bytes are served.

Plain Python; no pytest, torch or numpy. ``roofline`` holds the model itself, ``placement`` the choice of
the memory level that serves a working set, ``units`` the SI formatting every layer prints with.
"""

from pytest_roofline.model.roofline import (
    BOUND_NONE,
    DEVICES,
    MAIN_MEMORY,
    TENSOR_SUFFIX,
    KernelSample,
    LowerBound,
    Machine,
    MissingCeilingError,
    Verdict,
    arithmetic_intensity,
    combine,
    evaluate,
    evaluate_region,
    lower_bound,
    sum_maps,
)

__all__ = ["BOUND_NONE", "DEVICES", "MAIN_MEMORY", "TENSOR_SUFFIX", "KernelSample", "LowerBound", "Machine",
           "MissingCeilingError", "Verdict", "arithmetic_intensity", "combine", "evaluate", "evaluate_region",
           "lower_bound", "sum_maps"]
