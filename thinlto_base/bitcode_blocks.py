"""The top-level blocks of an LLVM bitcode file: which blocks, and how many bytes each (standard library only).

Only the outermost layer (llvm/docs/BitCodeFormat.rst: the optional wrapper header, the 'BC' 0xC0DE magic,
then ENTER_SUBBLOCK entries at abbreviation width 2, each followed, 32-bit aligned, by its length in words), so
that the thin-link step (`python -S`) can size a file's modules without decoding them. goma_ext.bitcode
decodes what is inside.

A ThinLTO object compiled with split LTO units (CFI, whole-program devirtualization) holds two modules: the
ThinLTO module first, then the part that goes to the link's regular-LTO module (clang's ThinLTOBitcodeWriter
writes them in this order), then the symbol and string tables. A TU with split LTO units but no externally
visible definition (tests in an anonymous namespace: ThinLTOBitcodeWriter finds no unique module ID) is written
whole as one regular-LTO module: its summary block is FULL_LTO_GLOBALVAL_SUMMARY_BLOCK, not a ThinLTO one
(lld, like llvm::BitcodeModule::getLTOInfo, takes a module without a ThinLTO summary block as regular LTO). For
that one case the reader walks the module block's own entries (records and abbreviation definitions skipped,
sub-blocks skipped by their length), and only for modules that name the module flag "ThinLTO", which clang
sets to 0 on every module it writes for regular LTO: the walk costs a pass over the module's top-level records.
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import BinaryIO

MODULE_BLOCK = 8  # llvm/Bitcode/LLVMBitCodes.h: MODULE_BLOCK_ID
THIN_SUMMARY_BLOCK = 20  # GLOBALVAL_SUMMARY_BLOCK_ID: the module is ThinLTO
_REGULAR_FLAG = b"ThinLTO"  # the module flag's name, in the metadata strings of a module written for regular LTO
_MAGIC = b"BC\xc0\xde"
_WRAPPER_MAGIC = 0x0B17C0DE
_ENTER_SUBBLOCK = 1


def top_level_blocks(f: BinaryIO) -> list[tuple[int, int]]:
    """(block id, size in bytes) of each top-level block of the bitcode file F, reading only block headers;
    [] when F is not bitcode."""
    return [(block, size) for block, _offset, size, _width in _blocks(f)]


def _blocks(f: BinaryIO) -> list[tuple[int, int, int, int]]:
    """(block id, file offset of its contents, size in bytes, abbreviation width) of each top-level block of F."""
    file_end = f.seek(0, os.SEEK_END)
    f.seek(0)
    head = f.read(20)
    start, end = 0, file_end
    if len(head) == 20 and struct.unpack_from("<I", head)[0] == _WRAPPER_MAGIC:
        start, size = struct.unpack_from("<II", head, 8)
        end = min(start + size, file_end)
    f.seek(start)
    if f.read(4) != _MAGIC:
        return []
    blocks, pos = [], start + 4
    while pos + 8 <= end:
        f.seek(pos)
        header = f.read(8)
        if len(header) < 8:
            break
        bits, words = _Bits(header[:4]), struct.unpack_from("<I", header, 4)[0]
        try:
            if bits.fixed(2) != _ENTER_SUBBLOCK:
                break
            block_id, abbrev_width = bits.vbr(8), bits.vbr(4)
        except IndexError:  # a header longer than one word: no block of LLVM's has such an id
            break
        if bits.bit >= 32 or pos + 8 + words * 4 > end:  # as above, or a block longer than the file
            break
        blocks.append((block_id, pos + 8, words * 4, abbrev_width))
        pos += 8 + words * 4
    return blocks


class _Bits:
    """A cursor over the bits of a block's contents (LLVM's bit order: least significant bit of each byte first)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.bit = data, 0

    def fixed(self, width: int) -> int:
        byte = self.bit >> 3
        if byte >= len(self.data):
            raise IndexError("read past the block's end")
        value = int.from_bytes(self.data[byte:byte + 9], "little") >> (self.bit & 7)
        self.bit += width
        return value & ((1 << width) - 1)

    def vbr(self, width: int) -> int:
        value, shift, more = 0, 0, 1 << (width - 1)
        while True:
            chunk = self.fixed(width)
            value |= (chunk & (more - 1)) << shift
            shift += width - 1
            if not chunk & more:
                return value
            if shift >= 64:  # LLVM's reader takes no wider value either
                raise IndexError("a VBR value wider than 64 bits")

    def align32(self) -> None:
        self.bit = (self.bit + 31) & ~31


