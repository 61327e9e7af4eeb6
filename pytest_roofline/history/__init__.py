"""Session history (docs/history-format.md): one file per ``--roofline`` session, read back by the baseline gate
and the site. Plain Python: no pytest import."""
