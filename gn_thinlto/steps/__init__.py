"""Build-time steps ninja runs: thin link, backend, backend cache and their file and ninja-syntax helpers.

Each step runs as `python -S path/to/step.py`: they import only the standard library, each other and
gn_thinlto.errors (an import-linter contract; tests/unit/test_layout.py checks the loaded modules too).
"""
