"""Synthetic GN workspaces (pure: a plan of files, written by the caller).

`grid(M, N)`: one source_set of N objects and M test-only executables that each link all of them (the shape
of Chromium's unit tests). `mix()`: a Chromium-like mix of components (static libraries depending on earlier
ones), per-component unit tests, a few tools and two large products linking everything.
Every workspace uses the example's toolchain (//build is copied from examples/chromium_style).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    """One link target and the objects (as source paths) it links, for the naive baseline."""

    name: str
    objects: tuple[str, ...]
    testonly: bool


@dataclass(frozen=True)
class Workspace:
    name: str
    files: tuple[tuple[str, str], ...]  # (path relative to the root, text), sorted
    links: tuple[Link, ...]

    @property
    def objects(self) -> int:
        return len({o for link in self.links for o in link.objects})


DOT_GN = 'buildconfig = "//build/config/BUILDCONFIG.gn"\nscript_executable = "python3"\n'


def _chain_source(prefix: str, i: int) -> str:
    """f{i} calls f{i-1}: every object imports from its neighbour, as real code imports small helpers."""
    if i == 0:
        return f"int {prefix}0(int x) {{ return x + 1; }}\n"
    return f"int {prefix}{i - 1}(int x);\nint {prefix}{i}(int x) {{ return x > 0 ? {prefix}{i - 1}(x - 1) + {i} : {i}; }}\n"


def _main_source(callee: str) -> str:
    return f"int {callee}(int x);\nint main(int argc, char** argv) {{ return {callee}(argc) < 0; }}\n"


def _gn_list(items: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def grid(m: int, n: int) -> Workspace:
    """M test-only executables, each linking all N objects of //lib:objs plus its own main."""
    files: dict[str, str] = {".gn": DOT_GN}
    lib = [f"o{i}.cc" for i in range(n)]
    for i in range(n):
        files[f"lib/o{i}.cc"] = _chain_source("f", i)
    files["lib/BUILD.gn"] = f'source_set("objs") {{\n  testonly = true\n  sources = {_gn_list(lib)}\n}}\n'
    tests = []
    for j in range(m):
        files[f"tests/t{j}.cc"] = _main_source(f"f{n - 1}")
        tests.append(f'executable("t{j}") {{\n  testonly = true\n  sources = ["t{j}.cc"]\n  deps = ["//lib:objs"]\n}}\n')
    files["tests/BUILD.gn"] = "".join(tests)
    files["BUILD.gn"] = f'group("all") {{\n  testonly = true\n  deps = {_gn_list([f"//tests:t{j}" for j in range(m)])}\n}}\n'
    links = tuple(Link(f"t{j}", tuple(f"lib/o{i}.cc" for i in range(n)) + (f"tests/t{j}.cc",), True) for j in range(m))
    return Workspace(f"grid-{m}x{n}", tuple(sorted(files.items())), links)


def mix(components: int = 20, per_component: int = 40, tests_per_component: int = 8, tools: int = 6,
        seed: int = 1) -> Workspace:
    """A Chromium-like mix; sizes are parameters so the test suite can build a tiny one."""
    rng = random.Random(seed)
    files: dict[str, str] = {".gn": DOT_GN}
    deps: list[list[int]] = []
    sources: list[tuple[str, ...]] = []
    all_targets: list[str] = []
    for c in range(components):
        d = sorted(rng.sample(range(c), min(c, rng.randint(1, 3)))) if c else []
        deps.append(d)
        srcs = [f"c{c}_{i}.cc" for i in range(per_component)]
        sources.append(tuple(f"components/c{c}/{s}" for s in srcs))
        for i in range(per_component):
            files[f"components/c{c}/c{c}_{i}.cc"] = _chain_source(f"c{c}_f", i)
        tsrcs = [f"c{c}_test{i}.cc" for i in range(tests_per_component)]
        for i in range(tests_per_component):
            files[f"components/c{c}/c{c}_test{i}.cc"] = (
                _main_source(f"c{c}_f{per_component - 1}") if i == 0 else f"int c{c}_test{i}(int x) {{ return x * {i + 2}; }}\n")
        files[f"components/c{c}/BUILD.gn"] = (
            f'static_library("c{c}") {{\n  sources = {_gn_list(srcs)}\n  deps = {_gn_list([f"//components/c{x}" for x in d])}\n}}\n'
            f'executable("c{c}_unittests") {{\n  testonly = true\n  sources = {_gn_list(tsrcs)}\n  deps = [":c{c}"]\n}}\n')
        all_targets.append(f"//components/c{c}:c{c}_unittests")

    def closure(c: int) -> list[int]:
        seen: set[int] = set()
        todo = [c]
        while todo:
            x = todo.pop()
            if x not in seen:
                seen.add(x)
                todo.extend(deps[x])
        return sorted(seen)

    links: list[Link] = []
    for c in range(components):
        objs = tuple(o for x in closure(c) for o in sources[x])
        tests = tuple(f"components/c{c}/c{c}_test{i}.cc" for i in range(tests_per_component))
        links.append(Link(f"c{c}_unittests", objs + tests, True))
    apps = []
    for k in range(tools):
        picks = sorted(rng.sample(range(components), min(components, rng.randint(1, 3))))
        files[f"tools/tool{k}.cc"] = _main_source(f"c{picks[-1]}_f{per_component - 1}")
        apps.append(f'executable("tool{k}") {{\n  sources = ["tool{k}.cc"]\n  deps = {_gn_list([f"//components/c{x}" for x in picks])}\n}}\n')
        objs = tuple(sorted({o for p in picks for x in closure(p) for o in sources[x]}))
        links.append(Link(f"tool{k}", objs + (f"tools/tool{k}.cc",), False))
        all_targets.append(f"//tools:tool{k}")
    every = _gn_list([f"//components/c{x}" for x in range(components)])
    for product in ("chrome", "content_shell"):
        files[f"tools/{product}.cc"] = _main_source(f"c{components - 1}_f{per_component - 1}")
        apps.append(f'executable("{product}") {{\n  sources = ["{product}.cc"]\n  deps = {every}\n}}\n')
        links.append(Link(product, tuple(o for s in sources for o in s) + (f"tools/{product}.cc",), False))
        all_targets.append(f"//tools:{product}")
    files["tools/BUILD.gn"] = "".join(apps)
    files["BUILD.gn"] = f'group("all") {{\n  testonly = true\n  deps = {_gn_list(all_targets)}\n}}\n'
    return Workspace(f"mix-{components}x{per_component}", tuple(sorted(files.items())), tuple(links))
