"""Backend input processor: the exact set of files a ThinLTO backend command reads.

`clang -c -x ir foo.o -fthinlto-index=foo.o.thinlto.bc -o foo.native.o` reads its bitcode, its index,
every module the index names besides its own (paths relative to the working directory, as lld wrote
them), response files and the profile / list files named by flags. A `.imports` file beside the index
must agree with the decoded index. A zero-byte index or one with the skip flag imports nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from goma_ext.bitcode import objects as bitcode
from goma_ext.bitcode.index import IndexModule, ThinLtoIndex, imports_file_path, read_index
from goma_ext.errors import GomaExtError
from goma_ext.inputs.archive import THIN_MAGIC, parse_member_ref, thin_member_path
from goma_ext.inputs.clang_args import (
    Arg,
    Role,
    classify,
    expand_response_files,
    machine_flag,
)
from thinlto_base.keys import expand_arguments, file_arguments

PROFILE_USE_DEFAULT = "default.profdata"  # clang: -fprofile-use=DIR reads DIR/default.profdata


@dataclass(frozen=True)
class BackendInputs:
    """The inputs of one backend command; every path is relative to its working directory when it is inside it."""

    bitcode: str
    index: str | None
    imports: tuple[str, ...]  # files holding the imported modules: an archive member maps to its archive,
    # and for a thin archive also to the member's own file
    other_inputs: tuple[str, ...]  # response files, profiles, ignore lists, ...
    output: str | None
    skip: bool = False  # the index says: emit an empty object

    @property
    def paths(self) -> tuple[str, ...]:
        """Bitcode, index, imports, other inputs; each once, in that order."""
        ordered = (self.bitcode, *((self.index,) if self.index else ()), *self.imports, *self.other_inputs)
        return tuple(dict.fromkeys(ordered))


class MachineDependent(GomaExtError):
    """The backend's object would depend on the machine that compiles it: it runs locally, never remotely."""


def archive_of(module_path: str) -> str:
    """The file that holds a module: `lib.a(x.o at 12)` -> `lib.a`; plain paths are unchanged."""
    ref = parse_member_ref(module_path)
    return ref.archive if ref else module_path


def module_files(module_path: str, cwd: Path, archives: dict[str, bytes]) -> list[str]:
    """Files to stage for one module: itself, or its archive (plus the member file of a thin archive).
    `archives` caches archive contents across calls."""
    ref = parse_member_ref(module_path)
    if ref is None:
        return [module_path]
    if ref.archive not in archives:
        try:
            with open(cwd / ref.archive, "rb") as f:
                head = f.read(len(THIN_MAGIC))
                archives[ref.archive] = head + f.read() if head == THIN_MAGIC else head
        except FileNotFoundError:
            archives[ref.archive] = b""  # listed anyway: staging reports the missing file
        except OSError as e:
            raise GomaExtError(f"cannot read archive {ref.archive} (imported {module_path}): {e.strerror or e}") from e
    member = thin_member_path(ref.archive, archives[ref.archive], ref.offset)
    return [ref.archive] if member is None else [ref.archive, member]


