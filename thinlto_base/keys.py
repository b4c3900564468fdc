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

from thinlto_base.fsutil import changed_lately, code_version, file_sha256
from thinlto_base.split_dwarf import split_dwarf_file, split_dwarf_mode
from thinlto_base.two_step import CODEGEN_OPTION, split_codegen_level, two_step_commands

# The code that composes a backend's commands and keys: a fix there (how a two-step job is split, how split DWARF
# is named) must not be served the objects the old code made, from a cache that outlives an upgrade.
KEY_VERSION = code_version(b"gn-thinlto-backend-v1", [os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
                                                      for name in ("keys.py", "two_step.py", "split_dwarf.py")])


class BackendJob:
    """One backend command split into its parts: the paths it reads/writes and everything else (immutable).

    CODEGEN, when set, is the code generation level of a two-step backend (thinlto_base.two_step), whose
    command form is `--cg-opt-level=N CLANG …`; ARGV is the clang command without it."""

    __slots__ = ("_expanded", "argv", "bitcode", "codegen", "dwo", "dwo_name", "index", "output")

    def __init__(self, argv: tuple[str, ...], bitcode: str, index: str, output: str, codegen: str = "") -> None:
        self.argv, self.bitcode, self.index, self.output, self.codegen = argv, bitcode, index, output, codegen
        self.dwo = split_dwarf_file(argv, output)
        # The split DWARF file the object names (DW_AT_dwo_name): the .dwo beside it, or under -gsplit-dwarf=single
        # the object itself, which then holds the .dwo sections.
        self.dwo_name = self.dwo or (output if split_dwarf_mode(argv) == "single" else "")
        self._expanded: tuple[list[str], list[tuple[str, str]]] | None = None  # expanded(), once

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
        if native_cpu_flag(self.words()):
            flags.append(f"<native cpu>{host_cpu()}")  # the CPU clang resolves `native` to, with its features
        return [f"{CODEGEN_OPTION}{self.codegen}", *flags] if self.codegen else flags

    def flag_files(self) -> list[tuple[str, str]]:
        """(argument, file) for each argument that names a regular file the command reads besides its bitcode and
        index: a flag's `=F` (`-fprofile-sample-use=F`, `-fbasic-block-sections=list=F`, an `-mllvm` option's),
        `-fprofile-use=DIR`'s DIR/default.profdata, a separate value (`--config F`, `-Xclang -load -Xclang F`,
        `-ivfsoverlay F`) and a response file `@F`, whose own words count too. Any value that is a file counts: a
        value that only looks like one costs a hash, never a wrong hit. Files the command writes do not (a time
        trace, an optimization record, a dependency file): they would change the key at every run."""
        skip = {self.bitcode, f"-fthinlto-index={self.index}", self.output, self.dwo}
        return file_arguments(self.argv[1:], skip, "", self.argv[0], self.expanded())

    def cacheable(self) -> bool:
        """Whether the job's object depends only on what the key covers: not when the driver would start a
        program of the machine (an assembler under -fno-integrated-as, what -B or --gcc-toolchain names)."""
        return system_program_flag(self.words()) is None

    def words(self) -> list[str]:
        """The arguments as clang reads them: response and configuration files expanded (expand_arguments)."""
        return self.expanded()[0]

    def expanded(self) -> tuple[list[str], list[tuple[str, str]]]:
        """expand_arguments of the command, read once per job (a key reads it three times)."""
        if self._expanded is None:
            self._expanded = expand_arguments(self.argv[1:], "", self.argv[0])
        return self._expanded

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


# Flags after which clang's driver starts programs of the machine (an assembler, GCC's files), or looks for them in
# directories: the object then depends on programs no key covers. Such jobs run locally, and are not cached.
_SYSTEM_PROGRAM_FLAGS = ("-fno-integrated-as", "-no-integrated-as")
_SYSTEM_PROGRAM_PREFIXES = ("-B", "--prefix", "--gcc-toolchain", "-gcc-toolchain", "--gcc-install-dir",
                            "--gcc-triple", "-ccc-install-dir")


# Flags after which clang reads its response files otherwise than expand_arguments does (Windows quoting): what
# they hold is not known here, so such jobs are treated as the ones above.
_OTHER_QUOTING = ("--rsp-quoting=windows", "--driver-mode=cl")


