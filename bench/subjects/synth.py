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


# The Chromium-shaped workspace. Assumptions (no Chromium checkout here; shapes from Chromium's public GN
# files and build stats, rounded): an official Linux build compiles ~40k C++ objects into ~5k libraries
# (source_set and static_library) whose sizes are heavy-tailed (most hold a handful of files, a few
# //content or //chrome/browser directories hold 1,000+); `chrome` links nearly every production object; ~300
# test executables (testonly) link their component's closure plus test sources, and a few (browser_tests,
# unit_tests, components_unittests, …) link nearly everything; a few dozen shared libraries (libEGL,
# libGLESv2, libvk_swiftshader, …) and ~150 small tools link their own subtrees. Libraries are layered
# (base, third_party, components, content, chrome): a library depends on a few libraries of lower layers
# or earlier in its own layer, mostly near it, so that closures grow with the layer.
GROUP_LIBS = 20  # libraries per directory group (e.g. //components/foo/*)
CHROMIUM_LAYERS = (("base", 0.04), ("third_party", 0.26), ("components", 0.35), ("content", 0.17), ("chrome", 0.18))


def _heavy_tailed_sizes(rng: random.Random, total: int, median: float, cap: int) -> list[int]:
    """Library sizes (objects) drawn log-normally around MEDIAN, capped at CAP, until they sum to TOTAL."""
    sizes: list[int] = []
    left = total
    while left > 0:
        n = min(left, cap, max(1, round(rng.lognormvariate(0, 1.3) * median)))
        sizes.append(n)
        left -= n
    return sizes


