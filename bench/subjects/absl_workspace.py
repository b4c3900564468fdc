"""Abseil (Chromium's C++ base library) as a GN workspace in the cache: a real project of 400+ TUs with tests.

The sources are Debian's abseil source package (the orig tarball of trixie's 20240722.0, pinned by sha256,
fetched once from the Debian mirror this machine's apt uses). Abseil ships no GN files, so this module writes them
from abseil's own CMakeLists.txt files: every `absl_cc_library` becomes a source_set, every `absl_cc_test` a test source_set,
and the tests are linked into one gtest binary per top directory of absl/ (absl_strings_tests, ...), the
way Chromium links abseil's tests into a few binaries rather than CMake's one per test. Tests with their
own main() stay binaries of their own. Benchmarks (Google Benchmark, not packaged here) are left out.
GoogleTest and GoogleMock are Debian's googletest sources (/usr/src/googletest), as for the ninja subject.
//build is the example's toolchain and configs.
"""

from __future__ import annotations

import re
import shutil
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from bench.fsio import EXAMPLE, copy_tree, write_if_changed
from bench.measure import BenchError
from bench.subjects import sdists
from bench.subjects.ninja_workspace import sync

VERSION = "20240722.0"
TARBALL = f"abseil_{VERSION}.orig.tar.gz"
POOL_PATH = f"pool/main/a/abseil/{TARBALL}"  # below the Debian archive of the machine's apt sources
SHA256 = "df6d1f5ef540725f3851201176a60486aab332410788465c9877910bb471c34a"
GOOGLETEST = Path("/usr/src/googletest")
# RTTI is on for the whole subject (see _block). Abseil is not -Wall -Wextra -Werror clean with clang 19.
# No CFI, as for ninja's sources (googletest's fixtures and abseil's type-erased callables cast function
# pointers in ways cfi-icall traps on).
GN_ARGS = "treat_warnings_as_errors=false is_cfi=false"
# CMake variables with flags that matter for code generation (the others are warnings and MSVC options).
COPTS_VARIABLES = {"ABSL_RANDOM_RANDEN_COPTS": ("-maes", "-msse4.1")}
MAINS = {"GTest::gmock_main", "GTest::gtest_main"}
GTEST_TARGETS = {"GTest::gmock": ":gmock", "GTest::gtest": ":gtest"}  # MAINS: see _deps
# Tests linked alone although they use a gtest main (tests whose suite names gtest would reject in one binary
# are found by _shared_suites):
# - absl/flags's tests define the same flags and share the process's flag registry;
# - the LOG/ABSL_LOG and CHECK/ABSL_CHECK tests include the same test bodies (*_test_impl.inc: duplicate symbols);
# - log_globals_test checks the VLOG level other log tests change; hash_policy_testing_test counts the hashers the
#   process made.
ALONE_DIRECTORIES = {"absl/flags", "absl/flags/internal"}
ALONE_TESTS = frozenset({"log_basic_test", "absl_log_basic_test", "check_test", "absl_check_test",
                         "log_globals_test", "hash_policy_testing_test"})
# Not built: symbolize_test expects symbols for inlined and folded functions, which the official-build link
# (ThinLTO -O2, --icf=all) removes; it fails the same way in lld's in-process ThinLTO build.
EXCLUDED_TESTS = frozenset({"symbolize_test"})
_TEST = re.compile(r"^\s*((?:TYPED_)?TEST(?:_F|_P)?)\(\s*(\w+)\s*,\s*(\w+)", re.M)
_CALL = re.compile(r"^(absl_cc_library|absl_cc_test)\((.*?)^\)", re.S | re.M)
_KEYS = {"NAME", "HDRS", "SRCS", "COPTS", "DEFINES", "DEPS", "LINKOPTS", "LINK_OPTS", "TESTONLY", "PUBLIC",
         "DISABLE_INSTALL", "ALWAYSLINK"}


