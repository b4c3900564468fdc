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
from collections.abc import Iterator
from typing import BinaryIO

MODULE_BLOCK = 8  # llvm/Bitcode/LLVMBitCodes.h: MODULE_BLOCK_ID
MODULE_STRTAB_BLOCK = 19  # MODULE_STRTAB_BLOCK_ID: a summary index's modules
THIN_SUMMARY_BLOCK = 20  # GLOBALVAL_SUMMARY_BLOCK_ID: the module is ThinLTO
_MST_ENTRY, _MST_HASH = 1, 2  # bitc::ModulePathSymtabCodes: MST_CODE_ENTRY, MST_CODE_HASH
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


def _walk(bits: _Bits, end: int, abbrev_width: int, abbrevs: list[list[tuple[int, int]]] | None = None
          ) -> Iterator[tuple[int, int, int, int]]:
    """The entries of the block whose contents BITS is at, up to its END_BLOCK: (kind, value, bit, width) where
    kind is 1 (a nested block: value its id, bit where its contents start, width its abbreviation width), or a
    record (kind 3 for an unabbreviated one, else the abbreviation's id: value its code, bit where it starts).
    Nested blocks and records are skipped; the abbreviations the block defines are applied (and appended to
    ABBREVS). Raises IndexError on contents that do not parse (an abbreviation used before its definition, a
    cut-off block, no END_BLOCK)."""
    abbrevs = [] if abbrevs is None else abbrevs
    while bits.bit + abbrev_width <= end:
        start = bits.bit
        code = bits.fixed(abbrev_width)
        if code == 0:  # END_BLOCK
            return
        if code == 1:  # ENTER_SUBBLOCK: id, abbreviation width, then its length in words, 32-bit aligned
            block, width = bits.vbr(8), bits.vbr(4)
            bits.align32()
            words = bits.fixed(32)  # moves past the length word
            contents = bits.bit
            yield 1, block, contents, width
            bits.bit = contents + 32 * words
        elif code == 2:  # DEFINE_ABBREV
            ops: list[tuple[int, int]] = []
            for _ in range(bits.vbr(5)):
                if bits.fixed(1):
                    ops.append((_LITERAL, bits.vbr(8)))
                else:
                    encoding = bits.fixed(3)
                    ops.append((encoding, bits.vbr(5) if encoding in (_FIXED, _VBR) else 0))
            abbrevs.append(ops)
        else:
            bits.bit = start
            yield code, _record(bits, abbrev_width, abbrevs, end, keep=False)[0], start, 0
    raise IndexError("a block without its END_BLOCK")


def _record(bits: _Bits, abbrev_width: int, abbrevs: list[list[tuple[int, int]]], end: int, keep: bool = True
            ) -> list[int]:
    """The record at BITS (its code first, then its operands: blob bytes and array elements one by one), BITS
    moved past it; with KEEP false only the code, the rest skipped without decoding."""
    code = bits.fixed(abbrev_width)
    if code == 3:  # UNABBREV_RECORD: code, operand count, operands, all VBR6
        values = [bits.vbr(6)]
        for _ in range(_count(bits, end)):
            value = bits.vbr(6)
            if keep:
                values.append(value)
        return values
    if code - 4 >= len(abbrevs):
        raise IndexError("an abbreviation used before its definition")
    ops, values = abbrevs[code - 4], []
    for i, (encoding, width) in enumerate(ops):
        if encoding == _ARRAY:  # its element's encoding is the next (and last) operand
            element, element_width = ops[i + 1]
            if not (element == _CHAR6 or (element in (_FIXED, _VBR) and element_width)):
                raise IndexError("array elements of no bits")  # LLVM's reader rejects those too
            n = _count(bits, end)
            if keep or not values:
                values.extend(_operand(bits, element, element_width) for _ in range(n))
            elif element == _VBR:
                for _ in range(n):
                    bits.vbr(element_width)
            else:
                bits.bit += n * (6 if element == _CHAR6 else element_width)
            break
        if keep or not values:
            values.append(_operand(bits, encoding, width))
        else:
            _skip_operand(bits, encoding, width)
    return values


_CHAR6_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._"


def _operand(bits: _Bits, encoding: int, width: int) -> int:
    if encoding == _LITERAL:
        return width
    if encoding == _FIXED:
        return bits.fixed(width) if width else 0
    if encoding == _VBR:
        return bits.vbr(width) if width else 0
    if encoding == _CHAR6:
        return _CHAR6_ALPHABET[bits.fixed(6)]
    raise IndexError("a blob where a module path was expected")


def sub_blocks(data: bytes, abbrev_width: int) -> list[int] | None:
    """The ids of the blocks nested directly in a block whose contents are DATA (entries at ABBREV_WIDTH), in
    order; None when the contents do not parse (an abbreviation used before its definition, a cut-off block)."""
    try:
        return [value for kind, value, _bit, _width in _walk(_Bits(data), 8 * len(data), abbrev_width) if kind == 1]
    except IndexError:
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


def unhashed_modules(path: str | os.PathLike[str]) -> list[str] | None:
    """The modules a ThinLTO index file (lld's X.thinlto.bc) names without a module hash, by path; None when PATH
    does not parse as one.

    The index names each module it imports from in its MODULE_STRTAB_BLOCK: an ENTRY record (module id, path),
    followed by a HASH record when the module has one. clang -flto=thin always writes the hash; `opt
    -module-summary` does not unless asked (-module-hash). A backend's cache key and ninja's restat see an
    imported module's change only through its hash (thinlto_base.keys), so the thin-link step refuses an import
    from a module without one. Only the ENTRY records' lengths are read, and the paths of those without a hash."""
    with open(path, "rb") as f:
        module = next(((offset, size, width) for block, offset, size, width in _blocks(f) if block == MODULE_BLOCK),
                      None)
        if module is None:
            return [] if os.fstat(f.fileno()).st_size == 0 else None  # lld writes an empty index for an unused module
        f.seek(module[0])
        data = f.read(module[1])
    end = 8 * len(data)
    try:
        for kind, block, bit, width in _walk(_Bits(data), end, module[2]):
            if kind == 1 and block == MODULE_STRTAB_BLOCK:
                return _unhashed_entries(data, bit, end, width)
    except IndexError:
        return None
    return None


def _unhashed_entries(data: bytes, bit: int, end: int, width: int) -> list[str]:
    bits, abbrevs, entries = _Bits(data), [], []  # type: ignore[var-annotated]
    bits.bit = bit
    for kind, code, start, _width in _walk(bits, end, width, abbrevs):
        if kind == 1:
            continue
        if code == _MST_ENTRY:
            entries.append(start)
        elif code == _MST_HASH and entries:
            entries[-1] = -1
    names = []
    for start in (e for e in entries if e >= 0):
        bits.bit = start
        ops = _record(bits, width, abbrevs, end)
        names.append(bytes(ops[2:]).decode("utf-8", "surrogateescape"))  # code, module id, path
    return names
