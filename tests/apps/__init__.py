"""Handler modules and helpers for the worker tests (also started in subprocesses)."""