@dataclass
class Target:
    kind: str  # absl_cc_library | absl_cc_test
    directory: str  # relative to the workspace root: absl/strings
    fields: dict[str, list[str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.fields["NAME"][0]

    def sources(self) -> list[str]:
        return [f"{self.directory}/{s}" for s in self.fields.get("SRCS", []) + self.fields.get("HDRS", [])]

    def cflags(self) -> list[str]:
        out: list[str] = []
        for token in self.fields.get("COPTS", []):
            var = re.fullmatch(r"\$\{(\w+)\}", token)
            if var:
                out += COPTS_VARIABLES.get(var.group(1), ())
            elif token.startswith("-D"):
                out.append(token)
        return out

    def deps(self) -> list[str]:
        return [d for d in self.fields.get("DEPS", []) if d.startswith(("absl::", "GTest::"))]

    def wanted(self) -> bool:
        """False for benchmarks: they need Google Benchmark."""
        return not any(d.startswith("benchmark::") for d in self.fields.get("DEPS", [])) and \
            not any("benchmark" in s for s in self.fields.get("SRCS", []))


def parse(directory: str, text: str) -> list[Target]:
    """The absl_cc_library/absl_cc_test calls of one CMakeLists.txt (DIRECTORY: where it is)."""
    targets = []
    for kind, body in _CALL.findall(text):
        t = Target(kind, directory)
        key = ""
        for token in re.sub(r"#[^\n]*", "", body).split():
            token = token.strip('"')
            if token in _KEYS:
                key = token
                t.fields.setdefault(key, [])
            elif key and "$<" not in token:
                t.fields[key].append(token)
        if "NAME" not in t.fields:
            raise BenchError(f"{directory}/CMakeLists.txt: an {kind} call without NAME")
        targets.append(t)
    return targets


def _list(name: str, items: list[str]) -> str:
    if not items:
        return ""
    body = "".join(f'    "{i}",\n' for i in items)
    return f"  {name} = [\n{body}  ]\n"


def _deps(t: Target) -> list[str]:
    """GN deps; a test linked with a gtest main gets its gmock here (the binary's main comes once, per binary)."""
    return sorted({f":absl_{d.removeprefix('absl::')}" if d.startswith("absl::") else
                   GTEST_TARGETS["GTest::gmock" if d in MAINS else d] for d in t.deps()})


def _block(kind: str, name: str, body: str) -> str:
    """A target built with RTTI, as abseil's own build does: some tests use typeid, and absl/flags decides
    type identity by RTTI in inline code, so every TU of the subject must agree."""
    return f'{kind}("{name}") {{\n  configs -= [ "//build/config/compiler:no_rtti" ]\n{body}}}\n\n'


def _tests(t: Target, root: Path) -> set[tuple[str, str, str]]:
    """(macro, suite, test) of every gtest test T's sources define."""
    return {m for s in t.fields.get("SRCS", []) if s.endswith(".cc")
            for m in _TEST.findall((root / t.directory / s).read_text(errors="replace"))}


def _shared_suites(targets: list[Target], root: Path) -> set[str]:
    """Names of tests that share a test suite with another test of their directory (binary) in a way gtest
    rejects: a fixture (any macro but TEST) or a test name both define."""
    seen: dict[tuple[str, str], dict[str, set[tuple[str, str]]]] = defaultdict(lambda: defaultdict(set))
    for t in targets:
        if t.kind == "absl_cc_test" and t.wanted():
            for macro, suite, test in _tests(t, root):
                seen[(t.directory.split("/")[1], suite)][t.name].add((macro, test))
    clash = set()
    for users in seen.values():
        if len(users) > 1:
            defined = [x for tests in users.values() for x in tests]
            if any(m != "TEST" for m, _ in defined) or len({n for _, n in defined}) < len(defined):
                clash |= set(users)
    return clash


def render(targets: list[Target], root: Path, alone_tests: frozenset[str] = ALONE_TESTS,
           excluded: frozenset[str] = EXCLUDED_TESTS) -> tuple[str, list[str]]:
    """The root BUILD.gn for TARGETS (sources under ROOT) and the test binaries it links (output names);
    ALONE_TESTS are linked alone, EXCLUDED not built (BenchError if one of them is not in TARGETS)."""
    out = [HEADER]
    groups: dict[str, list[str]] = defaultdict(list)
    binaries = []
    unknown = (alone_tests | excluded) - {t.name for t in targets}
    if unknown:
        raise BenchError(f"bench/subjects/absl_workspace.py: no abseil test named {', '.join(sorted(unknown))}")
    alone = alone_tests | _shared_suites(targets, root)
    for t in targets:
        if not t.wanted() or t.name in excluded:
            continue
        testonly = t.kind == "absl_cc_test" or "TESTONLY" in t.fields
        body = ("  testonly = true\n" if testonly else "") + _list("sources", t.sources()) + \
            _list("cflags", t.cflags()) + _list("defines", t.fields.get("DEFINES", []))
        if t.kind == "absl_cc_library":
            out.append(_block("source_set", f"absl_{t.name}",
                              body + _list("deps", _deps(t)) + "  public_configs = [ \":absl_public\" ]\n"))
        elif (has_main := bool(MAINS & set(t.deps()))) and t.directory not in ALONE_DIRECTORIES and \
                t.name not in alone:
            out.append(_block("source_set", f"absl_{t.name}_test", body + _list("deps", _deps(t))))
            groups[t.directory.split("/")[1]].append(f":absl_{t.name}_test")
        else:  # a test with its own main(), or one that cannot share a binary
            main = [":gmock_main"] if has_main else []
            out.append(_block("executable", f"absl_{t.name}", body + _list("deps", main + _deps(t))))
            binaries.append(f"absl_{t.name}")
    for top, members in sorted(groups.items()):
        out.append(_block("executable", f"absl_{top}_tests",
                          "  testonly = true\n" + _list("deps", [*members, ":gmock_main"])))
        binaries.append(f"absl_{top}_tests")
    out.append('group("all_tests") {\n  testonly = true\n' + _list("deps", [f":{b}" for b in binaries]) + "}\n\n")
    return "".join(out) + GTEST_GN, sorted(binaries)


HEADER = """# Generated by bench/subjects/absl_workspace.py from abseil's CMakeLists.txt files: do not edit.

config("absl_public") {
  include_dirs = [ "//" ]
}

"""
_GTEST = "third_party/googletest"
# (name, source, more lines) of the googletest targets
_GTEST_TARGETS = (
    ("gtest", f"{_GTEST}/googletest/src/gtest-all.cc",
     _list("include_dirs", [f"{_GTEST}/googletest"]) + _list("public_configs", [":gtest_public"])),
    ("gmock", f"{_GTEST}/googlemock/src/gmock-all.cc",
     _list("include_dirs", [f"{_GTEST}/googlemock"]) + _list("public_deps", [":gtest"])),
    ("gmock_main", f"{_GTEST}/googlemock/src/gmock_main.cc", _list("public_deps", [":gmock"])),
)
GTEST_GN = 'config("gtest_public") {\n' + \
    _list("include_dirs", [f"{_GTEST}/googletest/include", f"{_GTEST}/googlemock/include"]) + "}\n\n" + \
    "".join(_block("source_set", name, "  testonly = true\n" + _list("sources", [source]) + more)
            for name, source, more in _GTEST_TARGETS)
DOT_GN = """# GN root of the abseil benchmark subject (written by bench/subjects/absl_workspace.py).
buildconfig = "//build/config/BUILDCONFIG.gn"

# exec_script and --json-ide-script programs run with this (GN's default, `python`, is absent on Debian 12).
script_executable = "python3"
"""


def fetch(cache: Path) -> Path:
    """CACHE/abseil-VERSION (downloaded from Debian and checked once)."""
    top = cache / f"abseil-{VERSION}"
    if (top / "absl" / "CMakeLists.txt").is_file():
        return top
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / TARBALL
    if not tarball.is_file():
        url = f"{sdists.debian_mirror()}/{POOL_PATH}"
        with urllib.request.urlopen(url, timeout=120) as r, open(f"{tarball}.tmp", "wb") as f:
            shutil.copyfileobj(r, f)
        Path(f"{tarball}.tmp").replace(tarball)
    sdists.unpack(tarball, SHA256, f"abseil-{VERSION}", top)
    return top


def targets_of(src: Path) -> list[Target]:
    return [t for path in sorted((src / "absl").rglob("CMakeLists.txt"))
            for t in parse(path.parent.relative_to(src).as_posix(), path.read_text())]


def prepare(cache: Path) -> Path:
    """Return the workspace root, (re)created from pristine sources: edits of earlier runs are undone."""
    if not (GOOGLETEST / "googlemock" / "src" / "gmock-all.cc").is_file():
        raise BenchError(f"{GOOGLETEST}: missing (Debian googletest); run ./dev setup")
    src = fetch(cache)
    root = cache / f"abseil-{VERSION}-gn"
    sync(src / "absl", root / "absl")
    for part in ("googletest", "googlemock"):
        for sub in ("include", "src"):
            sync(GOOGLETEST / part / sub, root / "third_party/googletest" / part / sub)
    copy_tree(EXAMPLE / "build", root / "build")
    write_if_changed(root / ".gn", DOT_GN)
    write_if_changed(root / "BUILD.gn", render(targets_of(src), src)[0])
    return root