def system_program_flag(args: Sequence[str]) -> str | None:
    """The first of ARGS after which the driver would start a program of the machine it runs on, or find one in
    a directory, or read response files in a way expand_arguments does not; None when there is none."""
    return next((a for a in args if a in _SYSTEM_PROGRAM_FLAGS or a in _OTHER_QUOTING
                 or a.startswith(_SYSTEM_PROGRAM_PREFIXES)), None)


# `-march=native` and the like: clang resolves the name to this machine's CPU and its features.
NATIVE_CPU_FLAGS = ("-march=", "-mcpu=", "-mtune=")


def host_cpu() -> str:
    """This machine's CPU as clang's `native` sees it: the first processor's vendor, family, model, name and
    feature flags in /proc/cpuinfo, by digest ("" where there is none)."""
    if _HOST_CPU:
        return _HOST_CPU[0]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            first = f.read().split("\n\n", 1)[0]
    except OSError:
        first = ""
    keep = ("vendor_id", "cpu family", "model", "model name", "flags", "Features", "CPU implementer", "CPU part")
    lines = sorted(line for line in first.splitlines() if line.split(":", 1)[0].strip() in keep)
    _HOST_CPU.append(hashlib.sha256("\n".join(lines).encode()).hexdigest() if lines else "")
    return _HOST_CPU[0]


_HOST_CPU: list[str] = []


# Flags whose value is a file the command writes (joined `-flag=F`, or the separate value after the flag).
_WRITTEN = ("-ftime-trace=", "-foptimization-record-file=", "-fprofile-generate=", "-fprofile-instr-generate=",
            "-fcs-profile-generate=", "-fthin-link-bitcode=", "-fcrash-diagnostics-dir=", "-fproc-stat-report=",
            "-stats-file=", "-info-output-file=", "-fprofile-instrument-path=")
_WRITTEN_SEPARATE = frozenset({"-o", "-MF", "-MJ", "-split-dwarf-output", "-split-dwarf-file", "-dependency-file",
                               "-ftime-trace", "-opt-record-file", "--serialize-diagnostics",
                               "-serialize-diagnostic-file"})
_PASSED_ON = frozenset({"-Xclang", "-mllvm", "-Xlinker", "-Xassembler"})  # the next argument is another tool's
_PROFILE_DIR_FLAGS = ("-fprofile-use=", "-fprofile-instr-use=")  # a directory means its default.profdata
_CONFIG_DIR_FLAGS = ("--config-user-dir=", "--config-system-dir=")
_MAX_RESPONSE_DEPTH = 16


def expand_arguments(args: Sequence[str], cwd: str = "", compiler: str = "") -> tuple[list[str], list[tuple[str, str]]]:
    """ARGS (argv[0] excluded) as clang reads them, run in CWD (default: here) by COMPILER: each response file
    `@F` replaced by its words, nested ones too (relative to CWD); then the words of each configuration file
    (`--config=F`, `--config F`), in which a `@G` or a `--config=G` is relative to the file that names it. A
    configuration name without a slash is looked up as clang does: in the last --config-user-dir, the last
    --config-system-dir, then beside COMPILER (its link resolved unless -no-canonical-prefixes). Also (argument,
    file) for each file so read. A file that cannot be read is left out: the compiler itself reports it."""
    read: list[tuple[str, str]] = []

    def expand(words: Sequence[str], base: str | None, depth: int) -> list[str]:
        """WORDS expanded; BASE: the directory of the configuration file they come from (None: the command)."""
        out: list[str] = []
        skip = False
        for n, word in enumerate(words):
            if skip:
                skip = False
                continue
            if word.startswith("@") and len(word) > 1:
                path = word[1:] if base is None else os.path.join(base, word[1:])
                text = _read_text(os.path.join(cwd, path)) if depth < _MAX_RESPONSE_DEPTH else None
                if text is None:
                    out.append(word)  # not a file here: clang takes it as an argument, or reports it
                    continue
                read.append((word, path))
                if base is None:
                    out.extend(expand(tokenize_gnu(text), None, depth + 1))
                else:  # read as a configuration file: relative to itself
                    out.extend(configured(text, path, depth + 1))
                continue
            name = _config_name(words, n)
            if base is not None and name is not None:  # a configuration file naming another one
                skip = word == "--config"
                out.extend(config(word, name if "/" not in name else os.path.join(base, name), depth + 1))
                continue
            out.append(word)
        return out

    def configured(text: str, path: str, depth: int) -> list[str]:
        """The configuration file PATH's words (TEXT), expanded: <CFGDIR> is its directory (clang 19), and the
        files it names are relative to it."""
        here = os.path.dirname(path)
        cfgdir = os.path.abspath(os.path.join(cwd, here))
        return expand([w.replace("<CFGDIR>", cfgdir) for w in tokenize_config(text)], here, depth)

    def config(word: str, name: str, depth: int) -> list[str]:
        path = name if "/" in name else _config_search(name, words, compiler, cwd)
        text = _read_text(os.path.join(cwd, path)) if path and depth < _MAX_RESPONSE_DEPTH else None
        if text is None:
            return []
        read.append((word, path))
        return configured(text, path, depth)

    words = expand(args, None, 0)
    added: list[str] = []
    if "--no-default-config" not in words:  # clang's default files (<triple>-clang.cfg, clang++.cfg, ...): all
        for path in default_config_files(words, compiler, cwd):  # of them, whichever this driver's name takes
            added.extend(config("<default configuration>", path, 1))
    for n, word in enumerate(words):
        name = _config_name(words, n)
        if name:
            added.extend(config(word, name, 1))
    return words + added, read


