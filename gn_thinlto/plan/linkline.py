"""Link command analysis: which linker and LTO mode a link uses, and how its flags route to backends.

Pure functions over argument vectors. The routing is a table (`_LINKER_OPTIONS`) of the lld/LTO-plugin
spellings gn-thinlto understands; a linker option that looks LTO-related but is not in the table makes
the link unsafe to split, and the planner leaves it to GN.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gn_thinlto.errors import GnThinltoError
from thinlto_cache.split_dwarf import split_dwarf_mode


class LtoMode(enum.Enum):
    NONE = "none"
    THIN = "thin"
    FULL = "full"


class LinkerOption(enum.Enum):
    """What an lld option means for a distributed ThinLTO link (lld/ELF/Options.td, LTO plugin spellings)."""

    OPT_LEVEL = "opt_level"  # --lto-O<n>, -plugin-opt=O<n>: backend -O<n>
    MLLVM = "mllvm"  # -mllvm X, -plugin-opt=-X: backend -mllvm X (and the thin link keeps it)
    THIN_LINK_ONLY = "thin_link_only"  # --thinlto-jobs: meaningful for the thin link only
    DROP = "drop"  # in-process cache options: meaningless for an index-only link
    CONFLICT = "conflict"  # options gn-thinlto sets itself: a link already split by hand


@dataclass(frozen=True)
class RoutedOption:
    kind: LinkerOption
    value: str


class Refused(Exception):
    """The link cannot be split safely; `reason` is the one line shown to the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_LINKER_OPTIONS: tuple[tuple[re.Pattern[str], LinkerOption], ...] = (
    (re.compile(r"--?lto-O([0-3])$"), LinkerOption.OPT_LEVEL),
    (re.compile(r"--?plugin-opt=O([0-3])$"), LinkerOption.OPT_LEVEL),
    (re.compile(r"--?plugin-opt=(-.+)$"), LinkerOption.MLLVM),
    (re.compile(r"--?mllvm=(.+)$"), LinkerOption.MLLVM),
    (re.compile(r"--?thinlto-jobs=(.+)$"), LinkerOption.THIN_LINK_ONLY),
    (re.compile(r"--?thinlto-cache-(dir|policy)=.*$"), LinkerOption.DROP),
    # In-process debugging outputs (Chromium's lld_emit_indexes_and_imports): the thin link writes its own.
    (re.compile(r"--?thinlto-emit-index-files$"), LinkerOption.DROP),
    (re.compile(r"--?save-temps(=.*)?$"), LinkerOption.DROP),
    (
        re.compile(r"--?thinlto-(index-only|emit-imports-files|prefix-replace|object-suffix-replace).*$"),
        LinkerOption.CONFLICT,
    ),
    (re.compile(r"--?(lto-obj-path|plugin-opt=obj-path)=.*$"), LinkerOption.CONFLICT),
)
_LTO_LOOKING = re.compile(r"--?(lto-|thinlto-|plugin-opt|plugin$|mllvm)")

# Driver flags copied from the link line to every backend, by prefix (clang's codegen-relevant options).
_DRIVER_COPY_PREFIXES = ("--target=", "-march=", "-mcpu=", "-mtune=", "-mabi=", "-mcmodel=")
_SHELL_TOKENS = {"&&", "||", ";", "|", ">", ">>", "<", "2>&1", "&"}


@dataclass(frozen=True)
class LinkAnalysis:
    """What the planner needs to know about one link command."""

    lto: LtoMode
    backend_flags: tuple[str, ...]
    thin_link_drop: frozenset[str]
    split_lto_unit: bool
    split_dwarf: bool = False  # backends write .dwo files beside their objects (-gsplit-dwarf, split mode)
    cache_policy: str = ""  # the link's --thinlto-cache-policy (lld's cache; the backend cache adopts it)


def linker_args(argv: Sequence[str]) -> list[tuple[int, str]]:
    """(argv index, linker argument) for every -Wl,… / -Xlinker argument, in order."""
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("-Wl,"):
            out.extend((i, part) for part in a[4:].split(","))
        elif a == "-Xlinker" and i + 1 < len(argv):
            out.append((i, argv[i + 1]))
            i += 1
        i += 1
    return out


def lto_mode(argv: Sequence[str]) -> LtoMode:
    mode = LtoMode.NONE
    for a in argv:
        if a in ("-flto=thin",):
            mode = LtoMode.THIN
        elif a in ("-flto", "-flto=full"):
            mode = LtoMode.FULL
        elif a == "-fno-lto":
            mode = LtoMode.NONE
    return mode


def check_shell_free(argv: Sequence[str]) -> None:
    bad = [a for a in argv if a in _SHELL_TOKENS]
    if bad:
        raise Refused(f"link command uses shell syntax ({bad[0]!r}); cannot rewrite it safely")


