"""ThinLTO per-module summary index decoder: module table, hashes, summary version/flags and counts.

A distributed ThinLTO index (`foo.o.thinlto.bc`, written by `ld.lld --thinlto-index-only`) is a
bitstream holding a MODULE_BLOCK with a MODULE_STRTAB_BLOCK (the module table: the module itself and
every module it imports from, each with its SHA-1) and a GLOBALVAL_SUMMARY_BLOCK (summary version, index
flags, combined summaries naming their module by id). Module ids are resolved through the table only.
"""

from __future__ import annotations

import os
import struct
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goma_ext.bitcode.bitstream import Bitstream, Block, Record
from goma_ext.bitcode.llvm_codes import BlockId, IndexFlag, ModuleCode, ModuleStrtabCode
from goma_ext.bitcode.summary import SummaryBlock, decode_summary_block
from goma_ext.errors import DecodeError, GomaExtError

# MST_CODE_HASH / MODULE_CODE_HASH hold the 20-byte SHA-1 as five 32-bit words, each read big-endian from
# the digest (llvm/lib/Bitcode/Writer/BitcodeWriter.cpp, writeModuleHash / ModuleHash).
_MODULE_HASH = struct.Struct(">5I")  # struct, not construct: this runs once per module and construct costs ~20 us


def module_hash_bytes(words: tuple[int, ...]) -> bytes:
    """The SHA-1 digest from the five HASH record words (callers check there are five u32 values)."""
    return _MODULE_HASH.pack(*words)
INDEX_SUFFIX = ".thinlto.bc"
IMPORTS_SUFFIX = ".imports"


@dataclass(frozen=True)
class IndexModule:
    """One module table entry: its id in this index, its path as the linker wrote it, its SHA-1.

    `hash` is the 20-byte SHA-1 digest (the five MST_CODE_HASH words, big-endian), or None when the
    entry has no HASH record (LLVM omits an all-zero hash).
    """

    modid: int
    path: str
    hash: bytes | None

    @property
    def hash_hex(self) -> str:
        return self.hash.hex() if self.hash is not None else ""


@dataclass(frozen=True)
class ThinLtoIndex:
    """A decoded ThinLTO index. `version` is the summary version (FS_VERSION); `empty` marks a zero-byte file."""

    path: str
    version: int | None
    flags: int
    modules: tuple[IndexModule, ...]
    summary_counts: Mapping[str, int] = field(hash=False)  # combined summaries per module path
    bitcode_version: int | None = None  # the MODULE_BLOCK VERSION record
    empty: bool = False
    # GUIDs of the global values each module's summaries describe (sorted); empty when summaries=False
    guids: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: types.MappingProxyType({}), hash=False)

    @property
    def skip(self) -> bool:
        """SkipModuleByDistributedBackend: the backend must emit an empty object."""
        return bool(self.flags & IndexFlag.SKIP_MODULE_BY_DISTRIBUTED_BACKEND)

    @property
    def flag_names(self) -> tuple[str, ...]:
        known = [f.name or "" for f in IndexFlag if self.flags & f]
        unknown = self.flags & ~sum(IndexFlag)
        return (*known, f"0x{unknown:x}") if unknown else tuple(known)

    def own_module(self, self_path: str | None = None) -> IndexModule | None:
        """The entry for the module this index was written for.

        `self_path` defaults to the index path minus `.thinlto.bc`. Module paths are relative to the
        linker's working directory, so the entry whose path is the longest path-suffix of `self_path`
        wins (`out/obj/a.o` matches `obj/a.o`). Callers that know the module hash should match on it.
        """
        raw = self_path if self_path is not None else own_module_path(self.path)
        for m in self.modules:  # the common case, without normalizing every path
            if m.path == raw:
                return m
        own = os.path.normpath(raw)
        best: IndexModule | None = None
        for m in self.modules:
            p = os.path.normpath(m.path)
            if (own == p or own.endswith(os.sep + p)) and (best is None or len(p) > len(best.path)):
                best = m
        return best

    def imported_paths(self, self_path: str | None = None) -> tuple[str, ...]:
        """Paths of the modules other than the index's own one (see `own_module`), in table order."""
        own = self.own_module(self_path)
        return tuple(m.path for m in self.modules if m is not own)


def own_module_path(index_path: str) -> str:
    """The module an index file was written for: `foo.o.thinlto.bc` -> `foo.o` (lld's naming)."""
    return index_path[: -len(INDEX_SUFFIX)] if index_path.endswith(INDEX_SUFFIX) else index_path


def imports_file_path(index_path: str) -> str:
    """The `.imports` file lld writes beside an index: `foo.o.thinlto.bc` -> `foo.o.imports`."""
    return own_module_path(index_path) + IMPORTS_SUFFIX