def _config_name(words: Sequence[str], n: int) -> str | None:
    """The configuration file WORDS[N] names (`--config=F`, or `--config` with F next), or None."""
    word = words[n]
    if word.startswith("--config="):
        return word.removeprefix("--config=")
    return words[n + 1] if word == "--config" and n + 1 < len(words) else None


def _config_dirs(words: Sequence[str]) -> list[str]:
    """The last --config-user-dir and the last --config-system-dir of WORDS ("" for one not given), in clang's
    search order."""
    return [next((w.split("=", 1)[1] for w in reversed(words) if w.startswith(flag)), "")
            for flag in ("--config-user-dir=", "--config-system-dir=")]


def default_config_files(words: Sequence[str], compiler: str = "", cwd: str = "") -> list[str]:
    """The configuration files clang may load without being asked: every `*.cfg` in the last --config-user-dir,
    the last --config-system-dir and the compiler's directory (unresolved too under -no-canonical-prefixes).
    Which of them clang takes depends on its name and target; taking them all may over-read, never under-read."""
    dirs = _config_dirs(words)
    own = _compiler_dir(compiler) if compiler else ""
    if own:
        dirs.append(own)
        if "-no-canonical-prefixes" in words:
            dirs.append(_compiler_dir(compiler, resolve=False))
    found: list[str] = []
    for d in dict.fromkeys(d for d in dirs if d):
        found.extend(config_files(os.path.join(cwd, d, "-")))
    return found


def _config_search(name: str, words: Sequence[str], compiler: str, cwd: str) -> str:
    """Where clang finds the configuration file NAME (no slash in it), or ""."""
    dirs = _config_dirs(words)
    if compiler:
        dirs.append(_compiler_dir(compiler, resolve="-no-canonical-prefixes" not in words))
    return next((os.path.join(d, name) for d in dirs if d and os.path.isfile(os.path.join(cwd, d, name))), "")


def _compiler_dir(compiler: str, resolve: bool = True) -> str:
    """The directory of COMPILER (found on PATH when bare), its link resolved when RESOLVE; "" when not found."""
    path = _found(compiler)
    if not path:
        return ""
    return os.path.dirname(os.path.realpath(path) if resolve else os.path.abspath(path))


def _found(compiler: str) -> str | None:
    """COMPILER as a path: a bare command name found on PATH (None when it is not there)."""
    if os.sep in compiler:
        return compiler
    import shutil  # only for a bare command name

    return shutil.which(compiler)


_SPACE = " \t\r\n"


def tokenize_gnu(text: str) -> list[str]:
    """TEXT split as clang splits a response file (llvm::cl::TokenizeGNUCommandLine): words between whitespace;
    a backslash takes the next character as it is, in quotes too; a quote runs to the same quote, or to the end
    of the text. Never fails: clang reads any file."""
    out: list[str] = []
    token: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            token.append(text[i + 1])
            i += 2
            continue
        if c in "\"'":
            i += 1
            while i < n and text[i] != c:
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                token.append(text[i])
                i += 1
            i += 1
            continue
        if c in _SPACE:
            if token:
                out.append("".join(token))
                token = []
        else:
            token.append(c)
        i += 1
    if token:
        out.append("".join(token))
    return [w.split("\0", 1)[0] for w in out] if "\0" in text else out  # clang's words are C strings


