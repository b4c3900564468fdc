"""lld run remotely: the final links' linker under `remote.download: minimal`.

gn-thinlto puts `-B gn-thinlto/remote-link/` on every final link's clang, so the driver runs the `ld.lld` shim
there with lld's arguments; the shim runs this script: `python -S remote_link.py [settings] -- LLD ARGS…`. The
link's inputs are the backends' native objects, most of them stand-ins for objects kept in the CAS
(thinlto_base.remote_stub): they go into the input root by digest, every other file the link reads (objects,
the C runtime, libraries, linker scripts) is uploaded, and lld itself travels as a toolchain (`toolchain:
inputs`). Only the linked binary comes down. Files outside the exec root (the C runtime under /usr/lib) are
placed under ABS_DIR in the input root at their absolute paths, and lld gets ABS_DIR as its sysroot so that
absolute paths in linker scripts (libc.so's GROUP) resolve there, as lld's ScriptParser::addFile does.

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
import shlex
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from goma_ext.errors import GomaExtError
from goma_ext.remote import stats
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.names import LINK_STATS_LOG, REAL_LD_ENV
from thinlto_base import remote_stub

ABS_DIR = ".gn-thinlto-abs"  # exec-root-relative home of the link's files that lie outside the exec root
UPLOAD_LOCK = ".goma_ext_link_upload.lock"  # in the build directory (_upload_turn)
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
    "--print-archive-stats", "--package-metadata", "--target2", "--compress-debug-sections", "--emit-relocs-in",
})
FILE_VALUES = frozenset({"-T", "--script", "--version-script", "--dynamic-list", "--symbol-ordering-file",
                         "--call-graph-ordering-file", "--just-symbols", "--retain-symbols-file",
                         "--export-dynamic-symbol-list", "--lto-sample-profile"})
OUTPUTS = frozenset({"-o", "--output", "-Map", "--Map", "--dependency-file"})
# Files lld would write that the action would not bring back, or modes that change what a link is.
REFUSED = frozenset({"--reproduce", "--why-extract", "--print-archive-stats", "--lto-obj-path", "--save-temps",
                     "--thinlto-index-only", "-r", "--relocatable", "-i", "--print-map", "-M", "-v", "--version"})
STATIC = frozenset({"-Bstatic", "--Bstatic", "-static", "--static", "-dn", "-non_shared"})
DYNAMIC = frozenset({"-Bdynamic", "--Bdynamic", "-dy", "-call_shared"})


class Unlinkable(GomaExtError):
    """This link cannot run remotely as it is; it runs here (one line: why)."""


@dataclass
class LinkFiles:
    """What one lld command reads and writes, and its arguments as the remote lld gets them."""

    reads: dict[str, str] = field(default_factory=dict)  # exec-root-relative tree path -> local path to read
    outputs: list[str] = field(default_factory=list)  # relative to the working directory
    args: list[str] = field(default_factory=list)


def expand_response_files(args: Sequence[str], cwd: Path, depth: int = 0) -> list[str]:
    """ARGS with every @FILE replaced by its arguments (GNU quoting, as lld reads them)."""
    out: list[str] = []
    for a in args:
        if a.startswith("@") and len(a) > 1:
            if depth > 10:
                raise Unlinkable("response files nest more than 10 deep")
            try:
                text = (cwd / a[1:]).read_text()
            except OSError as e:
                raise Unlinkable(f"response file {a[1:]}: {e.strerror}") from e
            out += expand_response_files(shlex.split(text), cwd, depth + 1)
        else:
            out.append(a)
    return out


def _script_tokens(text: str) -> list[str]:
    """A linker script's tokens: comments dropped, parentheses and commas on their own, quotes removed."""
    import re

    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return [t.strip('"') for t in re.findall(r'"[^"]*"|[(),]|[^\s(),]+', text)]


class _Placer:
    """Where each file lies in the input root, and the argument that names it there (from the working directory)."""

    def __init__(self, cwd: Path, exec_root: Path) -> None:
        self.cwd = cwd
        self.root = exec_root.resolve()
        rel = os.path.relpath(cwd.resolve(), self.root)
        if rel == ".." or rel.startswith("../"):
            raise Unlinkable(f"the link's directory {cwd} is outside the exec root {exec_root}")
        self.work = "." if rel == "." else Path(rel).as_posix()

    def tree_path(self, path: str) -> str:
        """PATH's place in the input root: below the exec root where it lies there, else under ABS_DIR."""
        if not posixpath.isabs(path):
            inside = posixpath.normpath(posixpath.join(self.work, path))
            if inside not in (".", "..") and not inside.startswith("../"):
                return inside
        full = posixpath.normpath(posixpath.join(self.cwd.as_posix(), path))
        return f"{ABS_DIR}{full}"

    def arg(self, path: str) -> str:
        """How the remote lld names PATH: unchanged below the exec root, else its place under ABS_DIR."""
        tree = self.tree_path(path)
        if not tree.startswith(f"{ABS_DIR}/"):
            return path
        return posixpath.relpath(tree, self.work)

    def abs_arg(self) -> str:
        return posixpath.relpath(ABS_DIR, self.work)


