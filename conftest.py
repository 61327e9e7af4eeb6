"""Repository-level conftest: makes `example_suite` importable from the tests and enables pytester."""

pytest_plugins = ["pytester"]
