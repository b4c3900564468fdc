"""A small, fast LSB-first bit cursor for the variable-width fields of the LLVM bitstream."""

from __future__ import annotations

from goma_ext.bitcode.llvm_codes import CHAR6_ALPHABET
from goma_ext.errors import DecodeError

MAX_CHUNK_WIDTH = 32  # llvm/include/llvm/Bitstream/BitstreamReader.h (MaxChunkSize)
MAX_VALUE_BITS = 64  # every bitstream value fits a uint64_t
_ARRAY_CHUNK = 64  # array elements decoded per big-integer window


class BitCursor:
    """Reads fixed-width and VBR fields LSB-first from `data`, never past `limit` (a bit position).

    The reader narrows `limit` to the end of the block it is in, so a bogus length or count can never
    make it read another block's bits, and every read is checked before it allocates anything.
    """

    __slots__ = ("data", "end", "limit", "pos")

    def __init__(self, data: bytes, start_bit: int, end_bit: int) -> None:
        self.data = data
        self.pos = start_bit
        self.limit = end_bit
        self.end = end_bit

    @property
    def remaining(self) -> int:
        return self.limit - self.pos

    def error(self, message: str, at: int | None = None) -> DecodeError:
        return DecodeError(message, bit_offset=self.pos if at is None else at)

    def read(self, width: int) -> int:
        """A fixed-width field of 0..64 bits."""
        pos = self.pos
        new = pos + width
        if new > self.limit:
            raise self.error(f"truncated: need {width} bits, {self.limit - pos} left")
        self.pos = new
        value = int.from_bytes(self.data[pos >> 3 : (new + 7) >> 3], "little") >> (pos & 7)
        return value & ((1 << width) - 1)

    def read_vbr(self, width: int) -> int:
        """A VBR field with `width`-bit chunks (2..32); the value must fit in 64 bits."""
        start = self.pos
        piece = self.read(width)
        hibit = 1 << (width - 1)
        if piece < hibit:
            return piece
        mask = hibit - 1
        result = 0
        shift = 0
        while True:
            result |= (piece & mask) << shift
            if not piece & hibit:
                break
            shift += width - 1
            if shift >= MAX_VALUE_BITS:
                raise self.error(f"VBR{width} chain longer than a 64-bit value", at=start)
            piece = self.read(width)
        if result >> MAX_VALUE_BITS:
            raise self.error(f"VBR{width} value exceeds 64 bits", at=start)
        return result

    def read_fixed_array(self, width: int, count: int) -> list[int]:
        """`count` consecutive `width`-bit fields (1..32), decoded a window at a time."""
        total = width * count
        if total > self.limit - self.pos:
            raise self.error(f"array of {count} x {width}-bit elements runs past the end of its block")
        mask = (1 << width) - 1
        out: list[int] = []
        data = self.data
        pos = self.pos
        left = count
        while left:
            n = min(left, _ARRAY_CHUNK)
            end = pos + n * width
            window = int.from_bytes(data[pos >> 3 : (end + 7) >> 3], "little") >> (pos & 7)
            for _ in range(n):
                out.append(window & mask)
                window >>= width
            pos = end
            left -= n
        self.pos = pos
        return out

    def read_char6_array(self, count: int) -> list[int]:
        """`count` char6 characters, returned as their ASCII codes."""
        return [CHAR6_ALPHABET[c] for c in self.read_fixed_array(6, count)]

    def read_vbr_array(self, width: int, count: int) -> list[int]:
        if count * width > self.limit - self.pos:
            raise self.error(f"array of {count} VBR{width} elements runs past the end of its block")
        return [self.read_vbr(width) for _ in range(count)]

    def align32(self) -> None:
        pos = (self.pos + 31) & ~31
        if pos > self.limit:
            raise self.error("truncated: 32-bit alignment runs past the end of the data")
        self.pos = pos

    def read_bytes(self, count: int) -> bytes:
        """`count` whole bytes at a byte-aligned position."""
        if self.pos & 7:
            raise self.error("internal: byte read at an unaligned position")
        if count * 8 > self.limit - self.pos:
            raise self.error(f"blob of {count} bytes runs past the end of its block")
        start = self.pos >> 3
        self.pos += count * 8
        return self.data[start : start + count]
