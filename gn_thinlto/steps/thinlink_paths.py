"""Where the thin link keeps each bitcode object's files: one formula for the planner and the build step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

INDEX_SUFFIX = ".thinlto.bc"  # lld's name for bitcode X's index file: X.thinlto.bc (and X.imports)
IMPORTS_SUFFIX = ".imports"
# `lto_partitions: auto`: one partition per this much bitcode that the inputs give the regular-LTO module (the
# config documents it, the thin-link step applies it: steps/partitions.py)
AUTO_PARTITION_BYTES = 4 << 20
MAX_PARTITIONS = 64  # the most partition edges a config (or a link's --lto-partitions) may ask for
PARTITION_BITCODE_SUFFIX = ".bc"
PARTITION_DIR = "lto"  # in a link's state directory: its partitions' bitcode and objects (partition_paths)


def index_paths(stage_dir: str, index_dir: str, bitcode: str) -> tuple[str, str, str, str]:
    """BITCODE's index and imports files as lld writes them in STAGE_DIR, and as kept in INDEX_DIR."""
    return (f"{stage_dir}/{bitcode}{INDEX_SUFFIX}", f"{stage_dir}/{bitcode}{IMPORTS_SUFFIX}",
            f"{index_dir}/{bitcode}{INDEX_SUFFIX}", f"{index_dir}/{bitcode}{IMPORTS_SUFFIX}")


def manifest_index_files(m: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(bitcode, staged index, staged imports, index, imports) of every bitcode object of manifest M (JSON)."""
    return [(b, *index_paths(m["stage_dir"], m["index_dir"], b)) for b in m["bitcode"]]


def manifest_natives(m: Mapping[str, Any]) -> dict[str, str]:
    """Every bitcode object of manifest M (JSON) -> its native object."""
    return {b: f"{m['native_dir']}/{b}" for b in m["bitcode"]}


def partition_paths(partition_dir: str, k: int) -> tuple[str, str]:
    """Partition K of a link's regular-LTO module: its bitcode (the thin link writes it) and its object."""
    return f"{partition_dir}/part{k}{PARTITION_BITCODE_SUFFIX}", f"{partition_dir}/part{k}.o"
