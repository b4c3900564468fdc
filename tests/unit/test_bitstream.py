"""The generic bitstream reader on synthesized streams and on real LLVM files: fields, abbrevs, blocks, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goma_ext.bitcode.bitcursor import BitCursor
from goma_ext.bitcode.bitstream import Bitstream, Block, Record
from goma_ext.bitcode.llvm_codes import CHAR6_ALPHABET, BlockId
from goma_ext.errors import DecodeError, GomaExtError
from tests import budget
from tests.unit.index_bitwriter import BitWriter, stream

DATA = Path(__file__).parent / "index_data"


def walk(block: Block) -> list:
    """Everything in a block, sub-blocks as (id, [contents])."""
    out: list = []
    for e in block.entries():
        out.append((e.block_id, walk(e)) if isinstance(e, Block) else (e.code, e.ops, e.blob))
    return out


def decode(data: bytes) -> list:
    return [(b.block_id, walk(b)) for b in Bitstream(data, name="t.bc").blocks()]


@pytest.mark.parametrize("value", [0, 1, 31, 32, 1000, 2**32 - 1, 2**63, 2**64 - 1])
@pytest.mark.parametrize("width", [2, 4, 6, 8, 32])
def test_vbr_round_trip(value: int, width: int) -> None:
    w = BitWriter().fixed(5, 3).vbr(value, width).fixed(1, 1)
    data = w.getvalue()
    cur = BitCursor(data, 0, len(data) * 8)
    assert cur.read(3) == 5
    assert cur.read_vbr(width) == value
    assert cur.read(1) == 1


def test_overlong_vbr_chain_is_an_error() -> None:
    w = BitWriter()
    for _ in range(20):
        w.fixed(0x20, 6)  # continuation bit set, no payload
    data = w.fixed(0, 6).getvalue()
    with pytest.raises(DecodeError, match="64-bit"):
        BitCursor(data, 0, len(data) * 8).read_vbr(6)


def test_every_operand_kind_blockinfo_and_nesting() -> None:
    abbrev = [("literal", 7), ("fixed", 3), ("vbr", 6), ("char6",), ("array",), ("fixed", 8)]
    blob_abbrev = [("literal", 9), ("blob",)]
    char6_array = [("literal", 4), ("array",), ("char6",)]

    def blockinfo(w: BitWriter) -> None:
        w.unabbrev(1, [12])  # SETBID 12
        w.define_abbrev(char6_array)

    def inner(w: BitWriter) -> None:
        w.abbreviated(4, char6_array, [ord(c) for c in "ab.Z_9"])

    def outer(w: BitWriter) -> None:
        w.block(0, 2, blockinfo)
        w.define_abbrev(abbrev).define_abbrev(blob_abbrev)
        w.abbreviated(4, abbrev, [5, 1000, ord("x"), 1, 2, 255])
        w.abbreviated(5, blob_abbrev, [], blob=b"hello")
        w.unabbrev(3, [1, 2**40])
        w.block(12, 3, inner)

    assert decode(stream(lambda w: w.block(8, 3, outer))) == [
        (8, [(7, (5, 1000, ord("x"), 1, 2, 255), None), (9, (), b"hello"), (3, (1, 2**40), None),
             (12, [(4, tuple(map(ord, "ab.Z_9")), None)])]),
    ]


def test_unvisited_blocks_are_skipped_by_length() -> None:
    data = stream(lambda w: w.block(8, 3, lambda b: b.block(9, 4, lambda c: c.unabbrev(1, [1])).unabbrev(2, [7])))
    top = next(Bitstream(data).blocks())
    records = list(top.records())
    assert [(r.code, r.ops) for r in records] == [(2, (7,))]


def test_real_files_walk_completely() -> None:
    for path in DATA.glob("llvm*"):
        if path.suffix in (".o", ".bc"):
            blocks = decode(path.read_bytes())
            assert blocks, path


def test_wrapped_file_is_unwrapped() -> None:
    s = Bitstream((DATA / "llvm19-darwin-wrapped.o").read_bytes())
    assert s.wrapper is not None and s.wrapper.offset == 20
    assert BlockId.MODULE_BLOCK in [b.block_id for b in s.blocks()]


def _error(data: bytes) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        decode(data)
    assert isinstance(info.value, GomaExtError)
    assert "\n" not in str(info.value)
    return info.value


def test_wrong_magic() -> None:
    e = _error(b"BC\xc0\xdf" + bytes(8))
    assert "magic" in str(e) and "t.bc: byte 0" in str(e)


def test_truncated_file() -> None:
    data = (DATA / "llvm19-a.o.thinlto.bc").read_bytes()
    e = _error(data[:100])
    assert "MODULE_BLOCK" in str(e)


def test_bogus_block_length() -> None:
    data = stream(lambda w: w.block(8, 3, lambda b: b.block(9, 3, lambda c: c.unabbrev(1, [1]), length=1000)))
    e = _error(data)
    assert "runs past the end" in str(e) and e.block_path == ("MODULE_BLOCK",) and e.byte_offset == 12


def test_block_length_shorter_than_contents() -> None:
    data = stream(lambda w: w.block(8, 3, lambda b: b.unabbrev(1, list(range(40))), length=1))
    assert "runs past the end of its block" in str(_error(data))


def test_abbrev_id_out_of_range() -> None:
    data = stream(lambda w: w.block(8, 3, lambda b: b.fixed(6, 3)))
    e = _error(data)
    assert "abbreviation id 6 not defined" in str(e) and e.block_path == ("MODULE_BLOCK",)


def test_array_longer_than_data() -> None:
    ops = [("literal", 1), ("array",), ("fixed", 8)]
    data = stream(lambda w: w.block(8, 3, lambda b: b.define_abbrev(ops).fixed(4, 3).vbr(10**6, 6)))
    assert "array of 1000000" in str(_error(data))


def test_blob_longer_than_data() -> None:
    ops = [("literal", 1), ("blob",)]
    data = stream(lambda w: w.block(8, 3, lambda b: b.define_abbrev(ops).fixed(4, 3).vbr(10**6, 6)))
    assert "blob of 1000000 bytes" in str(_error(data))


def test_unabbreviated_record_with_too_many_ops() -> None:
    data = stream(lambda w: w.block(8, 3, lambda b: b.fixed(3, 3).vbr(1, 6).vbr(2**40, 6)))
    assert "runs past the end" in str(_error(data))


def test_nesting_limit() -> None:
    def nest(depth: int):
        return lambda w: w.block(8, 3, nest(depth - 1)) if depth else None

    e = _error(stream(nest(40)))
    assert "nested deeper than 32" in str(e) and len(e.block_path) == 32


def test_bad_abbrev_definitions() -> None:
    for ops, message in [
        ([("array",), ("fixed", 8)], "starts with an ARRAY"),
        ([("literal", 1), ("array",), ("fixed", 8), ("fixed", 8)], "second to last"),
        ([("literal", 1), ("array",), ("literal", 3)], "ARRAY element"),
        ([("literal", 1), ("fixed", 40)], "width 40"),
        ([], "no operands"),
    ]:
        assert message in str(_error(stream(lambda w: w.block(8, 3, lambda b: b.define_abbrev(ops))))), ops


def test_top_level_record_is_an_error() -> None:
    assert "top level" in str(_error(stream(lambda w: w.unabbrev(1, [1]))))


def test_record_text_rejects_non_characters() -> None:
    with pytest.raises(DecodeError):
        Record(1, (300,), 3, 0).text()


@pytest.mark.parametrize("value", [0, 127, 128, 2**14 - 1, 2**14, 2**40, 2**64 - 1])
def test_compiled_abbrev_paths(value: int) -> None:
    """Inline and fall-back paths of the compiled decoders: 1-, 2- and n-chunk VBRs, short and long arrays."""
    vbr_array = [("literal", 1), ("vbr", 8), ("array",), ("vbr", 6)]
    long_array = [("literal", 2), ("fixed", 5), ("array",), ("fixed", 7)]
    chars = [ord(c) for c in "x" * 100]

    def body(w: BitWriter) -> None:
        w.define_abbrev(vbr_array).define_abbrev(long_array)
        w.abbreviated(4, vbr_array, [value, value, 1, value])
        w.abbreviated(5, long_array, [17, *chars])

    assert decode(stream(lambda w: w.block(8, 3, body))) == [
        (8, [(1, (value, value, 1, value), None), (2, (17, *chars), None)])
    ]


def test_huge_claimed_sizes_allocate_nothing() -> None:
    """Counts and lengths are checked against the bits left before anything is allocated."""
    import tracemalloc

    array = [("literal", 1), ("array",), ("fixed", 1)]
    blob = [("literal", 1), ("blob",)]
    cases = [
        stream(lambda w: w.block(8, 3, lambda b: b.define_abbrev(array).fixed(4, 3).vbr(2**62, 6))),
        stream(lambda w: w.block(8, 3, lambda b: b.define_abbrev(blob).fixed(4, 3).vbr(2**62, 6))),
        stream(lambda w: w.block(8, 3, lambda b: b.fixed(3, 3).vbr(1, 6).vbr(2**62, 6))),
        stream(lambda w: w.block(8, 3, lambda b: b.fixed(2, 3).vbr(2**30, 5))),
    ]
    tracemalloc.start()
    try:
        for data in cases:
            with pytest.raises(DecodeError, match="runs past the end"):
                decode(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


_SCALAR = st.one_of(
    st.tuples(st.just("literal"), st.integers(0, 2**20)),
    st.tuples(st.just("fixed"), st.integers(1, 32)),
    st.tuples(st.just("vbr"), st.integers(2, 32)),
    st.tuples(st.just("char6")),
)
_TAIL = st.one_of(
    st.just(()),
    st.tuples(st.just(("array",)), st.one_of(st.tuples(st.just("fixed"), st.integers(1, 32)),
                                             st.tuples(st.just("vbr"), st.integers(2, 32)), st.just(("char6",)))),
    st.just((("blob",),)),
)


def _value(op: tuple, draw: st.DrawFn) -> int:
    if op[0] == "char6":
        return draw(st.sampled_from(list(CHAR6_ALPHABET)))
    if op[0] == "fixed":
        return draw(st.integers(0, 2 ** op[1] - 1))
    return draw(st.integers(0, 2**64 - 1))


@st.composite
def abbreviated_records(draw: st.DrawFn) -> tuple[list, list, tuple, bytes | None]:
    """(abbrev ops, values for the writer, expected decoded operands, expected blob)."""
    scalars = [draw(st.tuples(st.just("literal"), st.integers(0, 100))), *draw(st.lists(_SCALAR, max_size=5))]
    tail = list(draw(_TAIL))
    written: list[int] = []
    decoded: list[int] = []
    for op in scalars:
        if op[0] == "literal":
            decoded.append(op[1])
        else:
            written.append(_value(op, draw))
            decoded.append(written[-1])
    if tail[:1] == [("array",)]:
        items = [_value(tail[1], draw) for _ in range(draw(st.integers(0, 150)))]
        written += items
        decoded += items
    blob = draw(st.binary(max_size=40)) if tail == [("blob",)] else None
    return scalars + tail, written, tuple(decoded), blob


@settings(max_examples=budget.cases(300), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(abbreviated_records(), min_size=1, max_size=4), st.integers(3, 8))
def test_abbreviated_records_round_trip(records: list, width: int) -> None:
    """Whatever the writer encodes with any abbreviation, the reader decodes to the same values."""

    def body(w: BitWriter) -> None:
        for ops, _, _, _ in records:
            w.define_abbrev(ops)
        for i, (ops, written, _, blob) in enumerate(records):
            w.abbreviated(4 + i, ops, written, blob=blob or b"")

    expected = [(decoded[0], decoded[1:], blob) for _, _, decoded, blob in records]
    assert decode(stream(lambda w: w.block(8, width, body))) == [(8, expected)]
