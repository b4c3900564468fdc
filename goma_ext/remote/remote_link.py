"""lld run remotely: the final links' linker under `remote.download: minimal`.

gn-thinlto puts `-B gn-thinlto/remote-link/` on every final link's clang, so the driver runs the `ld.lld` shim
there with lld's arguments; the shim runs this script: `python -S remote_link.py [settings] -- LLD ARGS…`. The
link's inputs are the backends' native objects, most of them stand-ins for objects kept in the CAS
(thinlto_base.remote_stub): they go into the input root by digest, every other file the link reads (objects,
the C runtime, libraries, linker scripts) is uploaded, and lld itself travels as a toolchain (`toolchain:
inputs`). Only the linked binary comes down. Files outside the exec root (the C runtime under /usr/lib) are
placed under ABS_DIR in the input root at their absolute paths, and lld gets ABS_DIR as its --chroot: every
absolute path it opens (an argument, a name in libc.so's GROUP) is read there, never from the worker's disk.
lld's arguments travel in a response file of the input root (RSP_NAME).

Whatever cannot be linked remotely (an argument this does not understand, a file it cannot place, the server
away, a failing remote link) is linked here, by the real lld next to the clang that started us, after
`goma-ext fetch`'s materialize gave every stand-in its bytes: one warning line, never a wrong binary.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:  # run as a script by the shim
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

# The imports below come after the script-mode path set-up above.
import argparse
import contextlib
import posixpath
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from goma_ext.errors import GomaExtError
from goma_ext.remote import records, stats
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.names import LINK_STATS_LOG, REAL_LD_ENV
from thinlto_base import remote_stub

ABS_DIR = ".gn-thinlto-abs"  # exec-root-relative home of the link's files that lie outside the exec root
UPLOAD_LOCK = ".goma_ext_link_upload.lock"  # in the build directory (_upload_turn)
RSP_NAME = ".goma_ext_link.rsp"  # the remote lld's arguments, in its working directory
WARNING = "goma-ext: warning:"
ELF_MAGIC = b"\x7fELF"
AR_MAGIC, THIN_MAGIC = b"!<arch>\n", b"!<thin>\n"
BITCODE_MAGICS = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")

# lld (ELF) options whose value is the next argument when not written `--opt=value`.
SEPARATE = frozenset({
    "-o", "--output", "-L", "--library-path", "-l", "--library", "-m", "-z", "-e", "--entry", "-T", "--script",
    "-u", "--undefined", "-y", "--trace-symbol", "-h", "-soname", "--soname", "-rpath", "--rpath", "-R",
    "-dynamic-linker", "--dynamic-linker", "-I", "--version-script", "--dynamic-list", "--wrap", "--defsym",
    "-Map", "--Map", "--sysroot", "-plugin", "--plugin", "-plugin-opt", "--plugin-opt", "-mllvm", "--mllvm",
    "--hash-style", "--symbol-ordering-file", "--call-graph-ordering-file", "--just-symbols",
    "--retain-symbols-file", "--export-dynamic-symbol", "--export-dynamic-symbol-list", "--sort-section",
    "--exclude-libs", "--image-base", "-Ttext", "-Tdata", "-Tbss", "-Ttext-segment", "--undefined-glob",
    "--require-defined", "-F", "--filter", "-f", "--auxiliary", "--dependency-file", "--why-extract",
    "--reproduce", "--unresolved-symbols", "--error-limit", "--format", "-b", "--orphan-handling",
    "--lto-sample-profile", "--lto-obj-path", "--thinlto-cache-dir", "--thinlto-cache-policy",
    "--print-archive-stats", "--package-metadata", "--target2", "--compress-debug-sections", "--default-script",
    "--remap-inputs-file", "--irpgo-profile", "--lto-cs-profile-file", "--chroot", "--remap-inputs",
    "--thinlto-prefix-replace", "--thinlto-object-suffix-replace",
})
SCRIPTS = frozenset({"-T", "--script", "--default-script"})  # linker scripts: what they name is read too
# Files lld reads without looking for other files in them.
FILE_VALUES = frozenset({"--version-script", "--dynamic-list", "--symbol-ordering-file", "--call-graph-ordering-file",
                         "--just-symbols", "--retain-symbols-file", "--export-dynamic-symbol-list",
                         "--lto-sample-profile", "--irpgo-profile", "--lto-cs-profile-file"})
# Options whose value may be an absolute path that names no file lld reads here.
NOT_FILES = frozenset({"-dynamic-linker", "--dynamic-linker", "-I", "-rpath", "--rpath", "-R", "-soname", "--soname",
                       "-h", "-plugin", "--plugin", "-plugin-opt", "--plugin-opt", "-mllvm", "--mllvm",
                       "--thinlto-cache-dir", "--package-metadata", "--thinlto-prefix-replace"})
OUTPUTS = frozenset({"-o", "--output", "-Map", "--Map", "--dependency-file"})
LISTINGS = frozenset({"-Map", "--Map", "--dependency-file"})  # outputs that name the link's inputs
# Files lld would write that the action would not bring back, or modes that change what a link is.
REFUSED = frozenset({"--reproduce", "--why-extract", "--print-archive-stats", "--lto-obj-path", "--save-temps",
                     "--thinlto-index-only", "-r", "--relocatable", "-i", "--print-map", "-M", "-v", "--version"})
REFUSED = REFUSED | {"--remap-inputs", "--remap-inputs-file"}  # they rename what lld opens
STATIC = frozenset({"-Bstatic", "--Bstatic", "-static", "--static", "-dn", "-non_shared"})
DYNAMIC = frozenset({"-Bdynamic", "--Bdynamic", "-dy", "-call_shared"})
KNOWN = SEPARATE | SCRIPTS | FILE_VALUES | OUTPUTS | REFUSED | NOT_FILES | STATIC | DYNAMIC | {
    "--push-state", "--pop-state", "--chroot"}


class Unlinkable(GomaExtError):
    """This link cannot run remotely as it is; it runs here (one line: why)."""


@dataclass
class LinkFiles:
    """What one lld command reads and writes, and its arguments as the remote lld gets them."""

    work: str  # the working directory, exec-root-relative
    reads: dict[str, str] = field(default_factory=dict)  # exec-root-relative tree path -> local path to read
    outputs: list[str] = field(default_factory=list)  # relative to the working directory
    args: list[str] = field(default_factory=list)
    # a path as the remote lld is given it -> as this link's arguments give it (search directories and relative
    # paths outside the exec root, which the remote lld finds under ABS_DIR: see _Placer)
    respelled: dict[str, str] = field(default_factory=dict)
    listings: list[str] = field(default_factory=list)  # outputs that name inputs: -Map, --dependency-file

    def place(self, value: str, remote: str) -> str:
        """REMOTE, the remote lld's spelling of VALUE, remembered when it differs."""
        if remote != value:
            self.respelled[remote] = value
        return remote

    def respell(self, data: bytes) -> bytes:
        """DATA (a map file, a dependency file, lld's messages) with each path spelled as this link's arguments spell
        it, so that what lld writes names what a local link names (longest spelling first: a directory's does not
        cut into a longer one's)."""
        for remote in sorted(self.respelled, key=len, reverse=True):
            data = data.replace(os.fsencode(remote), os.fsencode(self.respelled[remote]))
        return data


