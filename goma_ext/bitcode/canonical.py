"""A digest of a ThinLTO backend index that ignores where its modules are on disk.

lld 22's DTLTO extracts archive members to files whose names carry the linker's pid, and the index names
them; hashing the index's bytes would give every link of the same code a new key. This digest covers every
block, record and blob of the index as decoded values (so no abbreviation or bit position counts), except
the module table's paths: a module is named by its content hash (the MST_CODE_HASH record that follows
its entry) and by whether it is the backend's own module, which the backend finds by its path.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from goma_ext.bitcode.bitstream import Bitstream, Block, Record
from goma_ext.bitcode.llvm_codes import BlockId, ModuleStrtabCode

DIGEST_VERSION = b"goma-ext-canonical-index-v1"
_MST_BLOCK = int(BlockId.MODULE_STRTAB_BLOCK)
_MST_ENTRY = int(ModuleStrtabCode.ENTRY)


def _feed(h: hashlib._Hash, block: Block, own_path: str) -> None:
    h.update(b"B%d{" % block.block_id)
    for entry in block.entries():
        if isinstance(entry, Block):
            _feed(h, entry, own_path)
            continue
        record: Record = entry
        ops = record.ops
        if block.block_id == _MST_BLOCK and record.code == _MST_ENTRY and ops:
            ops = (ops[0], 1 if record.text(1) == own_path else 0)
        h.update(b"R%d:%s" % (record.code, ",".join(map(str, ops)).encode()))
        if record.blob is not None:
            h.update(b"#%d:" % len(record.blob))
            h.update(record.blob)
        h.update(b";")
    h.update(b"}")


def canonical_index_digest(path: str | Path, own_path: str) -> str:
    """The digest of the index at PATH for the backend of the module at OWN_PATH (as the index names it)."""
    data = Path(path).read_bytes()
    h = hashlib.sha256(DIGEST_VERSION)
    if not data:
        h.update(b"empty")  # an index of a module that imports nothing may be written as an empty file
        return h.hexdigest()
    for block in Bitstream(data, name=str(path)).blocks():
        _feed(h, block, own_path)
    return h.hexdigest()
