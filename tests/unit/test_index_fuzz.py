"""Fuzzing the decoders: random and mutated real inputs give a result or one DecodeError, nothing else."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goma_ext.bitcode.bitstream import Bitstream, Block
from goma_ext.bitcode.index import parse_index
from goma_ext.bitcode.llvm_codes import BITCODE_MAGIC
from goma_ext.bitcode.objects import inspect_bytes
from goma_ext.errors import DecodeError
from tests import budget

DATA = Path(__file__).parent / "index_data"
SEEDS = sorted(p for p in DATA.iterdir() if p.name.startswith("llvm"))
SEED_BYTES = [p.read_bytes() for p in SEEDS]
FUZZ = settings(max_examples=budget.cases(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow],
                derandomize=True)
# A hang guard, not a speed target (speed is bench/index_bench.py's): generous enough for a loaded CI machine.
PER_INPUT_LIMIT_S = 10.0


def _walk(block: Block) -> int:
    n = 0
    for e in block.entries():
        n += _walk(e) if isinstance(e, Block) else 1
    return n


def decode_everything(data: bytes) -> None:
    """Run every decoder on `data`; only DecodeError may escape, and each must finish quickly."""
    start = time.monotonic()
    for decoder in (
        lambda: parse_index(data, name="fuzz.thinlto.bc"),
        lambda: parse_index(data, name="fuzz.thinlto.bc", summaries=False),
        lambda: inspect_bytes(data, name="fuzz.o"),
        lambda: sum(_walk(b) for b in Bitstream(data, name="fuzz.bc").blocks()),
    ):
        try:
            decoder()
        except DecodeError as e:
            text = str(e)
            assert "\n" not in text and "byte " in text and e.bit_offset >= 0 and e.file.startswith("fuzz.")
    assert time.monotonic() - start < PER_INPUT_LIMIT_S


def test_truncations_of_every_seed() -> None:
    """Every prefix of the small seeds; about 500 prefixes (all alignments) of the larger objects."""
    for data in SEED_BYTES:
        step = max(1, len(data) // 500) | 1
        for n in range(0, len(data), step):
            decode_everything(data[:n])


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes_after_magic(tail: bytes) -> None:
    decode_everything(BITCODE_MAGIC + tail)


@FUZZ
@given(
    st.sampled_from(range(len(SEED_BYTES))),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), min_size=1, max_size=8),
    st.booleans(),
)
def test_mutated_real_files(seed: int, edits: list[tuple[int, int]], bitflip: bool) -> None:
    data = bytearray(SEED_BYTES[seed])
    for pos, value in edits:
        i = pos % len(data)
        data[i] = data[i] ^ (1 << (value % 8)) if bitflip else value
    decode_everything(bytes(data))


@FUZZ
@given(st.sampled_from(range(len(SEED_BYTES))), st.integers(min_value=0), st.binary(min_size=1, max_size=16))
def test_spliced_real_files(seed: int, pos: int, insert: bytes) -> None:
    data = SEED_BYTES[seed]
    i = pos % len(data)
    decode_everything(data[:i] + insert + data[i:])
    decode_everything(data[:i] + data[i + len(insert) :])
