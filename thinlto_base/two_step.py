"""The two-step backend form, a pure naming rule shared by the planner (which writes it) and the backend step.

lld's in-process ThinLTO sets its optimization level (--lto-O<n>) and its code generation level (--lto-CGO<c>,
by default clamp(n, 2, 3); lld/Common/Args.cpp) apart; clang's ThinLTO backend sets both from -O
(clang/lib/CodeGen/BackendUtil.cpp, runThinLTOBackend). When they differ the backend is two clang runs:

  clang -c -x ir X.o -fthinlto-index=I -O<n> … -emit-llvm -o M   (with an index: the module just before codegen)
  clang -c -x ir M -O<c> -Xclang -disable-llvm-passes … -o X.native.o

which give lld's object byte for byte (clang 19 and 22, every n and c). The planner writes such a backend as
`--cg-opt-level=<c> CLANG …` (the first command's form, without -emit-llvm).
"""

from __future__ import annotations

from collections.abc import Sequence

CODEGEN_OPTION = "--cg-opt-level="
LEVELS = ("0", "1", "2", "3")


def split_codegen_level(argv: Sequence[str]) -> tuple[str, list[str]]:
    """(code generation level or "" for a one-step command, the clang command); ValueError for a bad level."""
    args = list(argv)
    if not args or not args[0].startswith(CODEGEN_OPTION):
        return "", args
    level = args.pop(0)[len(CODEGEN_OPTION):]
    if level not in LEVELS:
        raise ValueError(f"{CODEGEN_OPTION}{level}: the code generation level is 0, 1, 2 or 3")
    return level, args


def two_step_commands(argv: Sequence[str], level: str, module: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The commands of a two-step backend whose clang command is ARGV (`… -x ir BITCODE … -o OUT …`): the
    optimization step, writing the optimized module to MODULE (without split DWARF), and the code generation
    step at LEVEL, reading it and writing OUT. The second has ARGV's flags but for the level, loop unrolling (a
    pass option) and the index (which it does not read)."""
    args = list(argv)
    out = args.index("-o") + 1
    output, args[out] = args[out], module
    # Split DWARF is a code generation matter: the optimized module is the same without it (checked byte for
    # byte) and no .dwo is written, so the first step (one remote action) names no .dwo output.
    optimize = (*(a for a in args if not a.startswith("-gsplit-dwarf")), "-emit-llvm")
    args[out] = output
    args[args.index("ir") + 1] = module
    return optimize, codegen_only([a for a in args if not a.startswith("-fthinlto-index=")], level)


def codegen_only(args: Sequence[str], level: str | int) -> tuple[str, ...]:
    """ARGS (a backend's clang command or flags) as code generation alone at LEVEL: no optimization pipeline,
    which the module already went through (the second step above; a partition of the regular-LTO module)."""
    kept = [a for a in args if not a.startswith("-O") and a != "-funroll-loops"]
    return (*kept, f"-O{level}", "-Xclang", "-disable-llvm-passes")