def gnu_split(text: str) -> list[str]:
    """Arguments of a response file as lld reads them (LLVM's TokenizeGNUCommandLine): whitespace separates,
    a backslash takes the next character as it is, inside quotes ('…' or "…") too."""
    out: list[str] = []
    token: list[str] = []
    started = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            if started:
                out.append("".join(token))
                token, started = [], False
        elif c == "\\" and i + 1 < n:
            i += 1
            token.append(text[i])
            started = True
        elif c in "'\"":
            started = True
            i += 1
            while i < n and text[i] != c:
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                token.append(text[i])
                i += 1
        else:
            token.append(c)
            started = True
        i += 1
    if started:
        out.append("".join(token))
    return out


def gnu_quote(arg: str) -> str:
    """ARG as gnu_split reads it back (for the response file the remote lld gets)."""
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def expand_response_files(args: Sequence[str], cwd: Path, depth: int = 0) -> list[str]:
    """ARGS with every @FILE replaced by its arguments (GNU quoting, as lld reads them)."""
    out: list[str] = []
    for a in args:
        if a.startswith("@") and len(a) > 1:
            if depth > 10:
                raise Unlinkable("response files nest more than 10 deep")
            try:
                text = (cwd / a[1:]).read_bytes().decode()
            except (OSError, UnicodeDecodeError) as e:
                raise Unlinkable(f"response file {a[1:]}: {e}") from e
            out += expand_response_files(gnu_split(text), cwd, depth + 1)
        else:
            out.append(a)
    return out


