"""Generic LLVM bitstream reader: wrapper header, magic, abbreviations, BLOCKINFO and lazy, skippable blocks.

The layout follows llvm/docs/BitCodeFormat.rst. The byte-aligned wrapper header is a construct
definition; the LSB-first variable-width fields go through `BitCursor`. Blocks are lazy:
iterating a `Block` yields its records and sub-blocks, and a sub-block the caller does not iterate is
skipped by its length word without being decoded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import construct as cs

from goma_ext.bitcode.abbrev_compiler import Decoder, compile_abbrev
from goma_ext.bitcode.bitcursor import MAX_CHUNK_WIDTH, BitCursor
from goma_ext.bitcode.llvm_codes import (
    BITCODE_MAGIC,
    BLOCKINFO_BLOCK_ID,
    WRAPPER_MAGIC,
    AbbrevId,
    BlockInfoCode,
    OperandKind,
    block_name,
)
from goma_ext.errors import DecodeError

MAX_BLOCK_DEPTH = 32  # LLVM's own files nest 4 deep at most
TOP_LEVEL_ABBREV_WIDTH = 2

# llvm/docs/BitCodeFormat.rst "Bitcode Wrapper Format": five little-endian 32-bit fields.
WRAPPER_HEADER = cs.Struct(
    "magic" / cs.Const(WRAPPER_MAGIC, cs.Int32ul),
    "version" / cs.Int32ul,
    "offset" / cs.Int32ul,
    "size" / cs.Int32ul,
    "cputype" / cs.Int32ul,
)

_END, _ENTER, _DEFINE, _UNABBREV = (int(a) for a in list(AbbrevId)[:4])
_LITERAL, _FIXED, _VBR, _ARRAY, _CHAR6, _BLOB = (int(k) for k in OperandKind)
_from_bytes = int.from_bytes
_FIRST_APPLICATION_ABBREV = int(AbbrevId.FIRST_APPLICATION_ABBREV)


@dataclass(frozen=True)
class Wrapper:
    """The optional bitcode wrapper header (Darwin): where the bitstream sits inside the file."""

    version: int
    offset: int
    size: int
    cputype: int


class AbbrevOp(NamedTuple):
    """One operand of an abbreviation."""

    kind: OperandKind
    value: int = 0  # the literal value, or the bit width of a FIXED/VBR operand


@dataclass(frozen=True)
class Abbrev:
    """An abbreviation: how the fields of a record are encoded. ARRAY is second to last, BLOB last.

    `decoder` is the abbreviation compiled to a straight-line function (see abbrev_compiler).
    """

    ops: tuple[AbbrevOp, ...]
    decoder: Decoder = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "decoder", compile_abbrev(tuple((int(k), v) for k, v in self.ops)))


class Record(NamedTuple):
    """One decoded record: its code, its operands (char6 decoded to ASCII) and its blob, if any.

    A NamedTuple rather than a frozen dataclass: one is built per record, and tuple construction is
    several times cheaper, which matters for 2,000-module indexes.
    """

    code: int
    ops: tuple[int, ...]
    abbrev_id: int
    bit_offset: int
    blob: bytes | None = None

    def text(self, start: int = 0) -> str:
        """Operands from `start` on read as a string of byte values (module paths, triples)."""
        try:
            return bytes(self.ops[start:]).decode("utf-8", errors="surrogateescape")
        except ValueError as e:
            raise DecodeError("record operands are not characters", bit_offset=self.bit_offset) from e


class Block:
    """One block of the stream. Iterate `entries()` for its records and sub-blocks (lazily)."""

    __slots__ = ("_inherited", "abbrev_width", "bit_offset", "block_id", "end_bit", "path", "start_bit", "stream")

    def __init__(
        self, stream: Bitstream, block_id: int, abbrev_width: int, bit_offset: int, start_bit: int, end_bit: int,
        path: tuple[str, ...],
    ) -> None:
        self.stream = stream
        self.block_id = block_id
        self.abbrev_width = abbrev_width
        self.bit_offset = bit_offset  # where its ENTER_SUBBLOCK starts
        self.start_bit = start_bit  # first bit after the length word
        self.end_bit = end_bit
        self.path = path
        self._inherited: list[Abbrev] = stream.blockinfo.get(block_id, [])

    @property
    def name(self) -> str:
        return block_name(self.block_id)

    @property
    def depth(self) -> int:
        return len(self.path)

    def locate(self, error: DecodeError) -> DecodeError:
        """`error` with this block's path and file filled in where missing (for errors callers raise
        about this block's records, e.g. from Record.text)."""
        return error.with_context(block_path=error.block_path or self.path, file=error.file or self.stream.name)

    def records(self) -> Iterator[Record]:
        """The records of this block, skipping every sub-block."""
        for entry in self.entries():
            if isinstance(entry, Record):
                yield entry

    def entries(self) -> Iterator[Record | Block]:
        """Records and sub-blocks in stream order; BLOCKINFO blocks are absorbed, not yielded."""
        cur = self.stream.cursor
        width = self.abbrev_width
        end = self.end_bit
        data = cur.data
        aid_mask = (1 << width) - 1
        local: list[Abbrev] = []
        inherited = self._inherited  # BLOCKINFO abbrevs for this id; only those defined before entry apply
        n_inherited = len(inherited)
        top = not self.path
        pos = self.start_bit
        try:
            while True:
                cur.pos = pos
                cur.limit = end
                if top and pos == end:
                    return
                at = pos
                if pos + width <= end:  # inline cur.read(width): one abbreviation id per record
                    aid = (_from_bytes(data[pos >> 3 : (pos + width + 7) >> 3], "little") >> (pos & 7)) & aid_mask
                    cur.pos = pos + width
                else:
                    aid = cur.read(width)
                if aid >= _FIRST_APPLICATION_ABBREV:
                    index = aid - _FIRST_APPLICATION_ABBREV
                    if index < n_inherited:
                        abbrev = inherited[index]
                    elif index - n_inherited < len(local):
                        abbrev = local[index - n_inherited]
                    else:
                        defined = n_inherited + len(local)
                        raise cur.error(f"abbreviation id {aid} not defined ({defined} abbreviations)", at)
                    if top:
                        raise cur.error(f"abbreviation id {aid} at top level; only blocks may appear there", at)
                    record = read_abbreviated(cur, abbrev, aid, at)
                    pos = cur.pos
                    yield record
                elif aid == _END:
                    if top:
                        raise cur.error("END_BLOCK at top level", at)
                    cur.align32()
                    if cur.pos != end:
                        raise cur.error(
                            f"END_BLOCK at bit {cur.pos}, but the block length says it ends at bit {end}", at
                        )
                    return
                elif aid == _ENTER:
                    child = self._enter(cur, at)
                    if child.block_id == BLOCKINFO_BLOCK_ID:
                        self.stream._read_blockinfo(child)
                    else:
                        yield child
                    pos = child.end_bit
                elif top:
                    raise cur.error(f"abbreviation id {aid} at top level; only blocks may appear there", at)
                elif aid == _DEFINE:
                    local.append(read_abbrev_definition(cur))
                    pos = cur.pos
                else:
                    record = read_unabbreviated(cur, at)
                    pos = cur.pos
                    yield record
        except DecodeError as e:
            if e.block_path and e.file:
                raise
            raise self.locate(e) from e

    def _enter(self, cur: BitCursor, at: int) -> Block:
        block_id = cur.read_vbr(8)
        width = cur.read_vbr(4)
        cur.align32()
        words = cur.read(32)
        start = cur.pos
        name = block_name(block_id)
        if not 1 <= width <= MAX_CHUNK_WIDTH:
            raise cur.error(f"{name} has abbreviation width {width}, outside 1..{MAX_CHUNK_WIDTH}", at)
        end = start + 32 * words
        if end > self.end_bit:
            raise cur.error(
                f"{name} length of {words} words runs past the end of its parent "
                f"({(self.end_bit - start) // 32} words left)",
                at,
            )
        if len(self.path) >= MAX_BLOCK_DEPTH:
            raise cur.error(f"{name} nested deeper than {MAX_BLOCK_DEPTH} blocks", at)
        return Block(self.stream, block_id, width, at, start, end, (*self.path, name))