class _Resolver:
    """Finds what lld reads, as lld does: files named, libraries by -l search, what linker scripts name."""

    def __init__(self, placer: _Placer) -> None:
        self.placer = placer
        self.cwd = placer.cwd
        self.dirs: list[str] = []
        self.static = False
        self.sysroot = ""
        self.files = LinkFiles()

    def _local(self, path: str) -> Path:
        return self.cwd / path

    def read(self, path: str, depth: int = 0) -> None:
        """Add PATH (as lld opens it, relative to the working directory) and what it names."""
        local = self._local(path)
        if not local.is_file():
            raise Unlinkable(f"input {path} is not a file")
        self.files.reads[self.placer.tree_path(path)] = str(local)
        with open(local, "rb") as f:
            head = f.read(8)
        if head.startswith((ELF_MAGIC, AR_MAGIC, *BITCODE_MAGICS)) or remote_stub.read_stub(local) is not None:
            return
        if head == THIN_MAGIC:
            for member in thin_members(str(local), local.read_bytes()):
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
        under_sysroot = bool(self.sysroot)
        i = 0
        while i < len(tokens):
            word = tokens[i]
            if word in ("GROUP", "INPUT", "AS_NEEDED"):
                i += 2  # the name and its `(`
                while i < len(tokens) and tokens[i] != ")":
                    name = tokens[i]
                    if name == "AS_NEEDED":
                        i += 2
                        continue
                    if name != ",":
                        self._script_file(path, name, under_sysroot, depth)
                    i += 1
            elif word == "SEARCH_DIR" and i + 2 < len(tokens):
                self.dirs.append(tokens[i + 2])
                i += 3
            elif word == "INCLUDE" and i + 1 < len(tokens):
                self.read(self._search_script(path, tokens[i + 1]), depth + 1)
                i += 1
            elif word in ("OUTPUT", "STARTUP", "INSERT", "OUTPUT_FORMAT") and word != "OUTPUT_FORMAT":
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
            self.read(self._search_script(script, name), depth + 1)

    def _search_script(self, script: str, name: str) -> str:
        beside = os.path.join(os.path.dirname(script), name)
        if (self.cwd / beside).is_file():
            return beside
        if (self.cwd / name).is_file():
            return name
        for d in self.dirs:
            if (self.cwd / d / name).is_file():
                return os.path.join(d, name)
        raise Unlinkable(f"linker script {script}: cannot find {name}")

    def library(self, name: str, depth: int = 0) -> None:
        """-lNAME (or -l:FILE) as lld finds it: in each -L directory, libNAME.so (unless static), then .a."""
        names = [name[1:]] if name.startswith(":") else (
            [f"lib{name}.a"] if self.static else [f"lib{name}.so", f"lib{name}.a"])
        for d in self.dirs:
            for n in names:
                if (self.cwd / d / n).is_file():
                    self.read(os.path.join(d, n), depth)
                    return
        raise Unlinkable(f"library -l{name} not found in the -L directories")


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
        name, eq, value = a.partition("=") if a.startswith("-") else (a, "", "")
        if a == "-" or name in REFUSED or a.startswith(("-plugin-opt=save-temps", "--plugin-opt=save-temps")):
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
        elif a[:2] in ("-L", "-l", "-o") and len(a) > 2 and not a.startswith("--"):
            pending.append(("option", a[:2] + "\0", a[2:]))  # \0: joined
        else:
            pending.append(("flag", a, ""))
        i += 1
    for kind, opt, value in pending:
        bare = opt.rstrip("=\0")
        if kind == "option" and bare in ("-L", "--library-path"):
            res.dirs.append(value)
        elif kind == "option" and bare == "--sysroot":
            res.sysroot = value
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
            files.args.append(placer.arg(value))
        elif bare in ("-l", "--library"):
            res.library(value)
            files.args += spell(value)
        elif bare in ("-L", "--library-path", "--sysroot"):
            files.args += spell(placer.arg(value))
        elif bare in FILE_VALUES:
            res.read(value)
            files.args += spell(placer.arg(value))
        elif bare in OUTPUTS:
            out = posixpath.normpath(value)
            if posixpath.isabs(out) or out.startswith("../") or out == "..":
                raise Unlinkable(f"output {value} is not below the link's directory")
            files.outputs.append(out)
            files.args += spell(out)
        else:
            files.args += spell(value)
    if not any(o for o in files.outputs):
        raise Unlinkable("the link names no output (-o)")
    if not res.sysroot:  # absolute paths in the C library's linker scripts resolve under ABS_DIR
        files.args.append(f"--sysroot={placer.abs_arg()}")
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
    from goma_ext.reapi import action as action_mod
    from goma_ext.reapi.digest import Digest
    from goma_ext.reapi.errors import RemoteError
    from goma_ext.reapi.merkle import BlobSource, tree_of_files
    from goma_ext.remote.client import PreparedAction, RemoteExecutor, fetch_outputs
    from goma_ext.remote.names import TOOLCHAIN_CACHE
    from goma_ext.remote.toolchain import ToolchainCache

    exec_root = cfg.exec_root if cfg.exec_root.is_absolute() else cwd / cfg.exec_root
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
    tree = tree_of_files(placed, subtrees={toolchain.dirname: toolchain.tree})
    blobs.update(tree.blobs)
    work = _Placer(cwd, exec_root).work
    spec = action_mod.ActionSpec(
        arguments=(toolchain.argv0(work), *files.args),
        working_directory=work,
        output_paths=tuple(files.outputs),
        platform=tuple(sorted(cfg.platform)),
        input_root=tree.root,
        timeout_s=int(cfg.execute_timeout_s),
        salt=cfg.cache_salt.encode(),
        environment=(("LD_LIBRARY_PATH", toolchain.library_path(work)),),
    )
    built = action_mod.build(spec)
    blobs[built.command_digest] = BlobSource(data=built.command)
    blobs[built.action_digest] = BlobSource(data=built.action)
    destinations = tuple(exec_root.resolve() / posixpath.normpath(posixpath.join(work, o)) for o in files.outputs)
    prepared = PreparedAction(built, tree, tuple(files.outputs), destinations)
    executor = RemoteExecutor(cfg)
    try:
        result = executor.lookup(built.action_digest)
        hit, uploaded = result is not None, 0
        if result is None:
            if lost := executor.cas.find_missing(kept):
                raise RemoteError(f"the CAS lost {len(lost)} native object(s) the link reads, e.g. {min(lost)}",
                                  temporary=False, code="LOST_INPUT")
            with _upload_turn(cwd):
                uploaded = executor.cas.upload({d: s for d, s in blobs.items() if d not in kept})
            result = executor.execute(built.action_digest)
        stdout, stderr = fetch_outputs(executor.cas, result, prepared)  # outputs written only on success
        return LinkRun(result.exit_code, stdout, stderr, hit, uploaded, executor.cas.bytes_downloaded,
                       tree.file_bytes, files.outputs[0])
    finally:
        executor.close()


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