def _script_tokens(text: str) -> list[str]:
    """A linker script's tokens: comments (/* … */ and # to the end of the line) dropped, parentheses and commas
    on their own, quotes removed."""
    import re

    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"#[^\n]*", " ", text)
    return [t.strip('"') for t in re.findall(r'"[^"]*"|[(),]|[^\s(),]+', text)]


class _Placer:
    """Where each file lies in the input root, and the argument that names it there (from the working directory).

    The remote lld gets `--chroot` ABS_DIR: it reads every absolute path it opens (an argument, a name in a linker
    script) below ABS_DIR, where the file that path names here is placed. Absolute paths stay as they are in the
    arguments, so what lld records of them (a DT_NEEDED without DT_SONAME, a map file) is what it records here."""

    def __init__(self, cwd: Path, exec_root: Path) -> None:
        from goma_ext.remote.client import exec_relative

        self.cwd = cwd
        self.work = exec_relative(exec_root, cwd)  # InputError when the link's directory is outside it

    def inside(self, path: str) -> bool:
        """Whether relative PATH stays below the exec root."""
        inside = posixpath.normpath(posixpath.join(self.work, path))
        return not posixpath.isabs(path) and inside not in (".", "..") and not inside.startswith("../")

    def tree_path(self, path: str) -> str:
        """PATH's place in the input root: below the exec root where it lies there, else under ABS_DIR."""
        if self.inside(path):
            return posixpath.normpath(posixpath.join(self.work, path))
        full = posixpath.normpath(posixpath.join(self.cwd.as_posix(), path))
        return f"{ABS_DIR}{full}"

    def arg(self, path: str) -> str:
        """How the remote lld names PATH: absolute and below-the-root paths as they are (absolute ones are read
        under --chroot); a relative path that leaves the exec root as its place under ABS_DIR."""
        if posixpath.isabs(path) or self.inside(path):
            return path
        return posixpath.relpath(self.tree_path(path), self.work)

    def dir_arg(self, path: str) -> str:
        """A search directory (-L, --sysroot): lld looks for files in it without --chroot, so an absolute one
        becomes its place under ABS_DIR, relative to the working directory."""
        if self.inside(path) or path in (".", ""):
            return path
        return posixpath.relpath(self.tree_path(path), self.work)

    def abs_arg(self) -> str:
        return posixpath.relpath(ABS_DIR, self.work)


def _is_under(path: Path, root: Path) -> bool:
    """lld's isUnderSysroot: PATH or one of its parents is ROOT (the same file)."""
    try:
        target = os.stat(root)
    except OSError:
        return False
    for p in (path, *path.parents):
        try:
            st = os.stat(p)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
            return True
    return False


