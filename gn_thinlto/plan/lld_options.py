"""lld's LTO options and what each means for a distributed ThinLTO link: the routing table of the link analysis.

Each row names an lld spelling (lld/ELF/Options.td, with its `-plugin-opt=` alias) and what lld's in-process
ThinLTO does with it (lld/ELF/LTO.cpp, createConfig), so that a backend run as `clang -c -x ir` does the same.
An option that clang's ThinLTO backend cannot express refuses the link with its reason (GN keeps the link):
a backend that generated other code than lld would is worse than no split at all.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass


class LinkerOption(enum.Enum):
    """What an lld option means for a distributed ThinLTO link."""

    OPT_LEVEL = "opt_level"  # --lto-O<n>, -plugin-opt=O<n>: lld's Config.OptLevel (the optimization pipeline)
    CG_OPT_LEVEL = "cg_opt_level"  # --lto-CGO<n>: Config.CGOptLevel (code generation; default clamp(n, 2, 3))
    MLLVM = "mllvm"  # -mllvm X, -plugin-opt=-X: backend -mllvm X (and the thin link keeps it)
    BACKEND = "backend"  # a codegen option: the backends get the clang spelling (the row's detail, {} = value)
    PARTITIONS = "partitions"  # --lto-partitions=N: the regular-LTO module's codegen in N partitions (edges)
    THIN_LINK_ONLY = "thin_link_only"  # read by the thin link alone (index-time decisions, jobs, regular LTO)
    IGNORED = "ignored"  # accepted and ignored by lld itself
    DROP = "drop"  # in-process cache and debugging outputs: meaningless for an index-only link
    CONFLICT = "conflict"  # options gn-thinlto sets itself: a link already split by hand
    UNEXPRESSIBLE = "unexpressible"  # clang's ThinLTO backend has no spelling for it: the link is refused


@dataclass(frozen=True)
class RoutedOption:
    kind: LinkerOption
    value: str
    detail: str = ""  # BACKEND: the clang flag template; UNEXPRESSIBLE: why


_PGO = "clang's backends would need a context-sensitive PGO pipeline lld runs itself"
_PIPELINE = "clang's ThinLTO backend cannot run a custom LTO pass pipeline"

# (pattern whose group 1 is the value, kind, detail). The first match wins.
LINKER_OPTIONS: tuple[tuple[re.Pattern[str], LinkerOption, str], ...] = (
    (re.compile(r"--?(?:lto-O|plugin-opt=O)([0-3])$"), LinkerOption.OPT_LEVEL, ""),
    (re.compile(r"--?lto-CGO([0-3])$"), LinkerOption.CG_OPT_LEVEL, ""),
    (re.compile(r"--?plugin-opt=(-.+)$"), LinkerOption.MLLVM, ""),
    (re.compile(r"--?mllvm=(.+)$"), LinkerOption.MLLVM, ""),
    (re.compile(r"--?(?:lto-sample-profile|plugin-opt=sample-profile)=(.+)$"), LinkerOption.BACKEND,
     "-fprofile-sample-use={}"),
    (re.compile(r"--?lto-basic-block-sections=(.+)$"), LinkerOption.BACKEND, "-fbasic-block-sections={}"),
    (re.compile(r"--?lto-unique-basic-block-section-names()$"), LinkerOption.BACKEND,
     "-funique-basic-block-section-names"),
    (re.compile(r"--?no-lto-pgo-warn-mismatch()$"), LinkerOption.BACKEND, "-mllvm -no-pgo-warn-mismatch"),
    (re.compile(r"--?lto-pgo-warn-mismatch()$"), LinkerOption.IGNORED, ""),  # the default, as in clang
    (re.compile(r"--?plugin-opt=(mcpu=native)$"), LinkerOption.UNEXPRESSIBLE,
     "lld resolves the CPU name native itself, and clang's -target-cpu takes no such name"),
    (re.compile(r"--?plugin-opt=mcpu=(.+)$"), LinkerOption.BACKEND, "-Xclang -target-cpu -Xclang {}"),
    (re.compile(r"--?plugin-opt=(thinlto)$"), LinkerOption.IGNORED, ""),
    (re.compile(r"--?(?:thinlto-jobs|plugin-opt=jobs)=(.+)$"), LinkerOption.THIN_LINK_ONLY, ""),
    # lld --thinlto-index-only keeps only the first partition of the regular-LTO module: the planner's edges
    (re.compile(r"--?(?:lto-partitions|plugin-opt=lto-partitions)=(.+)$"), LinkerOption.PARTITIONS, ""),
    (re.compile(r"--?(lto-validate-all-vtables-have-type-infos|lto-known-safe-vtables=.*)$"),
     LinkerOption.THIN_LINK_ONLY, ""),
    (re.compile(r"--?thinlto-cache-(dir|policy)=.*$"), LinkerOption.DROP, ""),
    # In-process debugging outputs (Chromium's lld_emit_indexes_and_imports): the thin link writes its own.
    (re.compile(r"--?thinlto-emit-index-files$"), LinkerOption.DROP, ""),
    (re.compile(r"--?save-temps(=.*)?$"), LinkerOption.DROP, ""),
    (re.compile(r"--?thinlto-(index-only|emit-imports-files|prefix-replace|object-suffix-replace).*$"),
     LinkerOption.CONFLICT, ""),
    (re.compile(r"--?(lto-obj-path|plugin-opt=obj-path)=.*$"), LinkerOption.CONFLICT, ""),
    (re.compile(r"--?(lto-newpm-passes|lto-aa-pipeline|plugin-opt=opt-pipeline)=.*$"), LinkerOption.UNEXPRESSIBLE,
     _PIPELINE),
    (re.compile(r"--?(lto-cs-profile-generate|lto-cs-profile-file=.*|plugin-opt=cs-profile-.*)$"),
     LinkerOption.UNEXPRESSIBLE, _PGO),
    (re.compile(r"--?(lto-whole-program-visibility)$"), LinkerOption.UNEXPRESSIBLE,
     "clang's ThinLTO backend has no switch for whole-program visibility"),
    (re.compile(r"--?(lto-emit-asm|plugin-opt=emit-asm|lto-emit-llvm|plugin-opt=emit-llvm)$"),
     LinkerOption.UNEXPRESSIBLE, "the link emits assembly or bitcode, not objects"),
    (re.compile(r"--?(lto-pseudo-probe-for-profiling)$"), LinkerOption.UNEXPRESSIBLE,
     "pseudo-probe codegen is not a backend option"),
)
LTO_LOOKING = re.compile(r"--?(lto-|no-lto-|thinlto-|plugin-opt|plugin$|mllvm|load-pass-plugin)")


def route_linker_option(arg: str) -> RoutedOption | None:
    """How lld option ARG routes, or None when it is not an LTO option gn-thinlto knows."""
    for pattern, kind, detail in LINKER_OPTIONS:
        m = pattern.match(arg)
        if m:
            return RoutedOption(kind, m.group(1) if m.groups() else "", detail)
    return None


def backend_spelling(routed: RoutedOption) -> tuple[str, ...]:
    """The clang flags of a BACKEND row (lld's basic-block-sections value is all/labels/none or a file)."""
    value = routed.value
    if routed.detail.startswith("-fbasic-block-sections=") and value not in ("all", "labels", "none"):
        value = f"list={value}"
    return tuple(part.format(value) for part in routed.detail.split())


def backend_flag_files(flags: Sequence[str]) -> tuple[str, ...]:
    """The files the backend flags of BACKEND rows name (a sample profile, a basic-block sections list): inputs of
    every backend of the link, so that an edit of one runs them again."""
    files = []
    for flag in flags:
        if flag.startswith("-fprofile-sample-use="):
            files.append(flag.split("=", 1)[1])
        elif flag.startswith("-fbasic-block-sections=list="):
            files.append(flag.removeprefix("-fbasic-block-sections=list="))
    return tuple(files)


# lld registers LLVM's codegen command-line flags (llvm/lib/CodeGen/CommandFlags.cpp, through
# lld/Common/TargetOptionsCommandFlags.cpp), so `-mllvm -code-model=large` on a link sets lld's code model.
# clang does not register them, and has no spelling that reproduces them: clang's -mcmodel=large is not lld's
# -code-model=large (checked with clang/lld 19 and 22: 2 of 3 objects of a test program identical, the third's
# functions 2 bytes apart). A link with one of them is refused.
_MLLVM_CODEGEN_ONLY_IN_LLD = frozenset({
    "march", "mcpu", "mattr", "relocation-model", "code-model", "large-data-threshold", "exception-model",
    "frame-pointer", "float-abi", "fuse-fp-ops", "enable-unsafe-fp-math", "enable-no-infs-fp-math",
    "enable-no-nans-fp-math", "enable-no-signed-zeros-fp-math", "denormal-fp-math", "disable-tail-calls",
    "stack-alignment", "stackrealign", "trap-func", "use-ctors", "data-sections", "function-sections",
    "unique-section-names", "basic-block-sections", "unique-basic-block-section-names", "emulated-tls",
    "enable-tlsdesc", "emit-call-site-info", "split-machine-functions", "meabi", "xray-function-index",
})


def mllvm_for_backend(value: str) -> tuple[str, ...]:
    """The backend flags for the link's `-mllvm VALUE`; raises ValueError (the reason) for an lld-only codegen
    flag clang has no spelling for."""
    name = value.lstrip("-").partition("=")[0]
    if name in _MLLVM_CODEGEN_ONLY_IN_LLD:
        raise ValueError(f"-mllvm {value} sets lld's code generation, and clang's backends cannot express it")
    return ("-mllvm", value)
