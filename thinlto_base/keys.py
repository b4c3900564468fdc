"""Backend jobs and their cache keys (the store that keeps what they computed: thinlto_base.store).

The key covers everything the native object depends on: the compiler's identity, the backend flags, the
bitcode's content and the index's content (which names every module the backend imports from together with
its module hash, so an imported module's change changes the key).

The backend step imports this once per backend edge (the DTLTO distributor once per link), and a cache hit
costs less than importing pathlib, dataclasses or enum: the records here are plain slotted classes and the
module needs only os and hashlib.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

from thinlto_base.fsutil import file_sha256
from thinlto_base.split_dwarf import split_dwarf_file, split_dwarf_mode
from thinlto_base.two_step import CODEGEN_OPTION, split_codegen_level, two_step_commands

KEY_VERSION = b"gn-thinlto-backend-v1"


class BackendJob:
    """One backend command split into its parts: the paths it reads/writes and everything else (immutable).

    CODEGEN, when set, is the code generation level of a two-step backend (thinlto_base.two_step), whose
    command form is `--cg-opt-level=N CLANG …`; ARGV is the clang command without it."""

    __slots__ = ("argv", "bitcode", "codegen", "dwo", "dwo_name", "index", "output")

    def __init__(self, argv: tuple[str, ...], bitcode: str, index: str, output: str, codegen: str = "") -> None:
        self.argv, self.bitcode, self.index, self.output, self.codegen = argv, bitcode, index, output, codegen
        self.dwo = split_dwarf_file(argv, output)
        # The split DWARF file the object names (DW_AT_dwo_name): the .dwo beside it, or under -gsplit-dwarf=single
        # the object itself, which then holds the .dwo sections.
        self.dwo_name = self.dwo or (output if split_dwarf_mode(argv) == "single" else "")



    def __eq__(self, other: object) -> bool:
        return isinstance(other, BackendJob) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"BackendJob(argv={self.argv!r}, bitcode={self.bitcode!r}, index={self.index!r}, "
                f"output={self.output!r}, codegen={self.codegen!r})")

    def _fields(self) -> tuple[object, ...]:
        return (self.argv, self.bitcode, self.index, self.output, self.codegen)

    @classmethod
    def parse(cls, argv: Sequence[str]) -> BackendJob:
        codegen, args = split_codegen_level(argv)
        try:
            output = args[args.index("-o") + 1]
            bitcode = args[args.index("ir") + 1]
        except (ValueError, IndexError):
            raise ValueError(f"not a backend command (need '-x ir BITCODE' and '-o OUT'): {' '.join(args)}") from None
        index = next((a.split("=", 1)[1] for a in args if a.startswith("-fthinlto-index=")), "")
        return cls(tuple(args), bitcode, index, output, codegen)

    def relocated(self, index: str, output: str) -> tuple[str, ...]:
        """The same command reading its index from INDEX and writing OUTPUT (the bitcode path is kept)."""
        names = {self.output: output}
        if self.index:
            names[f"-fthinlto-index={self.index}"] = f"-fthinlto-index={index}"
        return tuple(names.get(a, a) for a in self.argv)

    def flags_for_key(self) -> list[str]:
        """The command with its three paths replaced by placeholders (paths do not affect the output), except
        the output's under split DWARF: the object names its .dwo file (or itself, under -gsplit-dwarf=single),
        which is named after the output."""
        names = {self.bitcode: "<bitcode>", f"-fthinlto-index={self.index}": "<index>"}
        if not self.dwo_name:
            names[self.output] = "<out>"
        flags = [names.get(a, a) for a in self.argv[1:]]
        return [f"{CODEGEN_OPTION}{self.codegen}", *flags] if self.codegen else flags

    def flag_files(self) -> list[tuple[str, str]]:
        """(flag, file) for each flag whose value names a regular file (`-fprofile-sample-use=F`,
        `-fbasic-block-sections=list=F`, an `-mllvm` option's `=F`, a response file `@F`): what the command reads
        besides its bitcode and index. Any value that is a file counts; a value that only looks like one costs a
        hash, never a wrong hit."""
        out = []
        skip = {self.bitcode, f"-fthinlto-index={self.index}", self.output}
        for arg in self.argv[1:]:
            if arg in skip:
                continue
            if arg.startswith("@"):
                value = arg[1:]
            elif arg.startswith("-") and "=" in arg:
                value = arg.split("=", 1)[1]
                value = value.removeprefix("list=")
            else:
                continue
            if value and os.path.isfile(value):
                out.append((arg, value))
        return out

    def two_steps(self, argv: Sequence[str], module: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A two-step job's commands for ARGV (this job's command, maybe relocated), the optimized module
        written to MODULE (thinlto_base.two_step)."""
        return two_step_commands(argv, self.codegen, module)

    def split_dwarf_args(self, output_dwo: str) -> tuple[str, ...]:
        """cc1 options that keep the .dwo's name (recorded in the object) while writing it to OUTPUT_DWO, for a
        command run with another output path (a temporary file, a remote staging path). Under -gsplit-dwarf=single
        the object names itself: its final path, not the temporary one it is written to."""
        if not self.dwo:
            return ("-Xclang", "-split-dwarf-file", "-Xclang", self.dwo_name) if self.dwo_name else ()
        return ("-Xclang", "-split-dwarf-file", "-Xclang", self.dwo, "-Xclang", "-split-dwarf-output", "-Xclang",
                output_dwo)


def compiler_identity(compiler: str) -> str:
    """This machine's compiler (or linker) as the local cache keys it: the binary's path and stat identity, and
    those of the shared libraries it loads from its own installation. Debian's clang is a small driver whose code
    generator is libLLVM and libclang-cpp: an update of those alone must be a new compiler."""
    path = compiler
    if os.sep not in compiler:
        import shutil  # only for a bare command name

        path = shutil.which(compiler) or compiler
    real = os.path.realpath(path)
    return "\0".join(_stat_identity(p) for p in (real, *_own_libraries(real)))


def _stat_identity(path: str) -> str:
    st = os.stat(path)
    return f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"


_LIBRARIES: dict[tuple[str, int, int, int], tuple[str, ...]] = {}  # by the binary's stat identity
# The C and C++ runtime: what every program loads, and no compiler's code generation depends on.
_RUNTIME = ("libc.so.", "libm.so.", "libstdc++.so.", "libgcc_s.so.", "libpthread.so.", "libdl.so.", "librt.so.",
            "ld-linux")
_TRIPLES = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}