def read_abbrev_definition(cur: BitCursor) -> Abbrev:
    """The operands of a DEFINE_ABBREV (the abbreviation id has been read)."""
    at = cur.pos
    count = cur.read_vbr(5)
    if count == 0:
        raise cur.error("DEFINE_ABBREV with no operands", at)
    if count > cur.remaining:
        raise cur.error(f"DEFINE_ABBREV with {count} operands runs past the end of its block", at)
    ops: list[AbbrevOp] = []
    for _ in range(count):
        if cur.read(1):
            ops.append(AbbrevOp(OperandKind.LITERAL, cur.read_vbr(8)))
            continue
        encoding = cur.read(3)
        if encoding in (_FIXED, _VBR):
            width = cur.read_vbr(5)
            if width > MAX_CHUNK_WIDTH or (encoding == _VBR and width == 1):
                raise cur.error(f"{OperandKind(encoding).name} operand width {width} is not allowed", at)
            # llvm BitstreamReader: a zero-width FIXED or VBR operand is the literal 0.
            ops.append(AbbrevOp(OperandKind(encoding), width) if width else AbbrevOp(OperandKind.LITERAL, 0))
        elif encoding in (_ARRAY, _CHAR6, _BLOB):
            ops.append(AbbrevOp(OperandKind(encoding)))
        else:
            raise cur.error(f"unknown abbreviation operand encoding {encoding}", at)
    _check_abbrev_shape(cur, ops, at)
    return Abbrev(tuple(ops))


