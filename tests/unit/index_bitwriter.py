"""Test helper: a tiny LLVM bitstream writer, to synthesize streams the decoder must accept or reject."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from goma_ext.bitcode.llvm_codes import BITCODE_MAGIC, CHAR6_ALPHABET

# An abbreviation operand as the writer takes it: ("literal", v) | ("fixed", w) | ("vbr", w) | ("array",)
# | ("char6",) | ("blob",)
Op = tuple


class BitWriter:
    """Appends LSB-first fields to a growing integer; `getvalue()` pads to 32 bits and returns bytes."""

    def __init__(self, width: int = 2) -> None:
        self.value = 0
        self.nbits = 0
        self.width = width  # current abbreviation id width

    def fixed(self, value: int, width: int) -> BitWriter:
        self.value |= (value & ((1 << width) - 1)) << self.nbits
        self.nbits += width
        return self

    def vbr(self, value: int, width: int) -> BitWriter:
        hibit = 1 << (width - 1)
        while value >= hibit:
            self.fixed((value & (hibit - 1)) | hibit, width)
            value >>= width - 1
        return self.fixed(value, width)

    def align32(self) -> BitWriter:
        self.nbits = (self.nbits + 31) & ~31
        return self

    def append(self, other: BitWriter) -> BitWriter:
        self.value |= other.value << self.nbits
        self.nbits += other.nbits
        return self

    def block(self, block_id: int, width: int, body: Callable[[BitWriter], object], *, length: int | None = None) -> BitWriter:
        """ENTER_SUBBLOCK, body, END_BLOCK; `length` overrides the length word (for bogus-length tests)."""
        self.fixed(1, self.width).vbr(block_id, 8).vbr(width, 4).align32()
        inner = BitWriter(width)
        body(inner)
        inner.fixed(0, width).align32()
        self.fixed(inner.nbits // 32 if length is None else length, 32)
        return self.append(inner)

    def define_abbrev(self, ops: Sequence[Op]) -> BitWriter:
        self.fixed(2, self.width).vbr(len(ops), 5)
        for op in ops:
            if op[0] == "literal":
                self.fixed(1, 1).vbr(op[1], 8)
            else:
                self.fixed(0, 1).fixed({"fixed": 1, "vbr": 2, "array": 3, "char6": 4, "blob": 5}[op[0]], 3)
                if op[0] in ("fixed", "vbr"):
                    self.vbr(op[1], 5)
        return self

    def unabbrev(self, code: int, ops: Sequence[int]) -> BitWriter:
        self.fixed(3, self.width).vbr(code, 6).vbr(len(ops), 6)
        for v in ops:
            self.vbr(v, 6)
        return self

    def abbreviated(self, abbrev_id: int, ops: Sequence[Op], values: Sequence[int], blob: bytes = b"") -> BitWriter:
        """A record in abbreviation `ops`; `values` are the non-literal scalar values then the array items."""
        self.fixed(abbrev_id, self.width)
        vals = list(values)
        for i, op in enumerate(ops):
            kind = op[0]
            if kind == "fixed":
                self.fixed(vals.pop(0), op[1])
            elif kind == "vbr":
                self.vbr(vals.pop(0), op[1])
            elif kind == "char6":
                self.fixed(CHAR6_ALPHABET.index(vals.pop(0)), 6)
            elif kind == "array":
                elt = ops[i + 1]
                self.vbr(len(vals), 6)
                for v in vals:
                    if elt[0] == "fixed":
                        self.fixed(v, elt[1])
                    elif elt[0] == "vbr":
                        self.vbr(v, elt[1])
                    else:
                        self.fixed(CHAR6_ALPHABET.index(v), 6)
                break
            elif kind == "blob":
                self.vbr(len(blob), 6).align32()
                for b in blob:
                    self.fixed(b, 8)
                self.align32()
        return self

    def getvalue(self) -> bytes:
        self.align32()
        return self.value.to_bytes(self.nbits // 8, "little")


def stream(*bodies: Callable[[BitWriter], object]) -> bytes:
    """Magic followed by top-level content written by each body."""
    w = BitWriter(2)
    for body in bodies:
        body(w)
    return BITCODE_MAGIC + w.getvalue()
