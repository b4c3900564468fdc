"""What the benchmarks need from Debian beyond Python: checked, never installed (./dev installs it)."""

from __future__ import annotations

from pathlib import Path

from bench.measure import BenchError

# Debian package -> a path it provides. Each is also in ./dev's package list (tests/unit/test_dev_packages.py).
PACKAGES = {"time": Path("/usr/bin/time"), "googletest": Path("/usr/src/googletest/googletest/src/gtest-all.cc"),
            "libgtest-dev": Path("/usr/include/gtest/gtest.h"),
            "cmake": Path("/usr/bin/cmake"), "zlib1g-dev": Path("/usr/include/zlib.h"),
            "clang-22": Path("/usr/bin/clang-22"), "lld-22": Path("/usr/bin/ld.lld-22"),
            "bubblewrap": Path("/usr/bin/bwrap"),  # the cluster's workers sandbox every action
            # `bench grpc-calls`' compiled client (bench/grpc_echo_client.cc)
            "libgrpc++-dev": Path("/usr/include/grpcpp/grpcpp.h"), "pkg-config": Path("/usr/bin/pkg-config")}


def ensure() -> None:
    """Fail with one line naming ./dev as the fix when a package the benchmarks use is missing."""
    missing = sorted(p for p, path in PACKAGES.items() if not path.exists())
    if missing:
        raise BenchError(f"missing Debian packages {', '.join(missing)}: run ./dev setup, which installs every "
                         "package the example, the tests and the benchmarks need")
