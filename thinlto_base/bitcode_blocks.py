"""The top-level blocks of an LLVM bitcode file: which blocks, and how many bytes each (standard library only).

Only the outermost layer (llvm/docs/BitCodeFormat.rst: the optional wrapper header, the 'BC' 0xC0DE magic,
then ENTER_SUBBLOCK entries at abbreviation width 2, each followed, 32-bit aligned, by its length in words), so
that the thin-link step (`python -S`) can size a file's modules without decoding them. goma_ext.bitcode
decodes what is inside.

A ThinLTO object compiled with split LTO units (CFI, whole-program devirtualization) holds two modules: the
ThinLTO module first, then the part that goes to the link's regular-LTO module (clang's ThinLTOBitcodeWriter
writes them in this order), then the symbol and string tables.
"""

from __future__ import annotations

import os
import struct
from typing import BinaryIO

MODULE_BLOCK = 8  # llvm/Bitcode/LLVMBitCodes.h: MODULE_BLOCK_ID
_MAGIC = b"BC\xc0\xde"
_WRAPPER_MAGIC = 0x0B17C0DE
_ENTER_SUBBLOCK = 1


def _vbr(word: int, pos: int, width: int) -> tuple[int, int]:
    """A VBR-WIDTH value starting at bit POS of WORD (bits past 32 are not needed for a block header)."""
    value, shift, more = 0, 0, 1 << (width - 1)
    while True:
        chunk = (word >> pos) & ((1 << width) - 1)
        pos += width
        value |= (chunk & (more - 1)) << shift
        shift += width - 1
        if not chunk & more or pos >= 32:
            return value, pos


def top_level_blocks(f: BinaryIO) -> list[tuple[int, int]]:
    """(block id, size in bytes) of each top-level block of the bitcode file F, reading only block headers;
    [] when F is not bitcode."""
    head = f.read(20)
    start, end = 0, None
    if len(head) == 20 and struct.unpack_from("<I", head)[0] == _WRAPPER_MAGIC:
        start, size = struct.unpack_from("<II", head, 8)
        end = start + size
    f.seek(start)
    if f.read(4) != _MAGIC:
        return []
    blocks, pos = [], start + 4
    while end is None or pos + 8 <= end:
        f.seek(pos)
        header = f.read(8)
        if len(header) < 8:
            break
        word, words = struct.unpack("<II", header)
        if word & 3 != _ENTER_SUBBLOCK:
            break
        block_id, bit = _vbr(word, 2, 8)
        _abbrev_width, bit = _vbr(word, bit, 4)
        if bit >= 32:  # a header longer than one word: no block of LLVM's has such an id
            break
        blocks.append((block_id, words * 4))
        pos += 8 + words * 4
    return blocks


def regular_lto_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes of PATH's modules after its first: the part of a split-LTO-unit object that goes to the link's
    regular-LTO module (0 for a plain ThinLTO object, a native object or anything else)."""
    with open(path, "rb") as f:
        modules = [size for block, size in top_level_blocks(f) if block == MODULE_BLOCK]
    return sum(modules[1:])
