"""How many cases each randomized test tries: a share of the full count by default (CI and every `./dev test`),
the full count with `pytest --full` (`./dev test --full`). The seeds stay fixed either way, so each run is
reproducible; the hand-written loops draw the full run's first cases.

Hypothesis tests and the hand-written fuzz loops take their count through `cases(n)` (in @settings(max_examples=…)
for the former); tests without @settings follow the Hypothesis profile loaded in tests/conftest.py."""

from __future__ import annotations

import os

FULL_ENV = "GN_THINLTO_TESTS_FULL"  # set to 1 by `--full` (tests/conftest.py), for this process and the workers
SHARE = 5  # the default run tries one case in SHARE of the full count
FLOOR = 20  # and never fewer than this


def full() -> bool:
    return os.environ.get(FULL_ENV) == "1"


def share(full_count: int) -> int:
    """The default run's count: FULL_COUNT's SHARE-th part, at least FLOOR (or FULL_COUNT when that is lower)."""
    return min(full_count, max(FLOOR, full_count // SHARE))


def cases(full_count: int) -> int:
    """FULL_COUNT with --full, else share(FULL_COUNT)."""
    return full_count if full() else share(full_count)
