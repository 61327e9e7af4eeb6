"""Measuring tests: time a callable bare, count its work, probe the roofs live, judge each region.

``settings`` validates the session's options and the marker's arguments, ``state`` keeps what a session
knows, ``regions`` records and judges measured regions, ``timing`` and ``probes`` take the clock readings.
"""
