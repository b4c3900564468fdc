"""Archive member references as lld writes them (`lib.a(member.o at OFFSET)`) and thin-archive member lookup."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import construct as cs

from goma_ext.errors import GomaExtError

# lld/ELF/InputFiles.cpp names a module from an archive "archive(member at offset)", offset being the
# member header's offset in the archive.
_MEMBER_REF = re.compile(r"^(?P<archive>.+)\((?P<member>.+) at (?P<offset>\d+)\)$")
THIN_MAGIC = b"!<thin>\n"
# The System V / GNU ar member header (a 60-byte, byte-aligned structure).
AR_HEADER = cs.Struct(
    "name" / cs.Bytes(16),
    "mtime" / cs.Bytes(12),
    "uid" / cs.Bytes(6),
    "gid" / cs.Bytes(6),
    "mode" / cs.Bytes(8),
    "size" / cs.Bytes(10),
    "fmag" / cs.Const(b"`\n"),
)
LONG_NAMES = b"//"


@dataclass(frozen=True)
class MemberRef:
    """A module path that names an archive member."""

    archive: str
    member: str
    offset: int


def parse_member_ref(module_path: str) -> MemberRef | None:
    m = _MEMBER_REF.match(module_path)
    return MemberRef(m.group("archive"), m.group("member"), int(m.group("offset"))) if m else None


def thin_member_path(archive_path: str, data: bytes, offset: int) -> str | None:
    """For a thin archive's bytes, the file of the member whose header is at `offset` (relative to the
    archive's directory, joined onto `archive_path`'s directory); None for a regular archive."""
    if not data.startswith(THIN_MAGIC):
        return None
    long_names = b""
    pos = len(THIN_MAGIC)
    while pos + AR_HEADER.sizeof() <= len(data):  # find the long-name table (it precedes the members)
        header = _header(archive_path, data, pos)
        size = _size(archive_path, header, pos)
        if header.name.rstrip() == LONG_NAMES:
            long_names = data[pos + AR_HEADER.sizeof() : pos + AR_HEADER.sizeof() + size]
            break
        if not header.name.startswith(b"/"):
            break  # a member: the special tables are over
        pos += AR_HEADER.sizeof() + size + (size & 1)
    name = _header(archive_path, data, offset).name.rstrip()
    if name.startswith(b"/") and name[1:].isdigit():
        start = int(name[1:])
        end = long_names.find(b"/\n", start)
        if start >= len(long_names) or end < 0:
            raise GomaExtError(
                f"thin archive {archive_path}: member at {offset} names long-name offset {start}, not in the table"
            )
        name = long_names[start:end]
    else:
        name = name.rstrip(b"/")
    return os.path.normpath(os.path.join(os.path.dirname(archive_path), os.fsdecode(name)))


def _header(archive_path: str, data: bytes, pos: int) -> cs.Container:
    try:
        return AR_HEADER.parse(data[pos : pos + AR_HEADER.sizeof()])
    except cs.ConstructError as e:
        raise GomaExtError(f"archive {archive_path}: no member header at offset {pos}") from e


def _size(archive_path: str, header: cs.Container, pos: int) -> int:
    text = header.size.decode("ascii", errors="replace").strip() or "0"
    if not text.isdigit():  # also rejects signs, which could walk backwards
        raise GomaExtError(f"archive {archive_path}: bad member size {text!r} at offset {pos}")
    return int(text)
