"""The compiler as action inputs: the binary and every shared library it loads from outside the base system,
found the way ld.so finds them (ELF dynamic section, recursively), laid out as a content-addressed tree.

Layout, below the input root: TOOLCHAIN_DIR/<16 hex of the tree's digest>/bin/<argv[0]'s name> and lib/<soname>.
The action runs bin/<name> by its path relative to the working directory, with LD_LIBRARY_PATH naming lib/
(relative too: the worker's mount point for the input root is not ours to know). The interpreter (PT_INTERP)
and the libraries matching `base_system` are the image's. Libraries a compiler dlopen()s are not seen (clang's
backends load none); LD_LIBRARY_PATH of the client is ignored on purpose, so the closure does not depend on
which process (client or proxy) computes it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import posixpath
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import InputError
from goma_ext.reapi.merkle import BlobSource, FileDigester, InputTree, hash_file, tree_of_files
from goma_ext.remote import identity_cache
from goma_ext.remote.elf import DynamicInfo, ElfError, read_dynamic
from thinlto_base.keys import config_files, ld_cache, system_library_dirs

TOOLCHAIN_DIR = ".goma_ext_toolchain"
TRIPLES = {62: "x86_64-linux-gnu", 183: "aarch64-linux-gnu", 3: "i386-linux-gnu", 40: "arm-linux-gnueabihf"}


class ToolchainError(InputError):
    """The compiler cannot travel as inputs (a library not found, not ELF, an interpreter the base lacks)."""


@dataclass(frozen=True)
class ToolchainFile:
    """One file of the tree: its path below the toolchain directory and the host file it holds."""

    rel: str  # bin/clang++ or lib/libLLVM.so.19.1
    source: Path
    executable: bool


def in_base(name: str, base: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in base)


@dataclass
class _Loaded:
    path: Path
    info: DynamicInfo
    loader: _Loaded | None


def _expand(entry: str, obj: _Loaded) -> str:
    origin = str(obj.path.parent)
    return entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)


def _candidates(name: str, loader: _Loaded, cache: Callable[[], Mapping[str, list[str]]]) -> Iterable[str]:
    """Where glibc's ld.so looks for `name` needed by `loader` (without LD_LIBRARY_PATH), in its order."""
    if "/" in name:
        yield name
        return
    if not loader.info.runpath:  # DT_RPATH of the loader and of every object above it, unless it has DT_RUNPATH
        obj: _Loaded | None = loader
        while obj is not None:
            if not obj.info.runpath:
                yield from (os.path.join(_expand(d, obj), name) for d in obj.info.rpath)
            obj = obj.loader
    yield from (os.path.join(_expand(d, loader), name) for d in loader.info.runpath)
    yield from cache().get(name, ())
    yield from (os.path.join(d, name) for d in system_library_dirs(TRIPLES.get(loader.info.machine, "")))


def _find(name: str, loader: _Loaded, root: DynamicInfo, cache: Callable[[], Mapping[str, list[str]]]) -> _Loaded:
    for candidate in _candidates(name, loader, cache):
        path = Path(os.path.normpath(candidate))
        if not path.is_file():
            continue
        try:
            info = read_dynamic(path)
        except ElfError:
            continue  # ld.so skips a file of the wrong kind and goes on searching
        if info.compatible(root):
            return _Loaded(path, info, loader)
    raise ToolchainError(
        f"compiler library {name} (needed by {loader.path}) cannot be found; the backend runs locally "
        "(add it to remote.base_system if the image provides it)"
    )


def closure(
    compiler: Path, name: str, base: Sequence[str], cache: Callable[[], Mapping[str, list[str]]] = ld_cache
) -> list[ToolchainFile]:
    """The files of the toolchain for `compiler` (resolved) run as `name`: bin/NAME, then lib/SONAME for every
    library outside `base`, breadth-first as ld.so loads them."""
    info = read_dynamic(compiler)
    interp = info.interpreter
    if interp is not None and not in_base(posixpath.basename(interp), base):
        raise ToolchainError(f"compiler {compiler}: its interpreter {interp} is not in remote.base_system")
    memo: list[Mapping[str, list[str]]] = []

    def cached() -> Mapping[str, list[str]]:  # read only if a library is not found beside the compiler
        if not memo:
            memo.append(cache())
        return memo[0]

    top = _Loaded(compiler, info, None)
    files = [ToolchainFile(f"bin/{name}", compiler, True)]
    # clang's configuration files beside it add their flags to every command: the remote clang reads them too
    files += [ToolchainFile(f"bin/{posixpath.basename(c)}", Path(c), False) for c in config_files(str(compiler))
              if posixpath.basename(c) != name]
    seen: set[str] = set()
    queue = [top]
    while queue:
        obj = queue.pop(0)
        for needed in obj.info.needed:
            if needed in seen or in_base(posixpath.basename(needed), base):
                continue
            seen.add(needed)
            lib = _find(needed, obj, info, cached)
            files.append(ToolchainFile(f"lib/{posixpath.basename(needed)}", lib.path.resolve(), False))
            queue.append(lib)
    return files