class _Resolver:
    """Finds what lld reads, as lld does: files named, libraries by -l search, what linker scripts name."""

    def __init__(self, placer: _Placer) -> None:
        self.placer = placer
        self.cwd = placer.cwd
        self.dirs: list[str] = []
        self.static = False
        self.sysroot = ""
        self.files = LinkFiles(placer.work)

    def _local(self, path: str) -> Path:
        return self.cwd / path

    def _dir(self, d: str) -> str:
        """A search directory as lld resolves it: `=DIR` is below the sysroot."""
        return f"{self.sysroot}/{d[1:]}" if d.startswith("=") and self.sysroot else d.lstrip("=")

    def add(self, path: str) -> Path:
        """Place PATH (as lld opens it, relative to the working directory) in the input root, unread."""
        local = self._local(path)
        if not local.is_file():
            raise Unlinkable(f"input {path} is not a file")
        self.files.reads[self.placer.tree_path(path)] = str(local)
        return local

    def read(self, path: str, depth: int = 0) -> None:
        """Add PATH and what it names (a thin archive's members, a linker script's files)."""
        local = self.add(path)
        with open(local, "rb") as f:
            head = f.read(8)
        if head.startswith(ELF_MAGIC):
            if not posixpath.isabs(path) and not self.placer.inside(path) and _unnamed_shared(local):
                raise Unlinkable(f"{path}: a shared library without DT_SONAME outside the exec root (its path "
                                 "goes into the binary)")
            return
        if head.startswith((AR_MAGIC, *BITCODE_MAGICS)) or remote_stub.read_stub(local) is not None:
            return
        if head == THIN_MAGIC:
            for member in thin_members(str(local), local.read_bytes()):
                if posixpath.isabs(member):  # the archive reader opens members itself, without --chroot
                    raise Unlinkable(f"thin archive {path} names {member} by its absolute path")
                self.files.reads[self.placer.tree_path(os.path.relpath(member, self.cwd))] = member
            return
        self._script(path, depth)

    def _script(self, path: str, depth: int) -> None:
        if depth > 10:
            raise Unlinkable(f"linker script {path}: scripts include each other more than 10 deep")
        try:
            tokens = _script_tokens(self._local(path).read_text())
        except (OSError, UnicodeDecodeError) as e:
            raise Unlinkable(f"input {path} is neither an object, an archive nor a readable linker script") from e
        under_sysroot = bool(self.sysroot) and _is_under(self._local(path), self._local(self.sysroot))
        i = 0
        while i < len(tokens):
            word = tokens[i]
            if word in ("GROUP", "INPUT") and tokens[i + 1:i + 2] == ["("]:
                i += 2
                depth_paren = 1
                while i < len(tokens) and depth_paren:
                    name = tokens[i]
                    if name == "AS_NEEDED" and tokens[i + 1:i + 2] == ["("]:
                        depth_paren += 1
                        i += 1
                    elif name == "(":
                        depth_paren += 1
                    elif name == ")":
                        depth_paren -= 1
                    elif name != ",":
                        self._script_file(path, name, under_sysroot, depth)
                    i += 1
                continue
            if word == "SEARCH_DIR" and i + 2 < len(tokens):
                if posixpath.isabs(tokens[i + 2]):
                    raise Unlinkable(f"linker script {path}: SEARCH_DIR({tokens[i + 2]}) is an absolute directory")
                self.dirs.append(tokens[i + 2])
                i += 3
            elif word == "INCLUDE" and i + 1 < len(tokens):
                self.read(self._search(tokens[i + 1], beside=None, what=f"linker script {path}"), depth + 1)
                i += 1
            elif word in ("OUTPUT", "STARTUP", "INSERT"):
                raise Unlinkable(f"linker script {path}: {word} is not supported in a remote link")
            i += 1

    def _script_file(self, script: str, name: str, under_sysroot: bool, depth: int) -> None:
        """ScriptParser::addFile's order: sysroot-absolute, absolute, =sysroot, -l, beside the script, cwd, -L."""
        if name.startswith("/"):
            self.read(f"{self.sysroot}{name}" if under_sysroot else name, depth + 1)
        elif name.startswith("="):
            self.read(f"{self.sysroot}/{name[1:]}" if self.sysroot else name[1:], depth + 1)
        elif name.startswith("-l"):
            self.library(name[2:], depth + 1)
        else:
            self.read(self._search(name, beside=script, what=f"linker script {script}"), depth + 1)

    def _search(self, name: str, beside: str | None, what: str) -> str:
        """NAME beside the script BESIDE (if given), else in the working directory, else in a -L directory."""
        if beside is not None:
            there = os.path.join(os.path.dirname(beside), name)
            if (self.cwd / there).is_file():
                return there
        if (self.cwd / name).is_file():
            return name
        for d in self.dirs:
            if (self.cwd / self._dir(d) / name).is_file():
                return os.path.join(self._dir(d), name)
        raise Unlinkable(f"{what}: cannot find {name}")

    def library(self, name: str, depth: int = 0) -> None:
        """-lNAME (or -l:FILE) as lld finds it: in each -L directory, libNAME.so (unless static), then .a."""
        names = [name[1:]] if name.startswith(":") else (
            [f"lib{name}.a"] if self.static else [f"lib{name}.so", f"lib{name}.a"])
        for d in self.dirs:
            for n in names:
                if (self.cwd / self._dir(d) / n).is_file():
                    self.read(os.path.join(self._dir(d), n), depth)
                    return
        raise Unlinkable(f"library -l{name} not found in the -L directories")


