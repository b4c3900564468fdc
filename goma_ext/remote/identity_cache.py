"""The build directory's memories (compiler identities, toolchain digests): JSON files readable and writable without
pathlib or dataclasses (the thin client reads them)."""

from __future__ import annotations

import json
import os


def which(program: str, search: str | None = None) -> str | None:
    """shutil.which for a bare name on SEARCH (default $PATH), without importing shutil."""
    for d in (search if search is not None else os.environ.get("PATH", os.defpath)).split(os.pathsep):
        candidate = os.path.join(d or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def resolve(program: str, cwd: str, search: str | None = None) -> str | None:
    """The real file `program` runs (lookup on SEARCH, default $PATH, for bare names; cwd for relative paths;
    symlinks followed)."""
    found = os.path.join(cwd, program) if "/" in program else which(program, search)
    if found is None or not os.access(found, os.X_OK):
        return None
    return os.path.realpath(found)


def key(path: str) -> str:
    """Entries are keyed by the resolved binary's path, size, mtime, change time and inode: a new compiler is a new
    key, also one copied over the old in place with its size and modification time (`cp -p`), which only the
    change time tells."""
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


def load(cache_file: str) -> dict[str, object]:
    try:
        with open(cache_file, encoding="utf-8") as f:
            known = json.load(f)
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def store(cache_file: str, entries: dict[str, object]) -> None:
    """Replace cache_file with entries atomically (a temp file beside it, then rename); a failure is ignored, since
    the file is an optimisation only."""
    import tempfile  # not at module level: the thin client's start-up never writes

    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(cache_file) or ".", prefix=f".{os.path.basename(cache_file)}.")
        with os.fdopen(fd, "w") as f:
            json.dump(entries, f, sort_keys=True)
        os.replace(tmp, cache_file)
    except OSError:
        pass


def lookup(path: str, cache_file: str) -> tuple[str, str] | None:
    """(version, sha256) remembered for the resolved compiler `path`, if any."""
    entry = load(cache_file).get(key(path))
    if isinstance(entry, dict) and isinstance(entry.get("version"), str) and isinstance(entry.get("sha256"), str):
        return entry["version"], entry["sha256"]
    return None
