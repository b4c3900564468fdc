"""Bitcode object inspection: is a link input bitcode, does it carry a ThinLTO summary, what is its identity."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from goma_ext.bitcode.bitstream import Bitstream, Block, Record
from goma_ext.bitcode.index import module_hash_bytes
from goma_ext.bitcode.llvm_codes import BITCODE_MAGIC, WRAPPER_MAGIC, BlockId, ModuleCode
from goma_ext.errors import DecodeError, GomaExtError

IDENTIFICATION_STRING = 1  # llvm/include/llvm/Bitcode/LLVMBitCodes.h (IDENTIFICATION_CODE_STRING)
_SNIFF_BYTES = 4


@dataclass(frozen=True)
class BitcodeInfo:
    """What a build tool needs to know about one file. For non-bitcode files only `is_bitcode=False` is set.

    LLVM can put several modules in one file (`module_count`; -fsplit-lto-unit writes a ThinLTO module
    and a regular LTO one): the module fields describe the first module with a ThinLTO summary, else
    the first module; `has_full_lto_summary` is true if any module has a regular LTO summary.
    `module_hash` is the 20-byte SHA-1 of the MODULE_CODE_HASH record, the same value a ThinLTO index
    lists for this module.
    """

    path: str
    is_bitcode: bool
    wrapped: bool = False
    has_thinlto_summary: bool = False  # a GLOBALVAL_SUMMARY_BLOCK inside the module
    has_full_lto_summary: bool = False  # a FULL_LTO_GLOBALVAL_SUMMARY_BLOCK
    is_index: bool = False  # a combined summary index (has a MODULE_STRTAB_BLOCK), not an object
    module_hash: bytes | None = None
    source_filename: str | None = None
    triple: str | None = None
    producer: str | None = None  # the IDENTIFICATION_BLOCK string, e.g. "LLVM19.1.7"
    module_count: int = 0

    @property
    def module_hash_hex(self) -> str:
        return self.module_hash.hex() if self.module_hash is not None else ""


def is_bitcode_prefix(head: bytes) -> bool:
    """Whether the first bytes of a file are the bitcode magic or the bitcode wrapper magic."""
    return head[:4] == BITCODE_MAGIC or head[:4] == WRAPPER_MAGIC.to_bytes(4, "little")


def inspect(path: str | os.PathLike[str]) -> BitcodeInfo:
    """Inspect one file; non-bitcode files give is_bitcode=False, corrupt bitcode raises DecodeError."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            if not is_bitcode_prefix(f.read(_SNIFF_BYTES)):
                return BitcodeInfo(name, is_bitcode=False)
        data = Path(name).read_bytes()
    except OSError as e:
        raise GomaExtError(f"cannot read {name}: {e.strerror or e}") from e
    return inspect_bytes(data, name=name)


@dataclass
class _ModuleFacts:
    """What one walk over a MODULE_BLOCK found (mutable while the walk runs, then copied out)."""

    has_thinlto_summary: bool = False
    has_full_lto_summary: bool = False
    is_index: bool = False
    module_hash: bytes | None = None
    source_filename: str | None = None
    triple: str | None = None


def inspect_bytes(data: bytes, *, name: str = "<bytes>") -> BitcodeInfo:
    if not is_bitcode_prefix(data):
        return BitcodeInfo(name, is_bitcode=False)
    stream = Bitstream(data, name=name)
    modules: list[_ModuleFacts] = []
    producer: str | None = None
    for block in stream.blocks():
        if block.block_id == BlockId.IDENTIFICATION_BLOCK and producer is None:
            try:
                producer = next((r.text() for r in block.records() if r.code == IDENTIFICATION_STRING), None)
            except DecodeError as e:
                raise block.locate(e) from e
        elif block.block_id == BlockId.MODULE_BLOCK:
            modules.append(_ModuleFacts())
            _read_module(block, modules[-1])
    # A split LTO unit holds a ThinLTO module and a regular LTO module: report the ThinLTO one.
    facts = next((m for m in modules if m.has_thinlto_summary), modules[0] if modules else _ModuleFacts())
    return BitcodeInfo(
        name, True, wrapped=stream.wrapper is not None, has_thinlto_summary=facts.has_thinlto_summary,
        has_full_lto_summary=any(m.has_full_lto_summary for m in modules), is_index=facts.is_index,
        module_hash=facts.module_hash, source_filename=facts.source_filename, triple=facts.triple,
        producer=producer, module_count=len(modules),
    )


def _read_module(block: Block, facts: _ModuleFacts) -> None:
    try:
        _read_module_entries(block, facts)
    except DecodeError as e:
        raise block.locate(e) from e


def _read_module_entries(block: Block, facts: _ModuleFacts) -> None:
    for entry in block.entries():
        if isinstance(entry, Record):
            if entry.code == ModuleCode.TRIPLE:
                facts.triple = entry.text()
            elif entry.code == ModuleCode.SOURCE_FILENAME:
                facts.source_filename = entry.text()
            elif entry.code == ModuleCode.HASH and len(entry.ops) == 5 and not any(w >> 32 for w in entry.ops):
                facts.module_hash = module_hash_bytes(entry.ops)
        elif entry.block_id == BlockId.GLOBALVAL_SUMMARY_BLOCK:
            facts.has_thinlto_summary = True
        elif entry.block_id == BlockId.FULL_LTO_GLOBALVAL_SUMMARY_BLOCK:
            facts.has_full_lto_summary = True
        elif entry.block_id == BlockId.MODULE_STRTAB_BLOCK:
            facts.is_index = True
