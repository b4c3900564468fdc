"""Link command analysis: which linker and LTO mode a link uses, and how its flags route to backends.

Pure functions over argument vectors. The routing is a table (lld_options.LINKER_OPTIONS) of the lld/LTO-plugin
spellings gn-thinlto understands; a linker option that looks LTO-related but is not in the table, or that
clang's ThinLTO backend cannot express, makes the link unsafe to split, and the planner leaves it to GN.

"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gn_thinlto.errors import GnThinltoError
from gn_thinlto.plan.lld_options import (
    LTO_LOOKING,
    LinkerOption,
    backend_spelling,
    mllvm_for_backend,
    route_linker_option,
)
from gn_thinlto.steps.thinlink_paths import MAX_PARTITIONS
from thinlto_base.split_dwarf import split_dwarf_mode


class LtoMode(enum.Enum):
    NONE = "none"
    THIN = "thin"
    FULL = "full"


class Refused(Exception):
    """The link cannot be split safely; `reason` is the one line shown to the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Driver flags copied from the link line to every backend, by prefix (clang's codegen-relevant options).
_DRIVER_COPY_PREFIXES = ("--target=", "-march=", "-mcpu=", "-mtune=", "-mabi=")
_SHELL_TOKENS = {"&&", "||", ";", "|", ">", ">>", "<", "2>&1", "&"}


@dataclass(frozen=True)
class LinkAnalysis:
    """What the planner needs to know about one link command."""

    lto: LtoMode
    backend_flags: tuple[str, ...]  # the backend's flags, with -O<opt_level>
    thin_link_drop: frozenset[str]
    split_lto_unit: bool
    split_dwarf: bool = False  # backends write .dwo files beside their objects (-gsplit-dwarf, split mode)
    cache_policy: str = ""  # the link's --thinlto-cache-policy (lld's cache; the backend cache adopts it)
    opt_level: int = 2  # lld's LTO optimization level (--lto-O<n>)
    cg_opt_level: int = 2  # lld's LTO code generation level (--lto-CGO<n>, default clamp(opt_level, 2, 3))
    lto_partitions: int = 0  # the link's --lto-partitions=N (0: not given)


@dataclass
class _Routed:
    """What the link's linker options say (gathered in order, the last one of an option winning as in lld)."""

    opt_level: int
    cg_opt_level: int | None = None
    mllvm: list[str] = field(default_factory=list)
    backend: list[str] = field(default_factory=list)
    drop: set[str] = field(default_factory=set)
    cache_policy: str = ""
    partitions: int = 0


_LINKER_NEXT = ("-Xlinker", "--for-linker")  # the driver passes the next argument to the linker as it is


def linker_args(argv: Sequence[str]) -> list[tuple[int, str]]:
    """(argv index, linker argument) for every -Wl,… / -Xlinker / --for-linker argument, in order."""
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("-Wl,"):
            out.extend((i, part) for part in a[4:].split(","))
        elif a.startswith("--for-linker="):
            out.append((i, a.split("=", 1)[1]))
        elif a in _LINKER_NEXT and i + 1 < len(argv):
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


# Code models a ThinLTO backend cannot reproduce: lld takes them from each module's "Code Model" flag for
# its whole backend; clang's -x ir code generation (the second step of a two-step backend) does not read the
# flag, and even one-step backends differ from lld's with them (checked with clang/lld 19 and 22).
_UNREPRODUCIBLE_CODE_MODELS = ("-mcmodel=medium", "-mcmodel=large", "-mcmodel=kernel")


def compile_refusal(argv: Sequence[str]) -> str:
    """Why a ThinLTO object compiled by ARGV cannot go through distributed backends, or ""."""
    models = [a for a in argv if a.startswith("-mcmodel=")]
    if models and models[-1] in _UNREPRODUCIBLE_CODE_MODELS:
        return f"compiled with {models[-1]}, a code model the backends cannot reproduce as lld does"
    return ""


def check_shell_free(argv: Sequence[str]) -> None:
    bad = [a for a in argv if a in _SHELL_TOKENS]
    if bad:
        raise Refused(f"link command uses shell syntax ({bad[0]!r}); cannot rewrite it safely")


def check_no_response_files(argv: Sequence[str]) -> None:
    """Refuse a link whose line (GN's own response file already expanded) names another response file (`@FILE`,
    `-Wl,@FILE`, `-Xlinker @FILE`, `--for-linker[=]@FILE`) or a clang configuration file (`--config`). Planning
    reads no file, so flags in them would be neither routed to the backends nor refused."""
    for i, a in enumerate(argv[1:], 1):
        linker = a.split(",")[1:] if a.startswith("-Wl,") else [a.split("=", 1)[1]] if a.startswith(
            "--for-linker=") else [a] if argv[i - 1] in _LINKER_NEXT else []
        if a.startswith("--config") and argv[i - 1] not in _LINKER_NEXT:
            raise Refused(f"link command reads a clang configuration file ({a!r}), which gn-thinlto does not read: "
                          "its flags could change the backends' code")
        named = next((w for w in (a, *linker) if w.startswith("@") and len(w) > 1), None)
        if named:
            raise Refused(f"link command reads flags from the response file {named[1:]!r} ({a!r}), which gn-thinlto "
                          "does not read: its flags could change the backends' code")


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


# The link driver's -O (clang passes lld -plugin-opt=O<n>, before every -Wl option: clang's addLTOOptions).
_DRIVER_OPT_LEVELS = {"-O0": 0, "-O1": 1, "-O2": 2, "-O3": 3, "-O4": 3, "-Ofast": 3, "-Os": 2, "-Oz": 2, "-Og": 1}


def _driver_opt_level(argv: Sequence[str]) -> int:
    levels = [_DRIVER_OPT_LEVELS[a] for a in argv[1:] if a in _DRIVER_OPT_LEVELS]
    return levels[-1] if levels else 2  # lld's default --lto-O2


def _route_linker_args(argv: Sequence[str]) -> _Routed:
    out = _Routed(_driver_opt_level(argv))
    largs = linker_args(argv)
    skip_next = False
    for n, (idx, arg) in enumerate(largs):
        if skip_next:
            skip_next = False
            continue
        if arg in ("-mllvm", "--mllvm"):
            if n + 1 >= len(largs):
                raise Refused("-mllvm without a value on the link line")
            out.mllvm.append(largs[n + 1][1])
            skip_next = True
            continue
        routed = route_linker_option(arg)
        if routed is None:
            if LTO_LOOKING.match(arg):
                raise Refused(f"unknown LTO linker option {arg!r}")
            continue
        kind = routed.kind
        if kind is LinkerOption.OPT_LEVEL:
            out.opt_level = int(routed.value)
        elif kind is LinkerOption.CG_OPT_LEVEL:
            out.cg_opt_level = int(routed.value)
        elif kind is LinkerOption.MLLVM:
            out.mllvm.append(routed.value)
        elif kind is LinkerOption.BACKEND:
            out.backend.extend(backend_spelling(routed))
        elif kind is LinkerOption.PARTITIONS:
            if not routed.value.isdigit() or not 1 <= int(routed.value) <= MAX_PARTITIONS:
                raise Refused(f"{arg}: gn-thinlto runs 1 to {MAX_PARTITIONS} regular-LTO partitions")
            out.partitions = int(routed.value)
            out.drop.add(argv[idx])  # the thin link writes the module; the planner's edges compile its partitions
        elif kind is LinkerOption.DROP:
            out.drop.add(argv[idx])
            if arg.lstrip("-").startswith("thinlto-cache-policy="):
                out.cache_policy = arg.split("=", 1)[1]
        elif kind is LinkerOption.CONFLICT:
            raise Refused(f"link already sets {arg!r} (a hand-made distributed link)")
        elif kind is LinkerOption.UNEXPRESSIBLE:
            raise Refused(f"{arg}: {routed.detail}")
    return out


def _driver_flags(argv: Sequence[str], mllvm: list[str]) -> list[str]:
    """The link driver's codegen flags every backend gets; its -mllvm values go to MLLVM."""
    flags: list[str] = []
    i = 1
    while i < len(argv):
        a = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if a in _LINKER_NEXT:
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
    return flags


_RELOCATABLE = frozenset({"-r", "--relocatable", "-Wl,-r", "-Wl,--relocatable"})


def relocation_model_flag(argv: Sequence[str]) -> str:
    """lld's LTO relocation model as a clang flag: PIC for -shared and -pie, static for other executables.

    The driver passes lld -pie by default (clang >= 15 on Linux) unless -no-pie, -nopie or -static (not
    -static-pie) says otherwise, and -Wl,-pie / -Wl,--no-pie come after it (the last wins in lld)."""
    if any(a in _RELOCATABLE for a in argv) or any(a in ("-r", "--relocatable") for _, a in linker_args(argv)):
        raise Refused("a relocatable link (-r) keeps lld's LTO relocation model from the modules; not split")
    if "-shared" in argv:
        return "-fPIC"
    pie = True
    for a in argv:
        if a in ("-pie", "-static-pie"):
            pie = True
        elif a in ("-no-pie", "-nopie", "-static"):
            pie = False
    for _, a in linker_args(argv):
        if a in ("-pie", "--pie", "-shared", "--shared", "-Bshareable"):
            pie = True
        elif a in ("-no-pie", "--no-pie"):
            pie = False
    return "-fPIC" if pie else "-fno-pic"


def opt_level_flags(opt_level: int) -> tuple[str, ...]:
    """clang's spelling of lld's LTO optimization pipeline at OPT_LEVEL: lld's pipeline unrolls loops at every
    level (PipelineTuningOptions' default), clang's -O1 does not unless told."""
    return (f"-O{opt_level}", "-funroll-loops") if opt_level == 1 else (f"-O{opt_level}",)


# Driver flags on a link line that clang turns into options of lld's LTO code generation (-plugin-opt=…; clang's
# addLTOOptions, checked with `clang -###` by tests/unit/test_plan_linkline.py) which the backends' commands do not
# carry: a link with one keeps GN's own edge (its in-process backends would honour it, ours would not).
_DRIVER_LTO_CODEGEN = re.compile(
    r"-f(profile-sample-use|auto-profile|profile-use|profile-instr-use)(=.*)?$|-fcs-profile-generate(=.*)?$"
    r"|-f(split-machine-functions|emulated-tls|stack-size-section|jmc|(no-)?global-isel|experimental-isel)$"
    r"|-fenable-matrix$|-mbranches-within-32B-boundaries$|-m(no-)?outline$|-g(lldb|sce)\d*$|-Wa,.*--crel\b.*")


def check_driver_codegen_flags(argv: Sequence[str]) -> None:
    """Refuse a link whose driver flags set LTO code generation that the backends would not get."""
    skip = False
    for a in argv[1:]:
        if skip:
            skip = False
            continue
        if a in (*_LINKER_NEXT, "-mllvm", "-o", "-Xclang", "-Xassembler") or a.startswith("-Xarch_"):
            skip = True
            continue
        if _DRIVER_LTO_CODEGEN.match(a):
            raise Refused(f"link flag {a!r} sets lld's LTO code generation (clang passes it as -plugin-opt), which "
                          "gn-thinlto does not give its backends")


def analyze(argv: Sequence[str]) -> LinkAnalysis:
    """Classify a full link argv (response files already expanded); raise Refused when unsafe."""
    check_shell_free(argv)
    check_no_response_files(argv)
    check_lld(argv)
    check_driver_codegen_flags(argv)
    mode = lto_mode(argv)
    routed = _route_linker_args(argv)
    mllvm: list[str] = []
    flags = _driver_flags(argv, mllvm)
    flags.extend(opt_level_flags(routed.opt_level))
    # lld's in-process LTO always emits function and data sections and address-significance tables
    # (lld/ELF/LTO.cpp, initConfig); the driver turns sections off with -plugin-opt=-function-sections=0.
    if "-fno-function-sections" not in argv:
        flags.append("-ffunction-sections")
    if "-fno-data-sections" not in argv:
        flags.append("-fdata-sections")
    flags.append("-faddrsig")
    flags.append(relocation_model_flag(argv))
    flags.extend(routed.backend)
    for value in (*routed.mllvm, *mllvm):
        try:
            flags.extend(mllvm_for_backend(value))
        except ValueError as e:
            raise Refused(str(e)) from None
    split = any(a.startswith(("-fsanitize=cfi", "-fsplit-lto-unit", "-fwhole-program-vtables")) for a in argv)
    fission = split_dwarf_mode(argv)
    if fission:  # in-process, clang passes lld dwo_dir=OUTPUT_dwo; a backend writes its .dwo beside its object
        flags.append("-gsplit-dwarf" if fission == "split" else f"-gsplit-dwarf={fission}")
    cg_level = routed.cg_opt_level if routed.cg_opt_level is not None else min(max(routed.opt_level, 2), 3)
    return LinkAnalysis(mode, tuple(flags), frozenset(routed.drop), split, fission == "split", routed.cache_policy,
                        routed.opt_level, cg_level, routed.partitions)


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
