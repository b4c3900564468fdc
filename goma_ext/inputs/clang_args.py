"""Flag tables for reading a clang ThinLTO backend command line: which flags name input or output files."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from goma_ext.errors import GomaExtError
from thinlto_base.keys import native_cpu_flag, system_program_flag, tokenize_gnu

MAX_RESPONSE_FILE_DEPTH = 16


class Role(enum.Enum):
    """What the value of a flag is to the backend."""

    INPUT = "input"  # a file the backend reads
    PROFILE_USE = "profile-use"  # -fprofile-use=: a file, or a directory holding default.profdata
    INDEX = "index"  # -fthinlto-index=
    OUTPUT = "output"  # a file the backend writes
    VALUE = "value"  # a value that is not a path (-x ir, -mllvm -foo, ...)


class Form(enum.Enum):
    JOINED = "joined"  # -flag=value, value in the same argument
    SEPARATE = "separate"  # -flag value
    JOINED_OR_SEPARATE = "joined-or-separate"  # -ovalue or -o value


@dataclass(frozen=True)
class FlagSpec:
    spelling: str
    form: Form
    role: Role


# Spellings from clang/include/clang/Driver/Options.td (the flags that matter for an IR backend job).
FLAGS: tuple[FlagSpec, ...] = (
    FlagSpec("-fthinlto-index=", Form.JOINED, Role.INDEX),
    FlagSpec("-fprofile-sample-use=", Form.JOINED, Role.INPUT),
    FlagSpec("-fprofile-instr-use=", Form.JOINED, Role.INPUT),
    FlagSpec("-fprofile-use=", Form.JOINED, Role.PROFILE_USE),
    FlagSpec("-fprofile-remapping-file=", Form.JOINED, Role.INPUT),
    FlagSpec("-fprofile-list=", Form.JOINED, Role.INPUT),
    FlagSpec("-fmemory-profile-use=", Form.JOINED, Role.INPUT),
    FlagSpec("-fsanitize-ignorelist=", Form.JOINED, Role.INPUT),
    FlagSpec("-fsanitize-blacklist=", Form.JOINED, Role.INPUT),
    FlagSpec("-fsanitize-system-ignorelist=", Form.JOINED, Role.INPUT),
    FlagSpec("-fxray-always-instrument=", Form.JOINED, Role.INPUT),
    FlagSpec("-fxray-never-instrument=", Form.JOINED, Role.INPUT),
    FlagSpec("-fxray-attr-list=", Form.JOINED, Role.INPUT),
    FlagSpec("-fbasic-block-sections=list=", Form.JOINED, Role.INPUT),
    FlagSpec("--config=", Form.JOINED, Role.INPUT),
    FlagSpec("--config", Form.SEPARATE, Role.INPUT),
    FlagSpec("-ivfsoverlay", Form.SEPARATE, Role.INPUT),
    FlagSpec("-o", Form.JOINED_OR_SEPARATE, Role.OUTPUT),
    FlagSpec("-MF", Form.JOINED_OR_SEPARATE, Role.OUTPUT),
    FlagSpec("-fthin-link-bitcode=", Form.JOINED, Role.OUTPUT),
    FlagSpec("-x", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-target", Form.SEPARATE, Role.VALUE),
    FlagSpec("-mllvm", Form.SEPARATE, Role.VALUE),
    FlagSpec("-Xclang", Form.SEPARATE, Role.VALUE),
    FlagSpec("-MT", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-MQ", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-arch", Form.SEPARATE, Role.VALUE),
    # Compile flags a backend command may still carry; their values are not inputs of an IR backend
    # (nothing is preprocessed), but a separate value must not be taken for the bitcode input.
    FlagSpec("-isystem", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-iquote", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-idirafter", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-isysroot", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-include-pch", Form.SEPARATE, Role.VALUE),
    FlagSpec("-include", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-imacros", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-I", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-D", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-U", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-F", Form.JOINED_OR_SEPARATE, Role.VALUE),
    FlagSpec("-Xlinker", Form.SEPARATE, Role.VALUE),
    FlagSpec("-Xassembler", Form.SEPARATE, Role.VALUE),
    FlagSpec("-Xpreprocessor", Form.SEPARATE, Role.VALUE),
    FlagSpec("-resource-dir", Form.SEPARATE, Role.VALUE),
    FlagSpec("-gcc-toolchain", Form.SEPARATE, Role.VALUE),
)


_CONFIG_DIRS = ("--config-user-dir", "--config-system-dir")  # clang reads DIR/<name>.cfg: not in the action


def machine_flag(words: Sequence[str]) -> str | None:
    """The first of WORDS (response and configuration files expanded: thinlto_base.keys.expand_arguments) after
    which the object depends on the machine that compiles it: the driver would start a program of that machine
    (thinlto_base.keys.system_program_flag), read its configuration directories, or build for its CPU
    (native_cpu_flag). None when there is none."""
    return system_program_flag(words) or native_cpu_flag(words) or next(
        (w for w in words if w.startswith(_CONFIG_DIRS)), None)


@dataclass(frozen=True)
class Arg:
    """One classified argument: a flag's value with its role, or a positional input (role INPUT, flag None)."""

    role: Role
    value: str
    flag: str | None = None


def expand_response_files(argv: Sequence[str], read: Callable[[str], str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(expanded argv, response files read, in order). `read(path)` returns a response file's text."""
    files: list[str] = []

    def expand(args: Sequence[str], depth: int) -> list[str]:
        out: list[str] = []
        for arg in args:
            if not (arg.startswith("@") and len(arg) > 1):
                out.append(arg)
                continue
            if depth >= MAX_RESPONSE_FILE_DEPTH:
                raise GomaExtError(f"response files nested deeper than {MAX_RESPONSE_FILE_DEPTH} at {arg}")
            path = arg[1:]
            files.append(path)
            out.extend(expand(tokenize_gnu(read(path)), depth + 1))  # split as clang splits it: never fails
        return out

    return tuple(expand(argv, 0)), tuple(files)


def classify(args: Sequence[str]) -> list[Arg]:
    """Classify compiler arguments (argv[0] excluded, response files expanded) by the FLAGS table."""
    out: list[Arg] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            out.extend(Arg(Role.INPUT, a) for a in args[i:])
            break
        if not arg.startswith("-") or arg == "-":
            out.append(Arg(Role.INPUT, arg))
            continue
        spec = _match(arg)
        if spec is None:
            continue
        if spec.form is Form.SEPARATE or (spec.form is Form.JOINED_OR_SEPARATE and arg == spec.spelling):
            if i >= len(args):
                raise GomaExtError(f"{arg} at the end of the command line needs a value")
            out.append(Arg(spec.role, args[i], spec.spelling))
            i += 1
        else:
            out.append(Arg(spec.role, arg[len(spec.spelling) :], spec.spelling))
    return out


def _match(arg: str) -> FlagSpec | None:
    """The first matching spec; longer spellings sharing a prefix (-include-pch, -include) come first."""
    for spec in FLAGS:
        if spec.form is Form.SEPARATE:
            if arg == spec.spelling:
                return spec
        elif arg.startswith(spec.spelling):
            return spec
    return None
