"""Link-line analysis: linker checks, LTO option routing, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from gn_thinlto.plan.linkline import Refused, analyze, apply_overrides, backend_compiler, compile_refusal, lto_mode, LtoMode
from gn_thinlto.errors import GnThinltoError

BASE = ["/usr/bin/clang++", "-fuse-ld=lld", "-flto=thin", "-o", "out", "a.o"]


def test_routes_opt_level_and_mllvm_in_every_spelling() -> None:
    a = analyze([*BASE, "-Wl,--lto-O3", "-Wl,-mllvm,-x=1", "-Wl,-mllvm=-y=2", "-Wl,-plugin-opt=-z=3",
                 "-Wl,--plugin-opt=-w", "-Xlinker", "-mllvm", "-Xlinker", "-v=4", "-mllvm", "-d=5"])
    f = a.backend_flags
    assert "-O3" in f
    values = [f[i + 1] for i, x in enumerate(f) if x == "-mllvm"]
    assert values == ["-x=1", "-y=2", "-z=3", "-w", "-v=4", "-d=5"]


def test_sections_pic_and_target() -> None:
    a = analyze([*BASE, "--target=x86_64-linux-gnu", "-fno-data-sections", "-no-pie", "-march=haswell"])
    assert a.backend_flags[:2] == ("--target=x86_64-linux-gnu", "-march=haswell")
    assert "-ffunction-sections" in a.backend_flags and "-fdata-sections" not in a.backend_flags
    assert "-fno-pic" in a.backend_flags
    assert "-fPIC" in analyze([*BASE, "-shared"]).backend_flags


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        (["-fuse-ld=bfd"], "linker is 'bfd', not lld"),
        (["-Wl,--lto-debug-pass-manager"], "unknown LTO linker option '--lto-debug-pass-manager'"),
        (["-Wl,-plugin-opt=emit-llvm"], "-plugin-opt=emit-llvm: the link emits assembly or bitcode, not objects"),
        (["-Wl,--lto-emit-asm"], "--lto-emit-asm: the link emits assembly or bitcode, not objects"),
        (["-Wl,--lto-newpm-passes=default<O2>"],
         "--lto-newpm-passes=default<O2>: clang's ThinLTO backend cannot run a custom LTO pass pipeline"),
        (["-Wl,--lto-aa-pipeline=basic-aa"],
         "--lto-aa-pipeline=basic-aa: clang's ThinLTO backend cannot run a custom LTO pass pipeline"),
        (["-Wl,--lto-cs-profile-generate"],
         "--lto-cs-profile-generate: clang's backends would need a context-sensitive PGO pipeline lld runs itself"),
        (["-Wl,--lto-whole-program-visibility"],
         "--lto-whole-program-visibility: clang's ThinLTO backend has no switch for whole-program visibility"),
        (["-Wl,-mllvm,-mcpu=skylake"],
         "-mllvm -mcpu=skylake sets lld's code generation, and clang's backends cannot express it"),
        (["-Wl,-mllvm,-code-model=large"],
         "-mllvm -code-model=large sets lld's code generation, and clang's backends cannot express it"),
        (["-Wl,-plugin-opt=-code-model=medium"],
         "-mllvm -code-model=medium sets lld's code generation, and clang's backends cannot express it"),
        (["-Wl,-plugin-opt=mcpu=native"],
         "-plugin-opt=mcpu=native: lld resolves the CPU name native itself, and clang's -target-cpu takes no such "
         "name"),
        (["-Wl,-r"], "a relocatable link (-r) keeps lld's LTO relocation model from the modules; not split"),
        (["-Wl,--thinlto-index-only"], "link already sets '--thinlto-index-only' (a hand-made distributed link)"),
        (["&&", "true"], "link command uses shell syntax ('&&'); cannot rewrite it safely"),
        (["@flags.rsp"], "link command reads flags from the response file 'flags.rsp' ('@flags.rsp'), which gn-thinlto "
                         "does not read: its flags could change the backends' code"),
        (["-Wl,--gc-sections,@../../ld.rsp"],
         "link command reads flags from the response file '../../ld.rsp' ('-Wl,--gc-sections,@../../ld.rsp'), which "
         "gn-thinlto does not read: its flags could change the backends' code"),
        (["--for-linker=@l.rsp"], "link command reads flags from the response file 'l.rsp' "
                                  "('--for-linker=@l.rsp'), which gn-thinlto does not read: its flags could change "
                                  "the backends' code"),
        (["--for-linker", "@l.rsp"], "link command reads flags from the response file 'l.rsp' ('@l.rsp'), which "
                                     "gn-thinlto does not read: its flags could change the backends' code"),
        (["--config=lto.cfg"], "link command reads a clang configuration file ('--config=lto.cfg'), which "
                               "gn-thinlto does not read: its flags could change the backends' code"),
        (["--for-linker=--lto-debug-pass-manager"], "unknown LTO linker option '--lto-debug-pass-manager'"),
        (["-Xlinker", "@x"], "link command reads flags from the response file 'x' ('@x'), which gn-thinlto does not "
                             "read: its flags could change the backends' code"),
    ],
)
def test_refusals(extra: list[str], reason: str) -> None:
    with pytest.raises(Refused) as e:
        analyze([*BASE, *extra])
    assert e.value.reason == reason


def test_default_linker_is_refused() -> None:
    with pytest.raises(Refused, match="not lld"):
        analyze(["/usr/bin/clang++", "-flto=thin", "-o", "x", "a.o"])


def test_cache_options_are_dropped_and_split_detected() -> None:
    a = analyze([*BASE, "-Wl,--thinlto-cache-dir=/tmp/c", "-fsanitize=cfi"])
    assert a.thin_link_drop == frozenset({"-Wl,--thinlto-cache-dir=/tmp/c"})
    assert a.split_lto_unit


def test_for_linker_routes_like_xlinker() -> None:
    """clang's --for-linker=X is -Xlinker X (a review, 2026-12-07: --for-linker=--lto-O0 was taken as -O2)."""
    assert analyze([*BASE, "--for-linker=--lto-O0"]).opt_level == 0
    assert analyze([*BASE, "--for-linker", "--lto-O1"]).opt_level == 1


