"""SHA-256 content digests (the REAPI `Digest`) as a frozen value type."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from goma_ext.reapi.proto import re_pb2

_CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, order=True)
class Digest:
    """A blob's lowercase hex SHA-256 and its size in bytes."""

    hash: str
    size: int

    @classmethod
    def of_bytes(cls, data: bytes) -> Digest:
        return cls(hashlib.sha256(data).hexdigest(), len(data))

    @classmethod
    def of_file(cls, path: Path) -> Digest:
        h = hashlib.sha256()
        size = 0
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                size += len(chunk)
        return cls(h.hexdigest(), size)

    @classmethod
    def of_message(cls, message: object) -> Digest:
        return cls.of_bytes(message.SerializeToString(deterministic=True))  # type: ignore[attr-defined]

    @classmethod
    def from_proto(cls, d: re_pb2.Digest) -> Digest:
        return cls(d.hash, d.size_bytes)

    @property
    def well_formed(self) -> bool:
        """A lowercase hex SHA-256 and a size: what a digest from elsewhere (a client's tree) must be before any
        name is made from it."""
        return bool(_SHA256.fullmatch(self.hash)) and self.size >= 0

    def to_proto(self) -> re_pb2.Digest:
        return re_pb2.Digest(hash=self.hash, size_bytes=self.size)

    def __str__(self) -> str:
        return f"{self.hash}/{self.size}"


EMPTY = Digest.of_bytes(b"")


def serialize(message: object) -> bytes:
    """Deterministic protobuf bytes, so equal messages always get equal digests."""
    return message.SerializeToString(deterministic=True)  # type: ignore[attr-defined]
