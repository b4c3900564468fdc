"""Format tables of the LLVM bitstream container and of LLVM IR bitcode / ThinLTO summary indexes."""

from __future__ import annotations

import enum


# llvm/docs/BitCodeFormat.rst "Abbreviation IDs" and llvm/include/llvm/Bitstream/BitCodeEnums.h
# (bitc::FixedAbbrevIDs).
class AbbrevId(enum.IntEnum):
    END_BLOCK = 0
    ENTER_SUBBLOCK = 1
    DEFINE_ABBREV = 2
    UNABBREV_RECORD = 3
    FIRST_APPLICATION_ABBREV = 4


# llvm/include/llvm/Bitstream/BitCodeEnums.h (BitCodeAbbrevOp::Encoding); 0 is our marker for a literal.
class OperandKind(enum.IntEnum):
    LITERAL = 0
    FIXED = 1
    VBR = 2
    ARRAY = 3
    CHAR6 = 4
    BLOB = 5


# llvm/include/llvm/Bitstream/BitCodeEnums.h (bitc::BlockInfoCodes); the BLOCKINFO block has id 0.
class BlockInfoCode(enum.IntEnum):
    SETBID = 1
    BLOCKNAME = 2
    SETRECORDNAME = 3


BLOCKINFO_BLOCK_ID = 0

# llvm/docs/BitCodeFormat.rst "Bitcode Wrapper Format" and "Magic Numbers".
WRAPPER_MAGIC = 0x0B17C0DE
BITCODE_MAGIC = b"BC\xc0\xde"

# llvm/docs/BitCodeFormat.rst "6-bit characters".
CHAR6_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._"


# llvm/include/llvm/Bitcode/LLVMBitCodes.h (bitc::BlockIDs).
class BlockId(enum.IntEnum):
    BLOCKINFO_BLOCK = 0
    MODULE_BLOCK = 8
    PARAMATTR_BLOCK = 9
    PARAMATTR_GROUP_BLOCK = 10
    CONSTANTS_BLOCK = 11
    FUNCTION_BLOCK = 12
    IDENTIFICATION_BLOCK = 13
    VALUE_SYMTAB_BLOCK = 14
    METADATA_BLOCK = 15
    METADATA_ATTACHMENT = 16
    TYPE_BLOCK = 17
    USELIST_BLOCK = 18
    MODULE_STRTAB_BLOCK = 19
    GLOBALVAL_SUMMARY_BLOCK = 20
    OPERAND_BUNDLE_TAGS_BLOCK = 21
    METADATA_KIND_BLOCK = 22
    STRTAB_BLOCK = 23
    FULL_LTO_GLOBALVAL_SUMMARY_BLOCK = 24
    SYMTAB_BLOCK = 25
    SYNC_SCOPE_NAMES_BLOCK = 26


def block_name(block_id: int) -> str:
    """The LLVM name of a block id, or BLOCK#N for ids LLVM does not define."""
    try:
        return BlockId(block_id).name
    except ValueError:
        return f"BLOCK#{block_id}"


# llvm/include/llvm/Bitcode/LLVMBitCodes.h (bitc::ModuleCodes), the records we read.
class ModuleCode(enum.IntEnum):
    VERSION = 1
    TRIPLE = 2
    DATALAYOUT = 3
    SOURCE_FILENAME = 16
    HASH = 17


# llvm/include/llvm/Bitcode/LLVMBitCodes.h (bitc::ModulePathSymtabCodes).
class ModuleStrtabCode(enum.IntEnum):
    ENTRY = 1  # [modid, namechar x N]
    HASH = 2  # [5 x u32], the SHA-1 of the module named by the preceding ENTRY


# llvm/include/llvm/Bitcode/LLVMBitCodes.h (bitc::GlobalValueSummarySymtabCodes).
class SummaryCode(enum.IntEnum):
    PERMODULE = 1
    PERMODULE_PROFILE = 2
    PERMODULE_GLOBALVAR_INIT_REFS = 3
    COMBINED = 4  # [valueid, modid, flags, instcount, ...]
    COMBINED_PROFILE = 5  # [valueid, modid, flags, instcount, ...]
    COMBINED_GLOBALVAR_INIT_REFS = 6  # [valueid, modid, flags, ...]
    ALIAS = 7
    COMBINED_ALIAS = 8  # [valueid, modid, flags, aliasee valueid]
    COMBINED_ORIGINAL_NAME = 9
    VERSION = 10
    TYPE_TESTS = 11
    TYPE_TEST_ASSUME_VCALLS = 12
    TYPE_CHECKED_LOAD_VCALLS = 13
    TYPE_TEST_ASSUME_CONST_VCALL = 14
    TYPE_CHECKED_LOAD_CONST_VCALL = 15
    VALUE_GUID = 16  # LLVM <= 19: [valueid, guid]; LLVM >= 20: [valueid, guid hi32, guid lo32]
    CFI_FUNCTION_DEFS = 17
    CFI_FUNCTION_DECLS = 18
    PERMODULE_RELBF = 19
    FLAGS = 20  # [flags], see IndexFlag
    TYPE_ID = 21
    TYPE_ID_METADATA = 22
    PERMODULE_VTABLE_GLOBALVAR_INIT_REFS = 23
    BLOCK_COUNT = 24
    PARAM_ACCESS = 25
    PERMODULE_CALLSITE_INFO = 26
    PERMODULE_ALLOC_INFO = 27
    COMBINED_CALLSITE_INFO = 28
    COMBINED_ALLOC_INFO = 29
    STACK_IDS = 30


# The combined-summary records that describe one global value and name its module by modid
# (operand 1); llvm/lib/Bitcode/Writer/BitcodeWriter.cpp, IndexBitcodeWriter::writeCombinedGlobalValueSummary.
COMBINED_SUMMARY_CODES = frozenset(
    {
        SummaryCode.COMBINED,
        SummaryCode.COMBINED_PROFILE,
        SummaryCode.COMBINED_GLOBALVAR_INIT_REFS,
        SummaryCode.COMBINED_ALIAS,
    }
)


# FS_FLAGS bits; llvm/lib/Bitcode/Writer/BitcodeWriter.cpp (writeCombinedGlobalValueSummary) and
# llvm/include/llvm/IR/ModuleSummaryIndex.h. Bits not listed here are kept in the raw value.
class IndexFlag(enum.IntFlag):
    WITH_GLOBAL_VALUE_DEAD_STRIPPING = 0x1
    SKIP_MODULE_BY_DISTRIBUTED_BACKEND = 0x2
    HAS_SYNTHETIC_ENTRY_COUNTS = 0x4
    ENABLE_SPLIT_LTO_UNIT = 0x8
    PARTIALLY_SPLIT_LTO_UNITS = 0x10
    WITH_ATTRIBUTE_PROPAGATION = 0x20
    WITH_DSO_LOCAL_PROPAGATION = 0x40
    WITH_WHOLE_PROGRAM_VISIBILITY = 0x80
    WITH_SUPPORTS_HOT_COLD_NEW = 0x100
    HAS_UNIFIED_LTO = 0x200


# llvm/include/llvm/Bitcode/LLVMBitCodes.h (bitc::StrtabCodes / SymtabCodes).
STRTAB_BLOB = 1
