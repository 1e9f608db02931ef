"""jobtui benchmarks: `python benchmarks/run.py` (or `make bench`); see benchmarks/README.md."""
