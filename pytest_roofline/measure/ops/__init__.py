"""Per-op times of a measured call: the torch profiler's events (``kineto``), joined to the ops the counter saw
(``join``), each op's share of the time and its own roof (``times``, ``profile``), and why an op has none
(``diagnostics``)."""
