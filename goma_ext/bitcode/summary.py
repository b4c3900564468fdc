"""Typed records of a combined GLOBALVAL_SUMMARY_BLOCK: version, flags, value GUIDs and per-value summaries."""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field

from goma_ext.bitcode.bitstream import Block, Record
from goma_ext.bitcode.llvm_codes import COMBINED_SUMMARY_CODES, SummaryCode
from goma_ext.errors import DecodeError

_VERSION = int(SummaryCode.VERSION)
_FLAGS = int(SummaryCode.FLAGS)
_VALUE_GUID = int(SummaryCode.VALUE_GUID)


@dataclass(frozen=True)
class CombinedSummary:
    """One global value's summary in a combined index: which module defines it (by module id)."""

    kind: SummaryCode  # COMBINED, COMBINED_PROFILE, COMBINED_GLOBALVAR_INIT_REFS or COMBINED_ALIAS
    valueid: int
    modid: int
    flags: int  # the GlobalValueSummary flags word (linkage, visibility, ...), undecoded
    bit_offset: int


@dataclass(frozen=True)
class SummaryBlock:
    """What a combined GLOBALVAL_SUMMARY_BLOCK holds. With `complete=False` only VERSION and FLAGS were read."""

    version: int | None
    flags: int
    summaries: tuple[CombinedSummary, ...]
    value_guids: Mapping[int, int] = field(hash=False)  # valueid -> GUID
    complete: bool = True


def value_guid(record: Record) -> tuple[int, int]:
    """(valueid, GUID) of an FS_VALUE_GUID record in either layout.

    LLVM <= 19 writes [valueid, guid] with the GUID as one VBR; LLVM >= 20 writes [valueid, guid >> 32,
    guid & 0xffffffff] (llvm/lib/Bitcode/Writer/BitcodeWriter.cpp, writeCombinedGlobalValueSummary).
    """
    ops = record.ops
    if len(ops) == 2:
        return ops[0], ops[1]
    if len(ops) == 3 and ops[1] >> 32 == 0 and ops[2] >> 32 == 0:
        return ops[0], ops[1] << 32 | ops[2]
    raise DecodeError(f"FS_VALUE_GUID with {len(ops)} operands; expected 2 (LLVM <= 19) or 3 x u32 (LLVM >= 20)",
                      bit_offset=record.bit_offset)


def decode_summary_block(block: Block, *, complete: bool = True) -> SummaryBlock:
    """Decode the block; with complete=False stop after FLAGS (they lead the block) and skip the rest."""
    version: int | None = None
    flags = 0
    summaries: list[CombinedSummary] = []
    guids: dict[int, int] = {}
    try:
        for record in block.records():
            code = record.code
            if code == _VERSION and record.ops:
                version = record.ops[0]
            elif code == _FLAGS and record.ops:
                flags = record.ops[0]
                if not complete:
                    break
            elif code == _VALUE_GUID:
                valueid, guid = value_guid(record)
                guids[valueid] = guid
            elif code in COMBINED_SUMMARY_CODES:
                if len(record.ops) < 3:
                    raise DecodeError(
                        f"{SummaryCode(code).name} with {len(record.ops)} operands; needs valueid, modid, flags",
                        bit_offset=record.bit_offset,
                    )
                summaries.append(
                    CombinedSummary(SummaryCode(code), record.ops[0], record.ops[1], record.ops[2], record.bit_offset)
                )
    except DecodeError as e:
        raise block.locate(e) from e
    return SummaryBlock(version, flags, tuple(summaries), types.MappingProxyType(guids), complete)