def tokenize_config(text: str) -> list[str]:
    """TEXT split as clang splits a configuration file (llvm::cl::tokenizeConfigFile): whitespace is skipped; a
    line that then starts with `#` is a comment up to the next `\\n`; otherwise the line runs to a `\\n`, in which
    a backslash takes the next character along (before a line end it joins the lines), and is split as a response
    file is."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in _SPACE:
            i += 1
            continue
        if text[i] == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        start, line = i, []
        while i < n:
            if text[i] == "\\":
                if i + 1 < n:
                    i += 1
                    if text[i] == "\n" or (text[i] == "\r" and i + 1 < n and text[i + 1] == "\n"):
                        line.append(text[start:i - 1])
                        if text[i] == "\r":
                            i += 1
                        start = i + 1
            elif text[i] == "\n":
                break
            i += 1
        line.append(text[start:i])
        out.extend(tokenize_gnu("".join(line)))
    return out


def native_cpu_flag(words: Sequence[str]) -> str | None:
    """The first of WORDS that builds for the compiling machine's CPU: -march, -mcpu or -mtune naming `native`
    (with extensions too, `-mcpu=native+crc`); None when there is none."""
    return next((w for w in words if w.startswith(NATIVE_CPU_FLAGS) and w.split("=", 1)[1].split("+")[0] == "native"),
                None)


def file_arguments(args: Sequence[str], skip: frozenset[str] | set[str] = frozenset(), cwd: str = "",
                   compiler: str = "", expanded: tuple[list[str], list[tuple[str, str]]] | None = None
                   ) -> list[tuple[str, str]]:
    """(argument, file) for each of ARGS (a compiler's arguments, argv[0] excluded; response and configuration
    files expanded: expand_arguments, or EXPANDED when given) but SKIP that names a regular file COMPILER, run in
    CWD (default: here), reads: BackendJob.flag_files, and goma-ext's remote inputs."""
    words, read = expanded if expanded is not None else expand_arguments(args, cwd, compiler)
    out = list(read)

    def isfile(path: str) -> bool:
        return os.path.isfile(os.path.join(cwd, path))

    for i, arg in enumerate(words):
        if arg in skip or not arg or arg.startswith("@"):
            continue
        owner = words[i - 1] if i else ""
        if owner in _PASSED_ON and i >= 2 and words[i - 2] not in _PASSED_ON:
            owner = words[i - 2]  # -Xclang -split-dwarf-output -Xclang F: F is the value of -split-dwarf-output
        if arg.startswith("-"):
            if "=" not in arg or arg.startswith(_WRITTEN) or arg.startswith("--config="):
                continue  # a configuration file is in OUT already, where clang finds it
            value = arg.split("=", 1)[1].removeprefix("list=")
            if arg.startswith(_PROFILE_DIR_FLAGS) and os.path.isdir(os.path.join(cwd, value)):
                value = os.path.join(value, "default.profdata")
            elif arg.startswith(_CONFIG_DIR_FLAGS):  # clang reads DIR/<its name>.cfg: every one there counts
                out.extend((arg, path) for path in config_files(os.path.join(cwd, value, "-")))
                continue
        elif owner in _WRITTEN_SEPARATE or owner.startswith(_WRITTEN) or owner == "--config":
            continue
        else:
            value = arg
        if value and isfile(value):
            out.append((arg, value))
    return out