def check_lld(argv: Sequence[str]) -> None:
    """Refuse links whose linker is not lld (-fuse-ld=lld, --ld-path=…lld, or a direct ld.lld call)."""
    driver = argv[0].rsplit("/", 1)[-1] if argv else ""
    if "lld" in driver:
        return
    linker = ""
    for a in argv:
        if a.startswith("-fuse-ld="):
            linker = a.split("=", 1)[1]
        elif a.startswith("--ld-path="):
            linker = a.split("=", 1)[1].rsplit("/", 1)[-1]
    if "clang" not in driver:
        raise Refused(f"link driver {driver!r} is not clang")
    if "lld" not in linker:
        raise Refused(f"linker is {linker or 'the default ld'!r}, not lld")


def route_linker_option(arg: str) -> RoutedOption | None:
    for pattern, kind in _LINKER_OPTIONS:
        m = pattern.match(arg)
        if m:
            return RoutedOption(kind, m.group(1) if m.groups() else "")
    return None


def analyze(argv: Sequence[str]) -> LinkAnalysis:
    """Classify a full link argv (response files already expanded); raise Refused when unsafe."""
    check_shell_free(argv)
    check_lld(argv)
    mode = lto_mode(argv)
    opt_level = "2"
    mllvm: list[str] = []
    drop: set[str] = set()
    cache_policy = ""
    largs = linker_args(argv)
    skip_next = False
    for n, (idx, arg) in enumerate(largs):
        if skip_next:
            skip_next = False
            continue
        if arg in ("-mllvm", "--mllvm"):
            if n + 1 >= len(largs):
                raise Refused("-mllvm without a value on the link line")
            mllvm.append(largs[n + 1][1])
            skip_next = True
            continue
        routed = route_linker_option(arg)
        if routed is None:
            if _LTO_LOOKING.match(arg):
                raise Refused(f"unknown LTO linker option {arg!r}")
            continue
        if routed.kind is LinkerOption.OPT_LEVEL:
            opt_level = routed.value
        elif routed.kind is LinkerOption.MLLVM:
            mllvm.append(routed.value)
        elif routed.kind is LinkerOption.DROP:
            drop.add(argv[idx])
            if arg.lstrip("-").startswith("thinlto-cache-policy="):
                cache_policy = arg.split("=", 1)[1]
        elif routed.kind is LinkerOption.CONFLICT:
            raise Refused(f"link already sets {arg!r} (a hand-made distributed link)")
    flags: list[str] = []
    i = 1
    while i < len(argv):
        a = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if a == "-Xlinker":
            i += 2
            continue
        if a.startswith(_DRIVER_COPY_PREFIXES):
            flags.append(a)
        elif a == "-target" and nxt:
            flags.append(f"--target={nxt}")
            i += 1
        elif a == "-mllvm" and nxt:
            mllvm.append(nxt)
            i += 1
        i += 1
    flags.append(f"-O{opt_level}")
    # lld's in-process LTO always emits function and data sections (lld/ELF/LTO.cpp, initConfig).
    if "-fno-function-sections" not in argv:
        flags.append("-ffunction-sections")
    if "-fno-data-sections" not in argv:
        flags.append("-fdata-sections")
    # lld picks the relocation model from the output kind: PIC for -shared and -pie (the clang default).
    static = any(a in ("-no-pie", "-static", "-nopie") for a in argv)
    flags.append("-fno-pic" if static and "-shared" not in argv else "-fPIC")
    for value in mllvm:
        flags.extend(("-mllvm", value))
    split = any(a.startswith(("-fsanitize=cfi", "-fsplit-lto-unit", "-fwhole-program-vtables")) for a in argv)
    fission = split_dwarf_mode(argv)
    if fission:  # in-process, clang passes lld dwo_dir=OUTPUT_dwo; a backend writes its .dwo beside its object
        flags.append("-gsplit-dwarf" if fission == "split" else f"-gsplit-dwarf={fission}")
    return LinkAnalysis(mode, tuple(flags), frozenset(drop), split, fission == "split", cache_policy)



def apply_overrides(flags: Sequence[str], add: Sequence[str], remove: Sequence[str]) -> tuple[str, ...]:
    """Config backend_flags: drop every flag in REMOVE, then append ADD."""
    kept = [f for f in flags if f not in set(remove)]
    for f in add:
        if f.startswith(("-flto", "-fthinlto")):
            raise GnThinltoError(f"backend_flags.add: {f!r} is not allowed in a backend command")
    return (*kept, *add)


def backend_compiler(link_driver: str) -> str:
    """The clang that runs backends: the link driver's sibling `clang` (clang++ → clang)."""
    head, sep, name = link_driver.rpartition("/")
    if name.startswith("clang++"):
        name = "clang" + name[len("clang++") :]
    return f"{head}{sep}{name}"