def backend_inputs(argv: Sequence[str], cwd: Path) -> BackendInputs:
    """Analyse a backend command line (argv[0] is the compiler) run in `cwd`."""
    if not argv:
        raise GomaExtError("empty backend command line")
    args, rsp_files = expand_response_files(list(argv[1:]), lambda p: _read_text(cwd, p))
    expanded = expand_arguments(list(argv[1:]), str(cwd), argv[0])  # as the local key reads them
    machine = machine_flag(expanded[0])
    if machine is not None:
        raise MachineDependent(f"{machine}: the object would depend on the worker (its CPU, or a program of its system "
                           "that clang starts), which no key covers; the backend runs locally")
    classified = classify(args)
    positional = [a.value for a in classified if a.role is Role.INPUT and a.flag is None]
    if len(positional) != 1:
        raise GomaExtError(f"a backend command has exactly one bitcode input, found {len(positional)}: {positional}")
    index_args = [a.value for a in classified if a.role is Role.INDEX]
    outputs = [a.value for a in classified if a.role is Role.OUTPUT and a.flag == "-o"]
    bitcode_path = _rel(cwd, positional[0])
    index_path = _rel(cwd, index_args[-1]) if index_args else None
    imports: tuple[str, ...] = ()
    skip = False
    if index_path is not None:
        index = read_index(cwd / index_path, summaries=False)
        skip = index.skip
        imported = _imported_modules(index, cwd, bitcode_path, index_path)
        _check_imports_file(cwd, index_path, imported)
        archives: dict[str, bytes] = {}
        imports = tuple(dict.fromkeys(_rel(cwd, f) for m in imported for f in module_files(m, cwd, archives)))
    others = [_rel(cwd, p) for p in rsp_files] + [_rel(cwd, p) for a in classified for p in _flag_inputs(a, cwd)]
    # and every other argument that names a file the backend reads, as the local cache key finds them: a value
    # the table does not know (`-Xclang -load -Xclang F`) would otherwise be the worker's file, or none
    named = {positional[0], *(f"-fthinlto-index={i}" for i in index_args), *outputs}
    others += [_rel(cwd, p) for _arg, p in file_arguments(list(argv[1:]), named, str(cwd), argv[0], expanded)]
    return BackendInputs(
        bitcode=bitcode_path, index=index_path, imports=imports, other_inputs=tuple(dict.fromkeys(others)),
        output=_rel(cwd, outputs[-1]) if outputs else None, skip=skip,
    )


def _imported_modules(index: ThinLtoIndex, cwd: Path, bitcode_path: str, index_path: str) -> tuple[str, ...]:
    """Module paths the backend imports from: all table entries but its own; none for empty or skip indexes."""
    if index.empty or index.skip or not index.modules:
        return ()
    own = _own_module(index, cwd, bitcode_path)
    if own is None:
        raise GomaExtError(f"index {index_path} does not list the backend's bitcode {bitcode_path} (by hash or path)")
    return tuple(m.path for m in index.modules if m is not own)


def _own_module(index: ThinLtoIndex, cwd: Path, bitcode_path: str) -> IndexModule | None:
    """The entry whose path is the bitcode's, spelled the same (both relative to the build directory: what a
    build's thin link and backends see); else match the bitcode to an entry by module hash (path breaks ties),
    falling back to the path's longest suffix. Decoding the bitcode for its hash is most of the proxy's work
    per action ([lean]), so it is done only when the spelling does not decide."""
    exact = next((m for m in index.modules if m.path == bitcode_path), None)
    if exact is not None:
        return exact
    by_path = index.own_module(bitcode_path)
    info = bitcode.inspect(cwd / bitcode_path)
    if info.module_hash is not None:
        same = [m for m in index.modules if m.hash == info.module_hash]
        if len(same) == 1 or (same and by_path not in same):
            return same[0]
    return by_path


def _check_imports_file(cwd: Path, index_path: str, imported: tuple[str, ...]) -> None:
    imports_path = imports_file_path(index_path)
    try:
        listed = (cwd / imports_path).read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except FileNotFoundError:
        return
    except OSError as e:
        raise GomaExtError(f"cannot read {imports_path}: {e.strerror or e}") from e
    listed_set = {line for line in listed if line}
    if listed_set != set(imported):
        only_file = sorted(listed_set - set(imported))
        only_index = sorted(set(imported) - listed_set)
        raise GomaExtError(
            f"{imports_path} and {index_path} disagree: only in {imports_path}: {only_file or 'none'}; "
            f"only in {index_path}: {only_index or 'none'}"
        )


def _flag_inputs(arg: Arg, cwd: Path) -> list[str]:
    if arg.role is Role.INPUT and arg.flag is not None:
        return [arg.value]
    if arg.role is Role.PROFILE_USE:
        return [os.path.join(arg.value, PROFILE_USE_DEFAULT) if (cwd / arg.value).is_dir() else arg.value]
    return []


def _rel(cwd: Path, path: str) -> str:
    """`path` normalized, and made relative to `cwd` when it is absolute and inside it."""
    norm = os.path.normpath(path)
    if os.path.isabs(norm):
        base = os.path.normpath(os.path.abspath(cwd))
        if norm == base or norm.startswith(base + os.sep):
            return os.path.relpath(norm, base)
    return norm


def _read_text(cwd: Path, path: str) -> str:
    try:
        return (cwd / path).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise GomaExtError(f"cannot read response file {path}: {e.strerror or e}") from e