def _check_abbrev_shape(cur: BitCursor, ops: list[AbbrevOp], at: int) -> None:
    if ops[0].kind in (OperandKind.ARRAY, OperandKind.BLOB):
        raise cur.error("abbreviation starts with an ARRAY or BLOB operand", at)
    for i, op in enumerate(ops):
        if op.kind == OperandKind.ARRAY:
            if i != len(ops) - 2:
                raise cur.error("ARRAY operand is not second to last", at)
            if ops[-1].kind not in (OperandKind.FIXED, OperandKind.VBR, OperandKind.CHAR6):
                raise cur.error("ARRAY element must be FIXED, VBR or CHAR6", at)
            return
        if op.kind == OperandKind.BLOB and i != len(ops) - 1:
            raise cur.error("BLOB operand is not last", at)


def read_unabbreviated(cur: BitCursor, at: int) -> Record:
    code = cur.read_vbr(6)
    count = cur.read_vbr(6)
    return Record(code, tuple(cur.read_vbr_array(6, count)), _UNABBREV, at)


def read_abbreviated(cur: BitCursor, abbrev: Abbrev, abbrev_id: int, at: int) -> Record:
    values: list[int] = []
    blob = abbrev.decoder(cur, values)
    return Record(values[0], tuple(values[1:]), abbrev_id, at, blob)


class Bitstream:
    """A whole bitstream file: `blocks()` iterates the top-level blocks, lazily."""

    def __init__(self, data: bytes, *, name: str = "<bytes>", magic: bytes | None = BITCODE_MAGIC) -> None:
        self.data = data
        self.name = name
        self.blockinfo: dict[int, list[Abbrev]] = {}
        try:
            self.wrapper, start, end = _locate_stream(data)
            self.magic = data[start : start + 4]
            if magic is not None and self.magic != magic:
                raise DecodeError(f"bad magic {self.magic.hex()}, expected {magic.hex()}", bit_offset=start * 8)
        except DecodeError as e:
            raise e.with_context(file=name) from e
        self.cursor = BitCursor(data, (start + 4) * 8, end * 8)
        self._top = Block(self, -1, TOP_LEVEL_ABBREV_WIDTH, (start + 4) * 8, (start + 4) * 8, end * 8, ())

    def blocks(self) -> Iterator[Block]:
        try:
            for entry in self._top.entries():
                if isinstance(entry, Block):
                    yield entry
        except DecodeError as e:
            raise e.with_context(file=self.name) from e

    def _read_blockinfo(self, block: Block) -> None:
        """Absorb a BLOCKINFO block: its abbreviations go to the block ids named by SETBID.

        Like LLVM's reader (BitstreamCursor::ReadBlockInfoBlock, whose result replaces the old info), a
        new BLOCKINFO block replaces the previous one: each module of a multi-module file has its own.
        """
        cur = self.cursor
        cur.pos, cur.limit = block.start_bit, block.end_bit
        target: int | None = None
        info: dict[int, list[Abbrev]] = {}
        try:
            while True:
                at = cur.pos
                aid = cur.read(block.abbrev_width)
                if aid == _END:
                    cur.align32()
                    if cur.pos != block.end_bit:
                        raise cur.error("BLOCKINFO END_BLOCK does not match its length", at)
                    self.blockinfo = info
                    return
                if aid == _ENTER:
                    child = block._enter(cur, at)
                    cur.pos = child.end_bit
                elif aid == _DEFINE:
                    abbrev = read_abbrev_definition(cur)
                    if target is None:
                        raise cur.error("DEFINE_ABBREV in BLOCKINFO before SETBID", at)
                    info.setdefault(target, []).append(abbrev)
                elif aid == _UNABBREV:
                    record = read_unabbreviated(cur, at)
                    if record.code == BlockInfoCode.SETBID:
                        if not record.ops:
                            raise cur.error("SETBID without a block id", at)
                        target = record.ops[0]
                else:
                    raise cur.error(f"abbreviation id {aid} in BLOCKINFO", at)
        except DecodeError as e:
            if e.block_path:
                raise
            raise e.with_context(block_path=block.path, file=self.name) from e


def _locate_stream(data: bytes) -> tuple[Wrapper | None, int, int]:
    """Byte offsets (start of magic, end) of the bitstream, unwrapping a wrapper header if present."""
    if len(data) < 4:
        raise DecodeError(f"truncated: {len(data)} bytes, too short for a bitstream magic", bit_offset=0)
    wrapper = None
    start, end = 0, len(data)
    if cs.Int32ul.parse(data[:4]) == WRAPPER_MAGIC:
        try:
            header = WRAPPER_HEADER.parse(data)
        except cs.ConstructError as e:
            raise DecodeError(
                f"truncated bitcode wrapper header: {len(data)} bytes, need {WRAPPER_HEADER.sizeof()}", bit_offset=0
            ) from e
        wrapper = Wrapper(header.version, header.offset, header.size, header.cputype)
        start, end = wrapper.offset, wrapper.offset + wrapper.size
        if start < WRAPPER_HEADER.sizeof() or end > len(data) or wrapper.size < 4:
            raise DecodeError(
                f"wrapper header places the bitstream at bytes {start}..{end}, outside the {len(data)}-byte file",
                bit_offset=8,
            )
    if (end - start) % 4:
        raise DecodeError(f"bitstream of {end - start} bytes is not a multiple of 4 bytes", bit_offset=end * 8)
    return wrapper, start, end