@dataclass(frozen=True)
class Toolchain:
    """A toolchain tree ready to graft into an input root."""

    dirname: str  # exec-root-relative: TOOLCHAIN_DIR/<16 hex>
    tree: InputTree  # the Directory holding bin/ and lib/, with every blob below it
    program: str  # bin/NAME

    def argv0(self, work: str) -> str:
        """The program's path relative to the working directory `work` (exec-root-relative)."""
        return _relative(posixpath.join(self.dirname, self.program), work)

    def library_path(self, work: str) -> str:
        return _relative(posixpath.join(self.dirname, "lib"), work)


def _relative(path: str, start: str) -> str:
    """posixpath.relpath of two exec-root-relative paths, from the strings alone: relpath would take the process's
    working directory (a getcwd call each) only to prefix both with it."""
    return posixpath.relpath("/" + path, "/" + start)


def _hash_size(text: str) -> tuple[str, int]:
    h, _, size = text.partition("/")
    return h, int(size)


def _stat_key(path: Path | str) -> list[int]:
    """What a file's entry stays valid for. The change time too: a copy over the file in place that keeps its size
    and sets its old modification time back (`cp -p`, `rsync --inplace -t`, tar) changes nothing else here, and
    the actions would carry the old compiler's digest while its request names the new one's."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _assemble(files: Sequence[ToolchainFile], digests: Sequence[Digest]) -> Toolchain:
    tree = tree_of_files({f.rel: (d, f.executable) for f, d in zip(files, digests, strict=True)})
    blobs: dict[Digest, BlobSource] = dict(tree.blobs)
    for f, d in zip(files, digests, strict=True):
        blobs.setdefault(d, BlobSource(path=f.source))
    tree = InputTree(tree.root, blobs, tree.file_bytes)
    return Toolchain(f"{TOOLCHAIN_DIR}/{tree.root.hash[:16]}", tree, files[0].rel)


class ToolchainCache:
    """Toolchains by (compiler, name, base system), computed once: in memory for a long-lived process (the proxy),
    and in `persist` (a JSON file in the build directory) for short-lived ones. An entry stands while every file
    in it has the size, mtime, change time, inode and device it had when it was hashed (_stat_key); otherwise it is
    computed again."""

    def __init__(self, persist: Path | None = None, digest_of: FileDigester = hash_file) -> None:
        self._persist = persist
        self._digest_of = digest_of
        self._lock = threading.Lock()
        self._memory: dict[str, tuple[list[list[object]], Toolchain]] = {}
        self._making: dict[str, threading.Lock] = {}  # per key: concurrent first requests hash the files once

    @staticmethod
    def key(compiler: Path, name: str, base: Sequence[str]) -> str:
        return json.dumps([str(compiler), name, list(base)])

    def get(self, compiler: Path, name: str, base: Sequence[str]) -> Toolchain:
        key = self.key(compiler, name, base)
        with self._lock:
            known = self._memory.get(key)
        if known is not None and self._fresh(known[0]):
            return known[1]
        with self._lock:
            making = self._making.setdefault(key, threading.Lock())
        with making:
            with self._lock:
                known = self._memory.get(key)
            if known is not None and self._fresh(known[0]):
                return known[1]  # made by the request this one waited for
            return self._make(key, compiler, name, base)

    def _make(self, key: str, compiler: Path, name: str, base: Sequence[str]) -> Toolchain:
        entry = self._load(key)
        if entry is None:
            files = closure(compiler, name, base)
            entry = [[f.rel, str(f.source), f.executable, _stat_key(f.source),
                      str(self._digest_of(f.source, os.stat(f.source)))] for f in files]
            self._save(key, entry)
        toolchain = _assemble([ToolchainFile(str(r), Path(str(s)), bool(x)) for r, s, x, _, _ in entry],
                              [Digest(*_hash_size(str(d))) for *_, d in entry])
        with self._lock:
            self._memory[key] = (entry, toolchain)
        return toolchain

    @staticmethod
    def _fresh(entry: list[list[object]]) -> bool:
        try:
            return all(_stat_key(str(row[1])) == row[3] for row in entry)  # per action: no Path objects
        except OSError:
            return False

    def _load(self, key: str) -> list[list[object]] | None:
        if self._persist is None:
            return None
        entry = identity_cache.load(str(self._persist)).get(key)
        if not isinstance(entry, list) or not all(isinstance(r, list) and len(r) == 5 for r in entry):
            return None
        return entry if self._fresh(entry) else None

    def _save(self, key: str, entry: list[list[object]]) -> None:
        if self._persist is None:
            return
        doc = identity_cache.load(str(self._persist))
        doc[key] = entry
        identity_cache.store(str(self._persist), doc)