def test_lto_mode_last_wins() -> None:
    assert lto_mode(["-flto=thin", "-fno-lto"]) is LtoMode.NONE
    assert lto_mode(["-flto", "-flto=thin"]) is LtoMode.THIN
    assert lto_mode(["-flto=full"]) is LtoMode.FULL


def test_overrides_and_compiler() -> None:
    assert apply_overrides(("-O2", "-fPIC"), ("-g",), ("-fPIC",)) == ("-O2", "-g")
    with pytest.raises(GnThinltoError):
        apply_overrides((), ("-flto=thin",), ())
    assert backend_compiler("/usr/lib/llvm-19/bin/clang++") == "/usr/lib/llvm-19/bin/clang"
    assert backend_compiler("clang++-19") == "clang-19"


def test_chromium_official_flags_route_like_lld_in_process() -> None:
    official = ["-Wl,--thinlto-jobs=all", "-Wl,--thinlto-cache-dir=thinlto-cache",
                "-Wl,--thinlto-cache-policy=cache_size=10%:cache_size_bytes=40g:cache_size_files=100000",
                "-Wl,-mllvm,-import-instr-limit=30", "-Wl,-mllvm,-inlinehint-threshold=360", "-Wl,--lto-O0",
                "-fwhole-program-vtables", "-fsanitize=cfi-vcall", "-fsanitize=cfi-icall", "-Wl,--icf=all",
                "-Wl,-O2", "-Wl,--gc-sections", "-Wl,--build-id=sha1", "-pie", "-Wl,--save-temps=import",
                "-Wl,--thinlto-emit-index-files"]
    a = analyze([*BASE, *official])
    assert a.split_lto_unit and not a.split_dwarf
    assert "-O0" in a.backend_flags and "-O2" not in a.backend_flags
    assert (a.opt_level, a.cg_opt_level) == (0, 2)  # lld's --lto-O0 generates code at CGO2
    values = [a.backend_flags[i + 1] for i, x in enumerate(a.backend_flags) if x == "-mllvm"]
    assert values == ["-import-instr-limit=30", "-inlinehint-threshold=360"]
    assert not any(f.startswith(("-fsanitize", "-Wl,")) for f in a.backend_flags)
    assert a.thin_link_drop == {"-Wl,--thinlto-cache-dir=thinlto-cache", official[2], "-Wl,--save-temps=import",
                                "-Wl,--thinlto-emit-index-files"}


@pytest.mark.parametrize(
    ("flags", "backend", "split"),
    [(["-gsplit-dwarf"], "-gsplit-dwarf", True), (["-gsplit-dwarf=split"], "-gsplit-dwarf", True),
     (["-gsplit-dwarf=single"], "-gsplit-dwarf=single", False), (["-gsplit-dwarf", "-gno-split-dwarf"], None, False)],
)
def test_split_dwarf_reaches_the_backends(flags: list[str], backend: str | None, split: bool) -> None:
    a = analyze([*BASE, *flags])
    assert a.split_dwarf is split
    fission = [f for f in a.backend_flags if f.startswith("-gsplit-dwarf")]
    assert fission == ([backend] if backend else [])


