"""Benchmarks: `python -m benchmarks [NAME ...]` runs every `bench_*.py` module's `main()` in name order."""
