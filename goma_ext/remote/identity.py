"""Compiler identity (version line + SHA-256 of the binary) carried as REAPI platform properties."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from goma_ext.reapi.errors import RemoteError
from goma_ext.remote import identity_cache

PROP_VERSION = "compiler-version"
PROP_SHA256 = "compiler-sha256"
PROP_OS = "OSFamily"
OS_FAMILY = "linux"
MATCH_PROPERTY_KEYS = (PROP_SHA256, PROP_VERSION)


@dataclass(frozen=True)
class CompilerIdentity:
    """Who compiles: the resolved binary, its first `--version` line and the binary's SHA-256."""

    path: Path
    version: str
    sha256: str

    def properties(self) -> tuple[tuple[str, str], ...]:
        """Platform properties, sorted by name as REAPI requires."""
        return tuple(sorted(((PROP_OS, OS_FAMILY), (PROP_SHA256, self.sha256), (PROP_VERSION, self.version))))


def resolve_program(program: str, cwd: Path) -> Path:
    """The real file `program` runs (PATH lookup for bare names, cwd for relative paths, symlinks followed)."""
    found = identity_cache.resolve(program, str(cwd))
    if found is None:
        raise RemoteError(f"compiler {program!r} not found or not executable", temporary=False, code="COMPILER")
    return Path(found)


def identify(program: str, cwd: Path) -> CompilerIdentity:
    """Hash the compiler binary and ask it for its version."""
    import hashlib
    import subprocess

    path = resolve_program(program, cwd)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RemoteError(f"compiler {program}: cannot run --version: {e}", temporary=False, code="COMPILER") from e
    lines = out.strip().splitlines()
    if not lines:
        raise RemoteError(f"compiler {program}: --version printed nothing", temporary=False, code="COMPILER")
    return CompilerIdentity(path=path, version=lines[0].strip(), sha256=h.hexdigest())


def identify_cached(program: str, cwd: Path, cache_file: Path) -> CompilerIdentity:
    """identify(), remembered in `cache_file` (in the build directory) by the binary's stat identity
    (identity_cache.key)."""
    path = resolve_program(program, cwd)
    known = identity_cache.lookup(str(path), str(cache_file))
    if known is not None:
        return CompilerIdentity(path, *known)
    ident = identify(str(path), cwd)
    entries = identity_cache.load(str(cache_file))
    entries[identity_cache.key(str(path))] = {"version": ident.version, "sha256": ident.sha256}
    identity_cache.store(str(cache_file), entries)
    return ident