def read_index(path: str | os.PathLike[str], *, summaries: bool = True) -> ThinLtoIndex:
    """Decode the index file at `path`. With summaries=False the summary records are skipped, not counted."""
    name = os.fspath(path)
    try:
        data = Path(name).read_bytes()
    except OSError as e:
        raise GomaExtError(f"cannot read ThinLTO index {name}: {e.strerror or e}") from e
    return parse_index(data, name=name, summaries=summaries)


def parse_index(data: bytes, *, name: str = "<bytes>", summaries: bool = True) -> ThinLtoIndex:
    if not data:
        return ThinLtoIndex(name, None, 0, (), types.MappingProxyType({}), empty=True)
    stream = Bitstream(data, name=name)
    decoded: _ModuleBlock | None = None
    for block in stream.blocks():
        if block.block_id == BlockId.MODULE_BLOCK:
            if decoded is not None:
                raise DecodeError("more than one MODULE_BLOCK in an index", bit_offset=block.bit_offset, file=name)
            decoded = _decode_module_block(block, summaries)
    if decoded is None:
        raise DecodeError("not a ThinLTO index: no MODULE_BLOCK", bit_offset=0, file=name)
    modules = decoded.modules
    counts = {m.path: 0 for m in modules.values()}
    guids: dict[str, list[int]] = {m.path: [] for m in modules.values()}
    for s in decoded.summary.summaries:
        if s.modid not in modules:
            raise DecodeError(
                f"{s.kind.name} names module id {s.modid}, which the module table does not define",
                bit_offset=s.bit_offset, block_path=(*decoded.path, BlockId.GLOBALVAL_SUMMARY_BLOCK.name), file=name,
            )
        path = modules[s.modid].path
        counts[path] += 1
        if s.valueid in decoded.summary.value_guids:
            guids[path].append(decoded.summary.value_guids[s.valueid])
    return ThinLtoIndex(
        name, decoded.summary.version, decoded.summary.flags, tuple(modules.values()), types.MappingProxyType(counts),
        bitcode_version=decoded.bitcode_version,
        guids=types.MappingProxyType({p: tuple(sorted(g)) for p, g in guids.items()}),
    )


@dataclass(frozen=True)
class _ModuleBlock:
    """The parts of an index's MODULE_BLOCK, before module ids are resolved."""

    path: tuple[str, ...]
    bitcode_version: int | None
    modules: dict[int, IndexModule]
    summary: SummaryBlock


def _decode_module_block(block: Block, summaries: bool) -> _ModuleBlock:
    bitcode_version: int | None = None
    modules: dict[int, IndexModule] | None = None
    summary = SummaryBlock(None, 0, (), types.MappingProxyType({}), complete=summaries)
    for entry in block.entries():
        if isinstance(entry, Record):
            if entry.code == ModuleCode.VERSION and entry.ops:
                bitcode_version = entry.ops[0]
        elif entry.block_id == BlockId.MODULE_STRTAB_BLOCK:
            modules = _decode_module_table(entry)
        elif entry.block_id == BlockId.GLOBALVAL_SUMMARY_BLOCK:
            summary = decode_summary_block(entry, complete=summaries)
    if modules is None:
        raise DecodeError(
            "not a ThinLTO index: MODULE_BLOCK has no MODULE_STRTAB_BLOCK (a bitcode object?)",
            bit_offset=block.bit_offset, block_path=block.path, file=block.stream.name,
        )
    return _ModuleBlock(block.path, bitcode_version, modules, summary)


_MST_ENTRY = int(ModuleStrtabCode.ENTRY)
_MST_HASH = int(ModuleStrtabCode.HASH)


def _decode_module_table(block: Block) -> dict[int, IndexModule]:
    """The module table, in stream order. HASH records attach to the ENTRY just before them."""
    entries: dict[int, list[Any]] = {}  # modid -> [path, hash]; IndexModule objects are built once, at the end
    last: list[Any] | None = None
    try:
        for record in block.entries():
            if type(record) is not Record:
                continue
            code, ops = record[0], record[1]  # tuple indexing: this loop runs twice per module
            if code == _MST_ENTRY:
                if not ops:
                    raise _record_error(block, record, "MST_CODE_ENTRY without a module id")
                if ops[0] in entries:
                    raise _record_error(block, record, f"module id {ops[0]} defined twice")
                last = entries[ops[0]] = [record.text(1), None]
            elif code == _MST_HASH:
                if last is None or last[1] is not None:
                    raise _record_error(block, record, "MST_CODE_HASH without a preceding MST_CODE_ENTRY")
                if len(ops) != 5 or max(ops) >> 32:
                    raise _record_error(block, record, f"MST_CODE_HASH has {len(ops)} operands, expected 5 x u32")
                last[1] = _MODULE_HASH.pack(*ops)
    except DecodeError as e:
        raise block.locate(e) from e
    return {modid: IndexModule(modid, path, digest) for modid, (path, digest) in entries.items()}


def _record_error(block: Block, record: Record, message: str) -> DecodeError:
    return DecodeError(message, bit_offset=record.bit_offset, block_path=block.path, file=block.stream.name)
