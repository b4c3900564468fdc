"""Rename modules in a ThinLTO backend index: its module table written anew, every other bit kept.

A backend opens the modules it imports at the paths its index names, and finds its own module by the path
of its input. lld 22's DTLTO names the files it extracts from archives after its pid, so the same backend
is a new remote action in every link. Renaming those modules to content-derived names in a copy of the index
(and staging the files under those names) makes the action the same everywhere.

Layout (LLVM's BitCodeFormat.rst; as lld 22 writes a backend index): a MODULE_BLOCK holding VERSION, the
MODULE_STRTAB_BLOCK (ENTRY records: module id and path; HASH records) and the summary blocks. The module
table is re-encoded with unabbreviated records in the same place; the bits before it are copied, the
32-bit-aligned rest after it is copied as bytes, and the MODULE_BLOCK's length word is adjusted.
"""

from __future__ import annotations

from collections.abc import Mapping

from goma_ext.bitcode.bitstream import Bitstream, Block, Record
from goma_ext.bitcode.llvm_codes import BlockId, ModuleStrtabCode
from goma_ext.errors import DecodeError

_ENTER_SUBBLOCK, _END_BLOCK, _UNABBREV_RECORD = 1, 0, 3
_TABLE_WIDTH = 4  # abbreviation id width of the rewritten module table (unabbreviated records only)


class _Bits:
    """LSB-first bit fields appended to a growing integer."""

    def __init__(self, value: int = 0, nbits: int = 0) -> None:
        self.value, self.nbits = value, nbits

    def fixed(self, value: int, width: int) -> None:
        self.value |= (value & ((1 << width) - 1)) << self.nbits
        self.nbits += width

    def vbr(self, value: int, width: int) -> None:
        hibit = 1 << (width - 1)
        while value >= hibit:
            self.fixed((value & (hibit - 1)) | hibit, width)
            value >>= width - 1
        self.fixed(value, width)

    def align32(self) -> None:
        self.nbits = (self.nbits + 31) & ~31


def _table_block(records: list[Record], names: Mapping[str, str], parent_width: int, at_bit: int) -> _Bits:
    """The module table as bits, starting at bit AT_BIT of the file (its alignment depends on it)."""
    bits = _Bits(0, at_bit)
    bits.fixed(_ENTER_SUBBLOCK, parent_width)
    bits.vbr(int(BlockId.MODULE_STRTAB_BLOCK), 8)
    bits.vbr(_TABLE_WIDTH, 4)
    bits.align32()
    length_at = bits.nbits
    bits.nbits += 32
    for record in records:
        ops = record.ops
        if record.code == int(ModuleStrtabCode.ENTRY) and ops:
            path = record.text(1)
            ops = (ops[0], *names.get(path, path).encode("utf-8", errors="surrogateescape"))
        bits.fixed(_UNABBREV_RECORD, _TABLE_WIDTH)
        bits.vbr(record.code, 6)
        bits.vbr(len(ops), 6)
        for op in ops:
            bits.vbr(op, 6)
    bits.fixed(_END_BLOCK, _TABLE_WIDTH)
    bits.align32()
    words = (bits.nbits - length_at - 32) // 32
    bits.value |= words << length_at
    return bits


def _module_table(module: Block) -> tuple[Block, list[Record]]:
    for entry in module.entries():
        if isinstance(entry, Block) and entry.block_id == BlockId.MODULE_STRTAB_BLOCK:
            if any(isinstance(e, Block) for e in entry.entries()):
                raise DecodeError("module table holds a sub-block", bit_offset=entry.bit_offset)
            return entry, [e for e in entry.entries() if isinstance(e, Record)]
    raise DecodeError("no MODULE_STRTAB_BLOCK in the MODULE_BLOCK", bit_offset=module.bit_offset)


def rename_modules(data: bytes, names: Mapping[str, str], *, name: str = "<index>") -> bytes:
    """DATA (a backend index) with module paths renamed by NAMES (old path -> new); other paths unchanged."""
    stream = Bitstream(data, name=name)
    if stream.wrapper is not None:
        raise DecodeError("a wrapped bitcode index cannot be renamed", bit_offset=0, file=name)
    module = next((b for b in stream.blocks() if b.block_id == BlockId.MODULE_BLOCK), None)
    if module is None:
        raise DecodeError("no MODULE_BLOCK", bit_offset=0, file=name)
    table, records = _module_table(module)
    start, end = table.bit_offset, table.end_bit
    prefix = int.from_bytes(data[: (start + 7) // 8], "little") & ((1 << start) - 1)
    bits = _table_block(records, names, module.abbrev_width, start)
    bits.value |= prefix
    new_end = bits.nbits
    out = bytearray(bits.value.to_bytes(new_end // 8, "little"))
    out += data[end // 8 :]
    length_at = (module.start_bit - 32) // 8  # the MODULE_BLOCK's length word, in 32-bit words
    old_words = int.from_bytes(out[length_at : length_at + 4], "little")
    out[length_at : length_at + 4] = (old_words + (new_end - end) // 32).to_bytes(4, "little")
    return bytes(out)