def _levels(*extra: str) -> tuple[int, int, tuple[str, ...]]:
    a = analyze([*BASE, *extra])
    return a.opt_level, a.cg_opt_level, tuple(f for f in a.backend_flags if f.startswith(("-O", "-funroll")))


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ((), (2, 2, ("-O2",))),
        (("-Wl,--lto-O0",), (0, 2, ("-O0",))),
        (("-Wl,--lto-O1",), (1, 2, ("-O1", "-funroll-loops"))),  # lld's pipeline unrolls loops at O1
        (("-Wl,--lto-O3",), (3, 3, ("-O3",))),
        (("-Wl,-plugin-opt=O0",), (0, 2, ("-O0",))),
        (("-Wl,--lto-O0,--lto-CGO0",), (0, 0, ("-O0",))),
        (("-Wl,--lto-CGO1", "-Wl,--lto-O3"), (3, 1, ("-O3",))),  # an explicit CGO is kept whatever -O comes after
        (("-Wl,--lto-O0", "-Wl,--lto-O3"), (3, 3, ("-O3",))),  # the last --lto-O wins
        (("-O3",), (3, 3, ("-O3",))),  # the driver passes -plugin-opt=O3
        (("-Os",), (2, 2, ("-O2",))),
        (("-O3", "-Wl,--lto-O0"), (0, 2, ("-O0",))),  # -Wl options come after the driver's plugin-opt
    ],
)
def test_opt_and_codegen_levels_like_lld(extra: tuple[str, ...], expected: tuple[int, int, tuple[str, ...]]) -> None:
    assert _levels(*extra) == expected


@pytest.mark.parametrize(
    ("extra", "model"),
    [((), "-fPIC"), (("-pie",), "-fPIC"), (("-shared",), "-fPIC"), (("-no-pie",), "-fno-pic"),
     (("-static",), "-fno-pic"), (("-static-pie",), "-fPIC"), (("-no-pie", "-Wl,-pie"), "-fPIC"),
     (("-Wl,--no-pie",), "-fno-pic"), (("-nopie", "-shared"), "-fPIC")],
)
def test_relocation_model_from_the_output_kind(extra: tuple[str, ...], model: str) -> None:
    flags = analyze([*BASE, *extra]).backend_flags
    assert model in flags
    assert flags.count("-fPIC") + flags.count("-fno-pic") == 1


def test_always_on_sections_and_addrsig() -> None:
    flags = analyze(BASE).backend_flags
    assert {"-ffunction-sections", "-fdata-sections", "-faddrsig"} <= set(flags)
    assert not any(f == "-g" or f.startswith("-g") and f != "-gsplit-dwarf" for f in flags)
    assert not any(f.startswith("-g") for f in analyze([*BASE, "-g", "-gdwarf-5"]).backend_flags)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (("-Wl,--lto-basic-block-sections=all",), ("-fbasic-block-sections=all",)),
        (("-Wl,--lto-basic-block-sections=prof.txt",), ("-fbasic-block-sections=list=prof.txt",)),
        (("-Wl,--lto-unique-basic-block-section-names",), ("-funique-basic-block-section-names",)),
        (("-Wl,--lto-sample-profile=a.prof",), ("-fprofile-sample-use=a.prof",)),
        (("-Wl,-plugin-opt=sample-profile=a.prof",), ("-fprofile-sample-use=a.prof",)),
        (("-Wl,--no-lto-pgo-warn-mismatch",), ("-mllvm", "-no-pgo-warn-mismatch")),
        (("-Wl,-plugin-opt=mcpu=znver3",), ("-Xclang", "-target-cpu", "-Xclang", "znver3")),
    ],
)
def test_codegen_options_get_clangs_spelling(extra: tuple[str, ...], expected: tuple[str, ...]) -> None:
    flags = analyze([*BASE, *extra]).backend_flags
    n = len(expected)
    assert any(flags[i:i + n] == expected for i in range(len(flags)))


@pytest.mark.parametrize("extra", ["-Wl,--lto-pgo-warn-mismatch", "-Wl,-plugin-opt=thinlto", "-Wl,--lto-partitions=4",
                                   "-Wl,--lto-known-safe-vtables=_ZTV*"])
def test_options_without_backend_effect_are_accepted(extra: str) -> None:
    assert analyze([*BASE, extra]).backend_flags == analyze(BASE).backend_flags