def _unnamed_shared(path: Path) -> bool:
    """Whether PATH is a shared object without DT_SONAME (lld records such a library by the path it was given)."""
    from goma_ext.remote.elf import read_dynamic

    try:
        return read_dynamic(path).soname is None
    except GomaExtError:
        return False  # not a shared object lld would record by path (an object file, a static executable)


def thin_members(archive: str, data: bytes) -> list[str]:
    """The member files a thin archive names (absolute, or relative to the working directory as given)."""
    from goma_ext.inputs.archive import AR_HEADER, thin_member_path

    out, pos, size_of = [], len(THIN_MAGIC), AR_HEADER.sizeof()
    while pos + size_of <= len(data):
        header = AR_HEADER.parse(data[pos:pos + size_of])
        size = int(header.size.decode("ascii").strip() or "0")
        name = header.name.rstrip()
        if name.startswith(b"/") and not name[1:].strip(b"/").isdigit():  # the symbol and long-name tables
            pos += size_of + size + (size & 1)
            continue
        member = thin_member_path(archive, data, pos)
        if member is not None:
            out.append(member)
        pos += size_of
    return out


def _option(a: str) -> tuple[str, str, str]:
    """(name, '=' or '', value) of an lld argument; a one-dash long option is named by its two-dash spelling."""
    name, eq, value = a.partition("=")
    if not name.startswith("--") and len(name) > 2 and f"-{name}" in KNOWN:
        name = f"-{name}"
    return name, eq, value


