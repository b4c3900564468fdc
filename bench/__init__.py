"""Benchmarks for gn-thinlto and goma_ext; run one with `python -m bench NAME` (see bench/__main__.py)."""
