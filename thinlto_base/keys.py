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
from thinlto_base.split_dwarf import split_dwarf_file
from thinlto_base.two_step import CODEGEN_OPTION, split_codegen_level, two_step_commands

KEY_VERSION = b"gn-thinlto-backend-v1"


class BackendJob:
    """One backend command split into its parts: the paths it reads/writes and everything else (immutable).

    CODEGEN, when set, is the code generation level of a two-step backend (thinlto_base.two_step), whose
    command form is `--cg-opt-level=N CLANG …`; ARGV is the clang command without it."""

    __slots__ = ("argv", "bitcode", "codegen", "dwo", "index", "output")

    def __init__(self, argv: tuple[str, ...], bitcode: str, index: str, output: str, codegen: str = "") -> None:
        self.argv, self.bitcode, self.index, self.output, self.codegen = argv, bitcode, index, output, codegen
        self.dwo = split_dwarf_file(argv, output)



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
        the output's under split DWARF: the object names its .dwo file, which is named after the output."""
        names = {self.bitcode: "<bitcode>", f"-fthinlto-index={self.index}": "<index>"}
        if not self.dwo:
            names[self.output] = "<out>"
        flags = [names.get(a, a) for a in self.argv[1:]]
        return [f"{CODEGEN_OPTION}{self.codegen}", *flags] if self.codegen else flags

    def two_steps(self, argv: Sequence[str], module: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A two-step job's commands for ARGV (this job's command, maybe relocated), the optimized module
        written to MODULE (thinlto_base.two_step)."""
        return two_step_commands(argv, self.codegen, module)

    def split_dwarf_args(self, output_dwo: str) -> tuple[str, ...]:
        """cc1 options that keep the .dwo's name (recorded in the object) while writing it to OUTPUT_DWO, for a
        command run with another output path (a temporary file, a remote staging path)."""
        if not self.dwo:
            return ()
        return ("-Xclang", "-split-dwarf-file", "-Xclang", self.dwo, "-Xclang", "-split-dwarf-output", "-Xclang",
                output_dwo)


def compiler_identity(compiler: str) -> str:
    path = compiler
    if os.sep not in compiler:
        import shutil  # only for a bare command name

        path = shutil.which(compiler) or compiler
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}\0{st.st_size}\0{st.st_mtime_ns}"


def _file_digest(path: str) -> str:
    return file_sha256(path) if path else "-"


def _digest(parts: Sequence[str]) -> str:
    h = hashlib.sha256(KEY_VERSION)
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def content_key(job: BackendJob) -> str:
    """What the job computes, the same on every machine: flags without paths, bitcode and index contents."""
    return _digest([*job.flags_for_key(), _file_digest(job.bitcode), _file_digest(job.index)])


def cache_key(job: BackendJob, content: str | None = None) -> str:
    """The local cache key: the content key (CONTENT, when already computed) and this machine's compiler binary."""
    return _digest([compiler_identity(job.argv[0]), content if content is not None else content_key(job)])