def _read_text(path: str) -> str | None:
    """The text of the response or configuration file PATH as llvm::cl reads it (a UTF-8 byte order mark dropped,
    UTF-16 with one decoded, line ends untouched); None when it is not a file that can be read."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "surrogatepass")
    return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "surrogateescape")


def compiler_identity(compiler: str) -> str:
    """This machine's compiler (or linker) as the local cache keys it: the binary's path, size and mtime, and those
    of the shared libraries it loads. Debian's clang is a small driver whose code generator is libLLVM and
    libclang-cpp: an update of those alone must be a new compiler. (Not the change time: a cache directory shared
    by machines with the same packages would never hit, since dpkg and tar keep mtimes, never ctimes.)"""
    real = os.path.realpath(_found(compiler) or compiler)
    try:
        return "\0".join(_stat_identity(p) for p in (real, *_own_libraries(real), *config_files(real)))
    except FileNotFoundError:  # a library upgraded under a long-lived process (the step server): look again
        _LIBRARIES.clear()
        return "\0".join(_stat_identity(p) for p in (real, *_own_libraries(real), *config_files(real)))


def config_files(real: str) -> list[str]:
    """The clang configuration files beside the compiler REAL (resolved): clang reads `<triple>-clang.cfg`,
    `clang.cfg` and the like from its own directory and adds their flags to every command."""
    bindir = os.path.dirname(real)
    try:
        names = os.listdir(bindir)
    except OSError:
        return []
    return sorted(os.path.join(bindir, n) for n in names if n.endswith(".cfg"))


def _stat_identity(path: str) -> str:
    st = os.stat(path)
    return f"{path}\0{st.st_size}\0{st.st_mtime_ns}"


_LIBRARIES: dict[tuple[str, int, int, int], tuple[str, ...]] = {}  # by the binary's stat identity
# The C and C++ runtime: what every program loads, and no compiler's code generation depends on.
_RUNTIME = ("libc.so.", "libm.so.", "libstdc++.so.", "libgcc_s.so.", "libpthread.so.", "libdl.so.", "librt.so.",
            "ld-linux")
_TRIPLES = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}


def system_library_dirs(triple: str) -> list[str]:
    """Where the dynamic loader looks for a library after the object's run paths (and ld.so.cache): the multiarch
    directories of TRIPLE (none when it is ""), then the classic ones."""
    return [*((f"/lib/{triple}", f"/usr/lib/{triple}") if triple else ()), "/lib64", "/usr/lib64", "/lib", "/usr/lib"]


LD_SO_CACHE = "/etc/ld.so.cache"
_CACHE_MAGIC = b"glibc-ld.so.cache1.1"
_CACHE_HEADER = "=20sIIB3sI12s"  # magic+version, nlibs, len_strings, flags, pad, extension, unused
_CACHE_ENTRY = "=iIIIQ"  # flags, key, value, osversion, hwcap


def ld_cache(path: str = LD_SO_CACHE) -> dict[str, list[str]]:
    """soname -> paths, read from glibc's ld.so.cache (the "glibc-ld.so.cache1.1" layout of glibc's dl-cache.h:
    a 48-byte header, then 24-byte entries whose key and value are offsets of NUL-terminated strings from the
    header), as `ldconfig -p` lists it but without running a process: the directories of /etc/ld.so.conf
    (/usr/local/lib). Every architecture; callers check the ELF."""
    import struct

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    header, entry = struct.Struct(_CACHE_HEADER), struct.Struct(_CACHE_ENTRY)
    base = data.find(_CACHE_MAGIC)
    if base < 0 or len(data) < base + header.size:
        return {}
    nlibs = header.unpack_from(data, base)[1]
    found: dict[str, list[str]] = {}

    def text(offset: int) -> str:
        at = base + offset
        end = data.find(b"\0", at)
        return data[at:end].decode(errors="replace") if 0 <= at < end else ""

    for i in range(nlibs):
        at = base + header.size + i * entry.size
        if at + entry.size > len(data):
            break
        _flags, key, value = entry.unpack_from(data, at)[:3]
        name, lib = text(key), text(value)
        if name and lib:
            found.setdefault(name, []).append(lib)
    return found


def _elf_kind(path: str) -> bytes:
    """PATH's ELF class, byte order and machine (b"" for anything else): which libraries a binary can load."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return b""
    return head[4:6] + head[18:20] if head[:4] == b"\x7fELF" and len(head) == 20 else b""


