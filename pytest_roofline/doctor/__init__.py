"""doctor: see docs/architecture.md."""