def _own_libraries(real: str) -> tuple[str, ...]:
    """The shared libraries REAL loads, and theirs in turn, but the C and C++ runtime: found as the loader finds
    them, in DT_RUNPATH (or DT_RPATH) directories, then the system's (Debian's libLLVM is in /usr/lib/TRIPLE)."""
    st = os.stat(real)
    memo_key = (real, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = _LIBRARIES.get(memo_key)
    if known is not None:
        return known
    triple = _TRIPLES.get(os.uname().machine)
    system = [*((f"/lib/{triple}", f"/usr/lib/{triple}") if triple else ()), "/lib64", "/usr/lib64", "/lib", "/usr/lib"]
    found: list[str] = []
    todo = [real]
    while todo:
        binary = todo.pop()
        needed, paths = _dynamic(binary)
        origin = os.path.dirname(binary)
        dirs = [p.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for p in paths] + system
        for name in needed:
            if name.startswith(_RUNTIME):
                continue
            lib = next((os.path.realpath(os.path.join(d, name)) for d in dirs if os.path.isfile(os.path.join(d, name))),
                       None)
            if lib is not None and lib not in found and lib != real:
                found.append(lib)
                todo.append(lib)
    libraries = tuple(sorted(found))
    _LIBRARIES[memo_key] = libraries
    return libraries


def _dynamic(path: str) -> tuple[list[str], list[str]]:
    """(DT_NEEDED names, DT_RUNPATH or else DT_RPATH directories) of an ELF file; ([], []) for anything else (a
    script, a wrapper: then only the file itself is keyed)."""
    from thinlto_base.elf import ElfFile, ElfFormatError
    from thinlto_base.elf import string as elf_string
    from thinlto_base.elf_layout import DynamicTag

    try:
        with ElfFile.open(path) as elf:
            segments = elf.segments()
            entries = elf.dynamic(segments)
            tags = dict(entries)
            if DynamicTag.STRTAB not in tags:
                return [], []
            table = elf.at_address(segments, tags[DynamicTag.STRTAB], tags.get(DynamicTag.STRSZ, 0), "DT_STRTAB")
    except (OSError, ElfFormatError):
        return [], []
    needed = [elf_string(table, v) for t, v in entries if t == DynamicTag.NEEDED]
    runpath = ([elf_string(table, v) for t, v in entries if t == DynamicTag.RUNPATH]
               or [elf_string(table, v) for t, v in entries if t == DynamicTag.RPATH])
    return needed, [d for p in runpath for d in p.split(":") if d]


def _file_digest(path: str) -> str:
    return file_sha256(path) if path else "-"


def _digest(parts: Sequence[str]) -> str:
    h = hashlib.sha256(KEY_VERSION)
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def content_key(job: BackendJob) -> str:
    """What the job computes, the same on every machine: flags without paths, bitcode and index contents, and the
    contents of the files its flags name (a sample profile, a basic-block sections list: flag_files)."""
    return _digest([*job.flags_for_key(), _file_digest(job.bitcode), _file_digest(job.index), *flag_file_parts(job)])


def flag_file_parts(job: BackendJob) -> list[str]:
    """The key's parts for the files JOB's flags name: each flag with its file's content digest."""
    return [f"{flag}\0{_file_digest(path)}" for flag, path in job.flag_files()]


def cache_key(job: BackendJob, content: str | None = None) -> str:
    """The local cache key: the content key (CONTENT, when already computed) and this machine's compiler binary."""
    return _digest([compiler_identity(job.argv[0]), content if content is not None else content_key(job)])