def test_code_models_lld_takes_from_the_modules_refuse_their_objects() -> None:
    assert compile_refusal(["clang++", "-flto=thin", "-mcmodel=large", "-c", "a.cc"]) == (
        "compiled with -mcmodel=large, a code model the backends cannot reproduce as lld does")
    assert compile_refusal(["clang++", "-mcmodel=large", "-mcmodel=small"]) == ""
    assert compile_refusal(["clang++", "-flto=thin"]) == ""
    assert not any(f.startswith("-mcmodel") for f in analyze([*BASE, "-mcmodel=small"]).backend_flags)


# Driver flags to put on a link line, each probed with `clang -###`: a broad sample of what GN link lines carry
# and of what clang's addLTOOptions turns into lld LTO options.
PROBED = (
    "-fprofile-sample-use=p.prof", "-fcs-profile-generate", "-fprofile-use=p.profdata", "-fprofile-instr-use=p.profdata",
    "-fsplit-machine-functions", "-femulated-tls", "-fstack-size-section", "-mbranches-within-32B-boundaries", "-fjmc",
    "-fglobal-isel", "-fno-global-isel", "-fexperimental-isel", "-Wa,--crel", "-ggdb", "-ggdb3", "-glldb", "-gsce",
    "-g", "-fenable-matrix",
    "-moutline", "-mno-outline", "-ffunction-sections", "-fdata-sections", "-fno-function-sections", "-O2", "-Os",
    "-march=haswell", "-gsplit-dwarf", "-flto-jobs=4", "-fcrash-diagnostics-dir=/tmp", "-fsanitize=address",
    "-fwhole-program-vtables", "-fsplit-lto-unit", "-fno-plt", "-fPIC", "-fno-omit-frame-pointer", "-fcf-protection",
    "-fstack-protector-strong", "-fprofile-instr-generate", "-fcoverage-mapping", "-mcmodel=large", "-gz",
    "-fvisibility=hidden", "-rdynamic", "-pthread", "-static-libstdc++", "-Werror", "-nostdlib++",
)
# What clang passes lld for the flags the backends are given as well (analyze routes them).
HANDLED_PLUGIN_OPTS = ("-plugin-opt=O", "-plugin-opt=mcpu=", "-plugin-opt=jobs=", "-plugin-opt=-crash-diagnostics-dir=",
                       "-plugin-opt=-function-sections=", "-plugin-opt=-data-sections=", "-plugin-opt=dwo_dir=",
                       "-plugin-opt=-debugger-tune=gdb")  # gdb: the tuning a Linux target has anyway


def test_every_driver_flag_clang_turns_into_lto_codegen_is_routed_or_refused(tmp_path: Path) -> None:
    """[harden] clang turns some driver flags on a link line into lld -plugin-opt options (its addLTOOptions):
    lld's in-process backends honour them. A flag whose option the backends would not get must leave GN's edge in
    place (an attacker's review, 2026-12-07: -fstack-size-section was dropped, and the binary differed)."""
    import shlex
    import subprocess

    def lld_args(extra: list[str]) -> list[str]:
        proc = subprocess.run(["clang-19", "-###", "-fuse-ld=lld", "-flto=thin", "a.o", *extra, "-o", "out"],
                              capture_output=True, text=True, cwd=tmp_path, check=True)
        line = next(ln for ln in proc.stderr.splitlines() if ln.startswith(' "') and "ld.lld" in ln.split('" ')[0])
        return shlex.split(line)[1:]

    for name in ("a.o", "p.prof", "p.profdata"):  # the driver looks for what it is given
        (tmp_path / name).write_bytes(b"")
    base = set(lld_args([]))
    codegen = []
    for flag in PROBED:
        added = [a for a in lld_args([flag]) if a not in base and a.startswith("-plugin-opt=")]
        unrouted = [a for a in added if not a.startswith(HANDLED_PLUGIN_OPTS)]
        if unrouted:
            codegen.append(flag)
            with pytest.raises(Refused, match="sets lld's LTO code generation"):
                analyze([*BASE, flag])
        elif flag not in ("-moutline",):  # an LTO option on AArch64 (enable-machine-outliner), refused everywhere
            analyze([*BASE, flag])  # routed, or no LTO option at all: the link is taken
    assert len(codegen) >= 15, codegen  # the probe still reaches what it was written for
    with pytest.raises(Refused, match="unknown LTO linker option"):
        analyze([*BASE, "-Wl,--load-pass-plugin=/tmp/p.so"])
