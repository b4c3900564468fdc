"""`goma-ext fetch PATH…`: replace stand-ins of objects kept in the remote CAS (`download: minimal`) by their bytes.

What reads a native object here calls `materialize` first: a local final link (remote link refused or failed),
`gn-thinlto parity`, a user. When the CAS cannot give an object back (the server is gone, or it evicted the
blob), the stand-in is removed: ninja then sees the backend's output missing and runs the backend again (locally,
if the remote is still away), so a stand-in never stays where an object is needed.
"""

from __future__ import annotations

import argparse
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from goma_ext.errors import GomaExtError
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import RemoteError
from goma_ext.remote.config import RemoteConfig
from thinlto_base import remote_stub
from thinlto_base.fsutil import remove_if_exists

MIB = 1024 * 1024


class FetchError(GomaExtError):
    """Some stand-ins could not be replaced; they were removed (ninja rebuilds their backends)."""


@dataclass
class Fetched:
    """What materialize did: objects written (and their bytes), files that were not stand-ins."""

    objects: int = 0
    bytes: int = 0
    not_stubs: list[str] = field(default_factory=list)


def stubs_among(paths: Iterable[str | os.PathLike[str]]) -> dict[str, remote_stub.Stub]:
    """The stand-ins among PATHS (path -> record)."""
    out = {}
    for p in paths:
        stub = remote_stub.read_stub(p)
        if stub is not None:
            out[os.fspath(p)] = stub
    return out


def _check_server(endpoint: str, instance: str, base: RemoteConfig) -> None:
    """Stand-ins are files in a build directory: one naming another server must not get our credentials there."""
    if (base.endpoint, base.instance) != (endpoint, instance):
        raise FetchError(f"stand-ins name the server {endpoint} (instance {instance!r}), not the configured "
                         f"{base.endpoint} (instance {base.instance!r}): fetch them with --remote and --instance "
                         "naming it, or build them again")


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns  # ctime: an inode number reused


def _write(path: str, stub: remote_stub.Stub, data: bytes) -> None:
    """Replace the stand-in at PATH with DATA, unless PATH changed meanwhile: a build running beside `goma-ext fetch`
    may rename a backend's new output into place at any moment, and putting this older object over it would give a
    wrong binary that ninja takes as up to date. So PATH is looked at again just before the rename (the window left
    is that of two system calls). The object keeps the stand-in's modification time: ninja finds nothing new (the
    stand-in named these very bytes)."""
    found = remote_stub.stat_stub(path)
    if found is None or found[0] != stub:
        return
    st = found[1]
    parent, name = os.path.split(path)
    tmp = os.path.join(parent or ".", f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o755 if stub.executable else 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        try:
            unchanged = _identity(os.stat(path)) == _identity(st)
        except OSError:
            unchanged = False
        if not unchanged:
            os.unlink(tmp)
            return
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _drop(paths: Iterable[str]) -> None:
    for p in paths:
        remove_if_exists(p)


def materialize(paths: Iterable[str | os.PathLike[str]], base: RemoteConfig | None) -> Fetched:
    """Give every stand-in among PATHS its object's bytes (verified), from BASE's server, which must be the one
    each names. Raises FetchError: for a stand-in of another server (or none configured), leaving it; after
    removing the stand-ins it could not replace, when the server cannot give them back."""
    names = [os.fspath(p) for p in paths]
    stubs = stubs_among(names)
    done = Fetched(not_stubs=[p for p in names if p not in stubs])
    groups: dict[tuple[str, str], dict[str, remote_stub.Stub]] = defaultdict(dict)
    for path, stub in stubs.items():
        groups[(stub.endpoint, stub.instance)][path] = stub
    for (endpoint, instance), group in sorted(groups.items()):
        if base is None:
            raise FetchError(f"{len(group)} stand-in(s) name the server {endpoint}, and no remote is configured "
                             "(--remote, GOMA_EXT_REMOTE)")
        _check_server(endpoint, instance, base)
        _fetch_group(base, group, done)
    return done


def _fetch_group(cfg: RemoteConfig, group: dict[str, remote_stub.Stub], done: Fetched) -> None:
    """Fetch GROUP's objects in rounds of at most CHUNK_BYTES (a local link of Chromium's size reads gigabytes),
    writing each round before the next. What the CAS lacks, or what an error left unfetched, loses its stand-in."""
    from goma_ext.remote.client import RemoteExecutor

    left = dict(group)
    digests = {path: Digest(stub.hash, stub.size) for path, stub in group.items()}
    try:
        executor = RemoteExecutor(cfg)
        try:
            lost = executor.cas.find_missing(set(digests.values()))
            todo = sorted(p for p in left if digests[p] not in lost)
            for chunk in _chunks(todo, left):
                blobs = executor.cas.read_many(digests[p] for p in chunk)
                for path in chunk:
                    _write(path, left[path], blobs[digests[path]])
                    done.objects += 1
                    done.bytes += left.pop(path).size
        finally:
            executor.close()
    except RemoteError as e:
        _drop(left)
        raise FetchError(f"{len(left)} native object(s) kept in the CAS of {cfg.endpoint} could not be fetched "
                         f"({e}); their stand-ins were removed, and the next build runs their backends again "
                         f"(e.g. {min(left)})") from e
    if left:
        _drop(left)
        raise FetchError(f"the CAS of {cfg.endpoint} no longer holds {len(left)} native object(s); their stand-ins "
                         f"were removed, and the next build runs their backends again (e.g. {min(left)})")


CHUNK_BYTES = 64 * 1024 * 1024


def _chunks(paths: list[str], stubs: Mapping[str, remote_stub.Stub]) -> Iterator[list[str]]:
    chunk: list[str] = []
    size = 0
    for p in paths:
        if chunk and size + stubs[p].size > CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(p)
        size += stubs[p].size
    if chunk:
        yield chunk


def add_parser(commands: argparse._SubParsersAction) -> None:
    from goma_ext.remote.wrapper import add_settings_arguments

    p = commands.add_parser("fetch", help="replace stand-ins of objects kept in the remote CAS by their bytes")
    add_settings_arguments(p)
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="files (stand-ins are replaced, others left alone) or directories (searched for *.o, *.dwo)")
    p.set_defaults(run=run)


def _expand(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(remote_stub.FETCH_SUFFIXES))
        else:
            out.append(p)
    return out


def settings(args: argparse.Namespace, env: Mapping[str, str]) -> RemoteConfig | None:
    """The remote settings of the options, over the environment, over --config; GOMA_EXT_REMOTE=off does not
    apply (it keeps actions from running remotely; an object kept in the CAS is still only there)."""
    from goma_ext.remote.names import is_off
    from goma_ext.remote.wrapper import config_from_args

    return config_from_args(args, {k: v for k, v in env.items() if not (k == "GOMA_EXT_REMOTE" and is_off(v))})


def run(args: argparse.Namespace) -> int:
    """Settings as `goma-ext run` takes them: options, the environment, --config."""
    if args.config:
        from goma_ext.remote.wrapper import load_site

        load_site()
    got = materialize(_expand(args.paths), settings(args, os.environ))
    print(f"goma-ext fetch: {got.objects} object(s) fetched ({got.bytes / MIB:.1f} MiB); "
          f"{len(got.not_stubs)} file(s) were not stand-ins")
    return 0
