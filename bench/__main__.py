"""`python -m bench NAME [ARGS…]`: run one benchmark; each prints its own table and the machine it ran on."""

from __future__ import annotations

import importlib
import sys

# benchmark name -> module with a `main(argv) -> int`
BENCHMARKS = {
    "index": "bench.index_bench",
    "scale": "bench.scale_bench",
    "builds": "bench.builds_bench",
    "sharing": "bench.sharing_bench",
    "remote": "bench.remote_bench",
    "cache": "bench.cache_bench",
    "dtlto": "bench.dtlto_bench",
    "scale-model": "bench.scale_model",
    "proxy": "bench.proxy_bench",
    "isolation": "bench.isolation_bench",
    "regen": "bench.regen_bench",
    "parity": "bench.parity_matrix",
    "hermetic": "bench.hermetic_bench",
    "step": "bench.step_bench",
    "scheduling": "bench.scheduling_bench",
    "all": "bench.all_bench",
    "report": "bench.report",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in BENCHMARKS:
        print(f"usage: python -m bench {{{','.join(sorted(BENCHMARKS))}}} [ARGS…]", file=sys.stderr)
        return 2
    from bench.measure import BenchError

    try:
        return int(importlib.import_module(BENCHMARKS[argv[0]]).main(argv[1:]))
    except BenchError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