def link_files(args: Sequence[str], cwd: Path, exec_root: Path) -> LinkFiles:
    """What lld, run with ARGS in CWD, reads and writes, and ARGS as the remote lld gets them. Raises Unlinkable."""
    placer = _Placer(cwd, exec_root)
    res = _Resolver(placer)
    files = res.files
    # Two passes: -L and --sysroot apply to every -l wherever it stands (lld collects search paths first).
    expanded = expand_response_files(args, cwd)
    pending: list[tuple[str, str, str]] = []  # (kind, option as written, value)
    stack: list[bool] = []
    i = 0
    while i < len(expanded):
        a = expanded[i]
        name, eq, value = _option(a) if a.startswith("-") else (a, "", "")
        if a == "-" or name in REFUSED or "save-temps" in a:
            raise Unlinkable(f"lld option {a} is not supported in a remote link")
        if not a.startswith("-"):
            pending.append(("input", "", a))
        elif name in SEPARATE:
            if not eq:
                i += 1
                if i == len(expanded):
                    raise Unlinkable(f"lld option {a} lacks its value")
                value = expanded[i]
            pending.append(("option", name + ("=" if eq else ""), value))
        elif a[:2] in ("-L", "-l", "-o", "-T") and len(a) > 2 and not a.startswith("--"):
            pending.append(("option", a[:2] + "\0", a[2:]))  # \0: joined
        else:
            if (eq and value.startswith("/")) or a.startswith("-/"):
                raise Unlinkable(f"lld option {a} names an absolute path this link cannot place")
            pending.append(("flag", a, ""))
        i += 1
    for kind, opt, value in pending:
        bare = opt.rstrip("=\0")
        if kind == "option" and bare in ("-L", "--library-path"):
            res.dirs.append(value)
        elif kind == "option" and bare == "--sysroot":
            res.sysroot = value
        elif kind == "option" and bare == "--chroot":
            raise Unlinkable("the link has a --chroot of its own")
    for kind, opt, value in pending:
        bare = opt.rstrip("=\0")
        joined = opt.endswith("\0")

        def spell(v: str, opt: str = opt, bare: str = bare, joined: bool = joined) -> list[str]:
            if joined:
                return [f"{bare}{v}"]
            return [f"{bare}={v}"] if opt.endswith("=") else [bare, v]

        if kind == "flag":
            if opt in STATIC:
                res.static = True
            elif opt in DYNAMIC:
                res.static = False
            elif opt == "--push-state":
                stack.append(res.static)
            elif opt == "--pop-state" and stack:
                res.static = stack.pop()
            files.args.append(opt)
        elif kind == "input":
            res.read(value)
            files.args.append(files.place(value, placer.arg(value)))
        elif bare in ("-l", "--library"):
            res.library(value)
            files.args += spell(value)
        elif bare in ("-L", "--library-path", "--sysroot"):
            files.args += spell(files.place(value, placer.dir_arg(value)))
        elif bare in SCRIPTS:
            res.read(value)
            files.args += spell(files.place(value, placer.arg(value)))
        elif bare in FILE_VALUES:
            res.add(value)  # a list of symbols or versions: nothing in it names a file
            files.args += spell(files.place(value, placer.arg(value)))
        elif bare in OUTPUTS:
            out = posixpath.normpath(value)
            if posixpath.isabs(out) or out.startswith("../") or out == "..":
                raise Unlinkable(f"output {value} is not below the link's directory")
            files.outputs.append(out)
            if bare in LISTINGS:
                files.listings.append(out)
            files.args += spell(out)
        else:
            if value.startswith("/") and bare not in NOT_FILES:
                raise Unlinkable(f"lld option {bare} {value} names an absolute path this link cannot place")
            files.args += spell(value)
    if not files.outputs:
        raise Unlinkable("the link names no output (-o)")
    files.args += ["--chroot", placer.abs_arg()]  # absolute paths are read below ABS_DIR (see _Placer); lld takes
    # --chroot only as two arguments
    return files


def real_lld(env: dict[str, str] | os._Environ[str]) -> str:
    """The lld this shim stands for: REAL_LD_ENV, else ld.lld beside the clang that started us."""
    if env.get(REAL_LD_ENV):
        return env[REAL_LD_ENV]
    try:
        driver = os.readlink(f"/proc/{os.getppid()}/exe")
    except OSError as e:
        raise GomaExtError(f"cannot find the clang that started the lld shim: {e.strerror} (set {REAL_LD_ENV})") from e
    lld = os.path.join(os.path.dirname(driver), "ld.lld")
    if not os.access(lld, os.X_OK):
        raise GomaExtError(f"no ld.lld beside {driver} (set {REAL_LD_ENV})")
    return lld


