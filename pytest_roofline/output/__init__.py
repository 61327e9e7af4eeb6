"""What a session leaves for people: failure messages and summary text, charts, ``results.json`` and the
results directory.
"""