def _own_libraries(real: str) -> tuple[str, ...]:
    """The shared libraries REAL loads, and theirs in turn, but the C and C++ runtime: found as the loader finds
    them, in DT_RUNPATH (or DT_RPATH) directories, then the system's (Debian's libLLVM is in /usr/lib/TRIPLE). Each
    by the name it was found under (`libzstd.so.1`, a link to the versioned file an upgrade replaces)."""
    st = os.stat(real)
    memo_key = (real, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = _LIBRARIES.get(memo_key)
    if known is not None:
        return known
    system = system_library_dirs(_TRIPLES.get(os.uname().machine, ""))
    cache: dict[str, list[str]] | None = None  # ld.so.cache, read when a run path does not find a library
    kind = _elf_kind(real)
    found: dict[str, str] = {}  # real path -> the name it was found under
    todo = [real]
    while todo:
        binary = todo.pop()
        needed, paths = _dynamic(binary)
        origin = os.path.dirname(binary)
        dirs = [p.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for p in paths]
        for name in needed:
            if name.startswith(_RUNTIME):
                continue
            lib = next((os.path.normpath(os.path.join(d, name)) for d in dirs if os.path.isfile(os.path.join(d, name))),
                       None)
            if lib is None:  # as ld.so: the cache (ld.so.conf's directories), then the default ones
                if cache is None:
                    cache = ld_cache()
                candidates = [*cache.get(name, ()), *(os.path.join(d, name) for d in system)]
                lib = next((os.path.normpath(c) for c in candidates if os.path.isfile(c) and _elf_kind(c) == kind),
                           None)
            resolved = os.path.realpath(lib) if lib is not None else None
            if lib is not None and resolved is not None and resolved not in found and resolved != real:
                found[resolved] = lib
                todo.append(resolved)
    libraries = tuple(sorted(found.values()))
    _LIBRARIES[memo_key] = libraries
    return libraries


def _dynamic(path: str) -> tuple[list[str], list[str]]:
    """(DT_NEEDED names, DT_RUNPATH or else DT_RPATH directories) of a little-endian ELF64 file; ([], []) for
    anything else (a script, a wrapper: then only the file itself is keyed). Read with struct alone: the backend
    step starts a Python per edge (without the step server), and thinlto_base.elf's imports cost ~90 ms."""
    import struct

    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return [], []
            (phoff,) = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz
            segments = [struct.unpack_from("<IIQQQQ", table, i * phentsize) for i in range(phnum)]
            dynamic = next((seg for seg in segments if seg[0] == 2), None)  # PT_DYNAMIC
            if dynamic is None:
                return [], []
            f.seek(dynamic[2])
            raw = f.read(min(dynamic[5], 1 << 20))
            entries = [struct.unpack_from("<qQ", raw, i) for i in range(0, len(raw) - 15, 16)]
            tags = dict(entries)
            strtab = tags.get(5)  # DT_STRTAB, a virtual address
            load = next((seg for seg in segments if seg[0] == 1 and strtab is not None
                         and seg[3] <= strtab < seg[3] + seg[5]), None)  # the PT_LOAD holding it
            if strtab is None or load is None:
                return [], []
            base = load[2] + strtab - load[3]

            def text(offset: int) -> str:  # one string, read where it is (libLLVM's table is megabytes)
                f.seek(base + offset)
                data = f.read(4096)
                end = data.find(b"\0")
                return data[:end if end >= 0 else len(data)].decode(errors="surrogateescape")

            needed = [text(v) for t, v in entries if t == 1]  # DT_NEEDED
            runpath = ([text(v) for t, v in entries if t == 29]  # DT_RUNPATH, else DT_RPATH
                       or [text(v) for t, v in entries if t == 15])
    except (OSError, struct.error):
        return [], []
    return needed, [d for p in runpath for d in p.split(":") if d]


def _file_digest(path: str) -> str:
    return file_sha256(path) if path else "-"


def digest(parts: Sequence[str], version: bytes = KEY_VERSION) -> str:
    """The key of PARTS under VERSION: the local cache's (this code's KEY_VERSION), and DTLTO's (its own)."""
    h = hashlib.sha256(version)
    for part in parts:
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def content_key(job: BackendJob) -> str:
    """What the job computes, the same on every machine: flags without paths, bitcode and index contents, and the
    contents of the files its flags name (a sample profile, a basic-block sections list: flag_files)."""
    return digest([*job.flags_for_key(), _file_digest(job.bitcode), _file_digest(job.index), *flag_file_parts(job)])


def flag_file_parts(job: BackendJob) -> list[str]:
    """The key's parts for the files JOB's flags name: each flag with its file's content digest (remembered by the
    file's stat identity: every backend of a link names the same sample profile)."""
    return [f"{flag}\0{_remembered_digest(path)}" for flag, path in job.flag_files()]


_FLAG_FILES: dict[tuple[str, int, int, int, int, int], str] = {}


def _remembered_digest(path: str) -> str:
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = _FLAG_FILES.get(key)
    if known is None:
        known = _file_digest(path)
        if not changed_lately(st):
            if len(_FLAG_FILES) > 10_000:
                _FLAG_FILES.clear()
            _FLAG_FILES[key] = known
    return known


def cache_key(job: BackendJob, content: str | None = None) -> str:
    """The local cache key: the content key (CONTENT, when already computed) and this machine's compiler binary."""
    return digest([compiler_identity(job.argv[0]), content if content is not None else content_key(job)])