@dataclass(frozen=True)
class LinkRun:
    exit_code: int
    stdout: bytes
    stderr: bytes
    cache_hit: bool
    bytes_uploaded: int
    bytes_downloaded: int
    input_bytes: int
    output: str


def remote_link(cfg: RemoteConfig, lld: str, args: Sequence[str], cwd: Path) -> LinkRun:
    """Run lld ARGS remotely (inputs and outputs relative to CWD); write its outputs. Raises GomaExtError."""
    from goma_ext.reapi.digest import Digest
    from goma_ext.reapi.errors import RemoteError
    from goma_ext.reapi.merkle import BlobSource, tree_of_files
    from goma_ext.remote.client import RemoteExecutor, action_for_tree, exec_root_of, fetch_outputs
    from goma_ext.remote.names import TOOLCHAIN_CACHE
    from goma_ext.remote.toolchain import ToolchainCache

    exec_root = exec_root_of(cfg, cwd)
    files = link_files(args, cwd, exec_root)
    toolchain = ToolchainCache(cwd / TOOLCHAIN_CACHE).get(Path(lld), "ld.lld", cfg.base_system)
    placed: dict[str, tuple[Digest, bool]] = {}
    blobs: dict[Digest, BlobSource] = {}
    kept: set[Digest] = set()
    for rel, local in files.reads.items():
        stub = remote_stub.read_stub(local)
        if stub is not None:
            digest = Digest(stub.hash, stub.size)
            kept.add(digest)
            placed[rel] = (digest, stub.executable)
            continue
        digest = Digest.of_file(Path(local))
        blobs.setdefault(digest, BlobSource(path=Path(local)))
        placed[rel] = (digest, os.access(local, os.X_OK))
    # lld's arguments go in a response file of the input root: a large link's would not fit a command line
    rsp = posixpath.normpath(posixpath.join(files.work, RSP_NAME))
    if rsp in placed:
        raise Unlinkable(f"the link reads a file named {RSP_NAME}, the name of the remote link's response file")
    rsp_data = "".join(f"{gnu_quote(a)}\n" for a in files.args).encode()
    placed[rsp] = (Digest.of_bytes(rsp_data), False)
    blobs[placed[rsp][0]] = BlobSource(data=rsp_data)
    tree = tree_of_files(placed, subtrees={toolchain.dirname: toolchain.tree})
    prepared = action_for_tree(cfg, ("ld.lld", f"@{RSP_NAME}"), exec_root, files.work, files.outputs, tree,
                               toolchain, tuple(sorted(cfg.platform)))
    blobs.update(prepared.blobs())
    executor = RemoteExecutor(cfg)
    try:
        result = executor.lookup(prepared.built.action_digest)
        hit, uploaded = result is not None, 0
        if result is None:
            if lost := executor.cas.find_missing(kept):
                raise RemoteError(f"the CAS lost {len(lost)} native object(s) the link reads, e.g. {min(lost)}",
                                  temporary=False, code="LOST_INPUT")
            with _upload_turn(cwd):
                uploaded = executor.cas.upload({d: s for d, s in blobs.items() if d not in kept})
            result = executor.execute(prepared.built.action_digest)
        stdout, stderr, *_ = fetch_outputs(executor.cas, result, prepared)  # outputs written only on success
        if result.exit_code == 0:
            respell_listings(files, cwd)
        return LinkRun(result.exit_code, files.respell(stdout), files.respell(stderr), hit, uploaded,
                       executor.cas.bytes_downloaded, tree.file_bytes, files.outputs[0])
    finally:
        executor.close()


def respell_listings(files: LinkFiles, cwd: Path) -> None:
    """Name the inputs in the link's map and dependency files as a local link names them (LinkFiles.respell)."""
    from thinlto_base.fsutil import write_if_changed

    for rel in files.listings:
        path = cwd / rel
        write_if_changed(path, files.respell(path.read_bytes()))


