"""A roofline session's settings and state, plain Python below the gates and the pytest glue.

``settings`` validates the session's options and the marker's arguments, ``state`` keeps what a session knows
(its machine, counter, results directory, the entries of its tests), ``ncu_fallback`` decides what a test whose
ncu profile could not be taken becomes (skipped, failed, or counted by the analytic counter).
"""
