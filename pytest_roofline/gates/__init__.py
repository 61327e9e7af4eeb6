"""gates: see docs/architecture.md."""