def link_locally(lld: str, args: Sequence[str], cwd: Path, cfg: RemoteConfig | None,
                 materialize: Callable[..., object] | None = None) -> int:
    """Give every stand-in the link reads its bytes, then run the real lld here. The exit code."""
    import subprocess

    from goma_ext.remote.fetch import materialize as fetch_all

    inputs = [a for a in expand_response_files(args, cwd) if not a.startswith("-")]
    candidates = [str(cwd / a) for a in inputs if (cwd / a).is_file()]
    (materialize or fetch_all)(candidates, cfg)  # FetchError: the stand-ins it could not fill are gone
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
        print(f"{WARNING} remote link failed, linking locally: {reason}", file=sys.stderr, flush=True)
    try:
        code = link_locally(lld, args, cwd, fetch_cfg)
    except GomaExtError as e:
        print(f"goma-ext: error: local link: {e}", file=sys.stderr)
        code = 1
    output = args[args.index("-o") + 1] if "-o" in args[:-1] else "?"
    mode = stats.Mode.FALLBACK if cfg is not None else stats.Mode.LOCAL
    _record(cwd, stats.RunRecord(output, mode, code, time.monotonic() - start, reason=reason))
    return code


def _record(cwd: Path, record: stats.RunRecord) -> None:
    try:
        stats.append(cwd / LINK_STATS_LOG, record)
    except OSError as e:
        print(f"{WARNING} cannot append to {LINK_STATS_LOG}: {e.strerror}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