_LITERAL, _FIXED, _VBR, _ARRAY, _CHAR6, _BLOB = -1, 1, 2, 3, 4, 5  # abbreviation operand encodings


def _skip_operand(bits: _Bits, encoding: int, width: int) -> None:
    if encoding == _FIXED:
        bits.bit += width
    elif encoding == _VBR:
        if width:
            bits.vbr(width)
    elif encoding == _CHAR6:
        bits.bit += 6
    elif encoding == _BLOB:
        n = bits.vbr(6)
        bits.align32()
        bits.bit += 8 * n
        bits.align32()


def _count(bits: _Bits, end: int) -> int:
    """A VBR6 element count, at most the bits left (each element takes one at least: the walk refuses arrays of
    elements of no bits): a corrupt count must not spin the walk."""
    n = bits.vbr(6)
    if n > end - bits.bit:
        raise IndexError("a count larger than the block")
    return n


def sub_blocks(data: bytes, abbrev_width: int) -> list[int] | None:
    """The ids of the blocks nested directly in a block whose contents are DATA (entries at ABBREV_WIDTH), in
    order; None when the contents do not parse (an abbreviation used before its definition, a cut-off block)."""
    bits, end = _Bits(data), 8 * len(data)
    abbrevs: list[list[tuple[int, int]]] = []
    found: list[int] = []
    try:
        while bits.bit + abbrev_width <= end:
            code = bits.fixed(abbrev_width)
            if code == 0:  # END_BLOCK
                return found
            if code == 1:  # ENTER_SUBBLOCK: id, abbreviation width, then its length in words, 32-bit aligned
                found.append(bits.vbr(8))
                bits.vbr(4)
                bits.align32()
                words = bits.fixed(32)  # moves past the length word
                bits.bit += 32 * words
            elif code == 2:  # DEFINE_ABBREV
                ops: list[tuple[int, int]] = []
                for _ in range(bits.vbr(5)):
                    if bits.fixed(1):
                        ops.append((_LITERAL, bits.vbr(8)))
                    else:
                        encoding = bits.fixed(3)
                        ops.append((encoding, bits.vbr(5) if encoding in (_FIXED, _VBR) else 0))
                abbrevs.append(ops)
            elif code == 3:  # UNABBREV_RECORD: code, operand count, operands, all VBR6
                bits.vbr(6)
                for _ in range(_count(bits, end)):
                    bits.vbr(6)
            else:
                ops = abbrevs[code - 4]
                for i, (encoding, width) in enumerate(ops):
                    if encoding == _ARRAY:  # its element's encoding is the next (and last) operand
                        element, element_width = ops[i + 1]
                        if not (element == _CHAR6 or (element in (_FIXED, _VBR) and element_width)):
                            return None  # elements of no bits (LLVM's reader rejects those too)
                        for _ in range(_count(bits, end)):
                            _skip_operand(bits, element, element_width)
                        break
                    _skip_operand(bits, encoding, width)
    except IndexError:
        return None
    return None


def _regular_single_module(f: BinaryIO, offset: int, size: int, abbrev_width: int) -> bool:
    """Whether the one module of a file (its block at OFFSET, SIZE bytes) is written for regular LTO."""
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:  # searched where it is, not copied
        if mapped.find(_REGULAR_FLAG, offset, offset + size) < 0:
            return False
        data = mapped[offset:offset + size]
    nested = sub_blocks(data, abbrev_width)
    return nested is not None and THIN_SUMMARY_BLOCK not in nested


def regular_lto_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes of PATH's bitcode that go to the link's regular-LTO module: its modules after the first (the part of
    a split-LTO-unit object), or its one module when that is written for regular LTO (0 for a ThinLTO object
    without split LTO unit, a native object or anything else)."""
    with open(path, "rb") as f:
        modules = [(offset, size, width) for block, offset, size, width in _blocks(f) if block == MODULE_BLOCK]
        if len(modules) == 1 and _regular_single_module(f, *modules[0]):
            return modules[0][1]
    return sum(size for _offset, size, _width in modules[1:])
