"""The records every layer reads: a test's record, a session's history document, the one Session every reader
loads, and the validator that is their loader for anything read back (docs/history-format.md)."""