def chromium(objects: int = 40_000, tests: int = 300, shared_libs: int = 24, tools: int = 174,
             big_tests: int = 6, seed: int = 1) -> Workspace:
    """A Chromium-shaped workspace of about OBJECTS objects and 2 + TESTS + SHARED_LIBS + TOOLS links.

    Products `chrome` (every production library) and `content_shell` (everything but the chrome layer);
    TESTS test executables (BIG_TESTS of them link nearly everything, the rest one library's closure, a
    shared gtest-like support library and their own test sources); SHARED_LIBS shared libraries and TOOLS
    small executables over lower-layer libraries. 80 % of the objects are production code, 20 % tests."""
    rng = random.Random(seed)
    files: dict[str, str] = {".gn": DOT_GN}
    lib_sources: list[tuple[str, ...]] = []
    lib_label: list[str] = []
    lib_layer: list[int] = []
    deps: list[list[int]] = []
    build_files: dict[str, list[str]] = {}
    production = int(objects * 0.8)
    groups: list[tuple[int, int]] = []  # (first, last) library of each directory group
    group_first = 0
    for layer, (name, share) in enumerate(CHROMIUM_LAYERS):
        first = len(lib_sources)
        for size in _heavy_tailed_sizes(rng, int(production * share), median=6.0, cap=1500):
            i = len(lib_sources)
            if i == first or i - group_first >= GROUP_LIBS:
                if i > first:
                    groups.append((group_first, i - 1))
                group_first = i
            d = f"{name}/l{i}"
            srcs = tuple(f"{d}/s{k}.cc" for k in range(size))
            for k, s in enumerate(srcs):
                files[s] = _chain_source(f"l{i}_f", k)
            # Dependencies: a neighbour or two in its own directory group, and, for a group's first library,
            # the top library of two groups of lower layers (plus base): closures grow layer by layer.
            picks: set[int] = set()
            if i > group_first:
                picks.add(i - 1 if rng.random() < 0.8 else rng.randint(group_first, i - 1))
                if rng.random() < 0.3:
                    picks.add(rng.randint(group_first, i - 1))
            else:
                lower_tops = [g[1] for g in groups if lib_layer[g[0]] < layer]
                picks.update(rng.sample(lower_tops, min(2, len(lower_tops))))
                if lower_tops:
                    picks.add(lower_tops[0])
            deps.append(sorted(picks))
            kind = "static_library" if rng.random() < 0.3 else "source_set"
            names = [f"s{k}.cc" for k in range(size)]
            build_files.setdefault(d, []).append(
                f'{kind}("l{i}") {{\n  sources = {_gn_list(names)}\n'
                f'  deps = {_gn_list([lib_label[x] for x in deps[-1]])}\n}}\n')
            lib_sources.append(srcs)
            lib_label.append(f"//{d}:l{i}")
            lib_layer.append(layer)
        groups.append((group_first, len(lib_sources) - 1))
    closures: list[frozenset[int]] = []
    for i, d in enumerate(deps):
        closures.append(frozenset({i}).union(*(closures[x] for x in d)))

    def objs(libs: set[int] | frozenset[int]) -> tuple[str, ...]:
        return tuple(o for x in sorted(libs) for o in lib_sources[x])

    links: list[Link] = []
    all_targets: list[str] = []
    top = set(range(len(lib_sources)))
    no_chrome = {i for i in top if lib_layer[i] < len(CHROMIUM_LAYERS) - 1}
    products = []
    for product, libs in (("chrome", top), ("content_shell", no_chrome)):
        files[f"{product}/main.cc"] = _main_source("l0_f0")
        products.append(f'executable("{product}") {{\n  sources = ["main.cc"]\n'
                        f'  deps = {_gn_list([lib_label[x] for x in sorted(libs)])}\n}}\n')
        files[f"{product}/BUILD.gn"] = products[-1]
        links.append(Link(product, (*objs(libs), f"{product}/main.cc"), False))
        all_targets.append(f"//{product}")
    # Test support (gtest and friends): one testonly library every test links.
    support = tuple(f"testing/gtest/g{k}.cc" for k in range(100))
    for k, s in enumerate(support):
        files[s] = _chain_source("gtest_f", k)
    files["testing/gtest/BUILD.gn"] = (f'static_library("gtest") {{\n  testonly = true\n'
                                       f'  sources = {_gn_list([f"g{k}.cc" for k in range(100)])}\n}}\n')
    test_budget = objects - production - len(support)
    test_sizes = _heavy_tailed_sizes(rng, test_budget, median=10.0, cap=2000)
    test_sizes = (test_sizes + [1] * tests)[:tests]
    for j in range(tests):
        d = f"tests/t{j}"
        srcs = tuple(f"{d}/t{k}.cc" for k in range(test_sizes[j]))
        files[srcs[0]] = _main_source("gtest_f0")
        for k, s in enumerate(srcs[1:], 1):
            files[s] = _chain_source(f"t{j}_f", k)
        libs = top if j < big_tests else closures[rng.randrange(len(lib_sources))]
        under_test = sorted(libs) if j < big_tests else [max(libs)]
        files[f"{d}/BUILD.gn"] = (
            f'executable("t{j}_unittests") {{\n  testonly = true\n'
            f'  sources = {_gn_list([s.rsplit("/", 1)[1] for s in srcs])}\n'
            f'  deps = {_gn_list(["//testing/gtest", *(lib_label[x] for x in under_test)])}\n}}\n')
        links.append(Link(f"t{j}_unittests", (*objs(libs), *support, *srcs), True))
        all_targets.append(f"//{d}:t{j}_unittests")
    low = [i for i in top if lib_layer[i] <= 2]
    for k in range(shared_libs):
        picks = rng.sample(low, 3)
        libs = frozenset().union(*(closures[x] for x in picks))
        files[f"shared/so{k}/entry.cc"] = f"int so{k}_entry(int x) {{ return x; }}\n"
        files[f"shared/so{k}/BUILD.gn"] = (f'shared_library("so{k}") {{\n  sources = ["entry.cc"]\n'
                                           f'  deps = {_gn_list([lib_label[x] for x in sorted(picks)])}\n}}\n')
        links.append(Link(f"libso{k}", (*objs(libs), f"shared/so{k}/entry.cc"), False))
        all_targets.append(f"//shared/so{k}")
    lower = [i for i in top if lib_layer[i] <= 1]
    for k in range(tools):
        libs = closures[rng.choice(lower)]
        files[f"tools/tool{k}/main.cc"] = _main_source("l0_f0")
        files[f"tools/tool{k}/BUILD.gn"] = (
            f'executable("tool{k}") {{\n  sources = ["main.cc"]\n  deps = {_gn_list([lib_label[max(libs)]])}\n}}\n')
        links.append(Link(f"tool{k}", (*objs(libs), f"tools/tool{k}/main.cc"), False))
        all_targets.append(f"//tools/tool{k}")
    for d, blocks in build_files.items():
        files[f"{d}/BUILD.gn"] = "".join(blocks)
    files["BUILD.gn"] = f'group("all") {{\n  testonly = true\n  deps = {_gn_list(all_targets)}\n}}\n'
    return Workspace(f"chromium-{objects // 1000}k", tuple(sorted(files.items())), tuple(links))
