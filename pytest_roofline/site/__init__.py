"""The static roofline history site: ``python -m pytest_roofline report HISTORY_DIR``.

Plain Python (no pytest): ``history_reader`` reads the history files of docs/history-format.md,
``verdicts`` and ``changepoints`` hold the statistics, ``charts`` builds plotly figures and SVG sparklines,
``pages`` writes the HTML and ``build`` ties them together. plotly and ruptures come with the ``site`` extra.
"""
