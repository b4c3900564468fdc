"""`python -m bench NAME [ARGS…]`: run one benchmark; each prints its own table and the machine it ran on."""

from __future__ import annotations

import importlib
import sys

from bench.registry import BENCHMARKS


def main(argv: list[str]) -> int:
    names = {b.name: b for b in BENCHMARKS}
    if not argv or argv[0] not in names:
        print(f"usage: python -m bench {{{','.join(sorted(names))}}} [ARGS…]", file=sys.stderr)
        return 2
    from bench.measure import BenchError

    try:
        return int(importlib.import_module(names[argv[0]].module).main(argv[1:]))
    except BenchError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
