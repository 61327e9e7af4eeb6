"""Measuring tests: time a callable bare, count its work, probe the roofs live, judge each region.

``regions`` records and judges measured regions (the Recorder), ``timing`` and ``probes`` take the clock
readings, ``ops`` times a call op by op. A session's settings and state live in :mod:`pytest_roofline.session`.
"""