@contextlib.contextmanager
def _upload_turn(cwd: Path) -> Iterator[None]:
    """One link of a build directory uploads at a time: the first takes lld and the C runtime to a cold CAS
    (15 MB), the links waiting behind it then find them there instead of sending them again."""
    import fcntl

    fd = os.open(cwd / UPLOAD_LOCK, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def link_locally(lld: str, args: Sequence[str], cwd: Path, cfg: RemoteConfig | None) -> int:
    """Give every stand-in the link reads its bytes, then run the real lld here. The exit code."""
    import subprocess

    from goma_ext.remote.fetch import materialize

    try:
        expanded = expand_response_files(args, cwd)
    except Unlinkable:
        expanded = list(args)  # lld says what is wrong with the response file
    candidates = [str(cwd / a) for a in expanded if not a.startswith("-") and (cwd / a).is_file()]
    materialize(candidates, cfg)  # FetchError: the stand-ins it could not fill are gone
    return subprocess.run([lld, *args], cwd=cwd, check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    """`python -S remote_link.py [settings] -- LLD-ARGS…`, run by the shim as clang's linker."""
    from goma_ext.remote.wrapper import config_from_args, load_site

    load_site()
    from goma_ext.cliapp import Parser
    from goma_ext.remote.fetch import settings
    from goma_ext.remote.wrapper import add_settings_arguments

    parser = Parser(prog="goma-ext remote-link", description=__doc__)
    add_settings_arguments(parser)
    parser.add_argument("--exec-root", type=Path, help="root of the input tree, relative to the build directory")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- LLD ARGS…")
    ns = parser.parse_args(argv)
    args = list(ns.args[1:] if ns.args[:1] == ["--"] else ns.args)
    cwd = Path.cwd()
    try:
        lld = real_lld(os.environ)
        cfg = config_from_args(ns, os.environ)
        fetch_cfg = settings(ns, os.environ)  # fetching still applies with GOMA_EXT_REMOTE=off
    except GomaExtError as e:
        print(f"goma-ext: error: remote link: {e}", file=sys.stderr)
        return 2
    start = time.monotonic()
    reason = "remote not configured"
    if cfg is not None:
        try:
            run = remote_link(cfg, lld, args, cwd)
            if run.exit_code == 0:
                sys.stdout.buffer.write(run.stdout)
                sys.stderr.buffer.write(run.stderr)
                _record(cwd, stats.RunRecord(run.output, stats.Mode.CACHE_HIT if run.cache_hit else stats.Mode.REMOTE,
                                             0, time.monotonic() - start, run.bytes_uploaded, run.input_bytes,
                                             bytes_downloaded=run.bytes_downloaded))
                return 0
            reason = f"remote lld exited {run.exit_code}: {run.stderr.decode(errors='replace').strip()[:300]}"
        except GomaExtError as e:
            reason = str(e)
        except Exception as e:  # whatever went wrong remotely, the link runs here: never a traceback instead
            reason = f"{type(e).__name__}: {e}"
        print(f"{WARNING} remote link failed, linking locally: {reason}", file=sys.stderr, flush=True)
    try:
        code = link_locally(lld, args, cwd, fetch_cfg)
    except (GomaExtError, OSError) as e:
        print(f"goma-ext: error: local link: {e}", file=sys.stderr)
        code = 1
    mode = stats.Mode.FALLBACK if cfg is not None else stats.Mode.LOCAL
    _record(cwd, stats.RunRecord(records.output_of(args), mode, code, time.monotonic() - start, reason=reason))
    return code


def _record(cwd: Path, record: stats.RunRecord) -> None:
    try:
        stats.append(cwd / LINK_STATS_LOG, record)
    except OSError as e:
        print(f"{WARNING} cannot append to {LINK_STATS_LOG}: {e.strerror}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
