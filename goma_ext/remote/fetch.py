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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from goma_ext.errors import GomaExtError
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import RemoteError
from goma_ext.remote.config import RemoteConfig, load_config
from thinlto_base import remote_stub

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


def _config_for(endpoint: str, instance: str, base: RemoteConfig | None, env: Mapping[str, str]) -> RemoteConfig:
    """BASE when it names the stand-ins' server, else the environment's settings aimed at it."""
    if base is not None and (base.endpoint, base.instance) == (endpoint, instance):
        return base
    cfg = load_config({}, {k: v for k, v in env.items() if k != "GOMA_EXT_REMOTE"},
                      {"endpoint": endpoint, "instance": instance})
    if cfg is None:
        raise FetchError(f"stand-ins name the server {endpoint!r}, which is no remote endpoint")
    return cfg


def _write(path: str, stub: remote_stub.Stub, data: bytes) -> None:
    """Replace the stand-in at PATH with DATA, unless PATH changed meanwhile (a backend ran again). The object
    keeps the stand-in's modification time: ninja finds nothing new (the stand-in named these very bytes)."""
    if remote_stub.read_stub(path) != stub:
        return
    st = os.stat(path)
    parent, name = os.path.split(path)
    tmp = os.path.join(parent or ".", f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o755 if stub.executable else 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _drop(paths: Iterable[str]) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def materialize(paths: Iterable[str | os.PathLike[str]], base: RemoteConfig | None = None,
                env: Mapping[str, str] | None = None) -> Fetched:
    """Give every stand-in among PATHS its object's bytes (verified), from the server it names. Raises FetchError,
    after removing the stand-ins it could not replace, when the server cannot give them back."""
    from goma_ext.remote.client import RemoteExecutor

    env = os.environ if env is None else env
    names = [os.fspath(p) for p in paths]
    stubs = stubs_among(names)
    done = Fetched(not_stubs=[p for p in names if p not in stubs])
    groups: dict[tuple[str, str], dict[str, remote_stub.Stub]] = defaultdict(dict)
    for path, stub in stubs.items():
        groups[(stub.endpoint, stub.instance)][path] = stub
    for (endpoint, instance), group in sorted(groups.items()):
        try:
            executor = RemoteExecutor(_config_for(endpoint, instance, base, env))
            try:
                blobs = executor.cas.read_many(Digest(s.hash, s.size) for s in group.values())
            finally:
                executor.close()
        except (RemoteError, FetchError) as e:
            _drop(group)
            raise FetchError(f"{len(group)} native object(s) kept in the CAS of {endpoint} could not be fetched "
                             f"({e}); their stand-ins were removed, and the next build runs their backends again "
                             f"(e.g. {min(group)})") from e
        for path, stub in group.items():
            _write(path, stub, blobs[Digest(stub.hash, stub.size)])
            done.objects += 1
            done.bytes += stub.size
    return done


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("fetch", help="replace stand-ins of objects kept in the remote CAS by their bytes")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="files (stand-ins are replaced, others left alone) or directories (searched for *.o, *.dwo)")
    p.set_defaults(run=run)


def _expand(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(remote_stub.STUB_SUFFIXES))
        else:
            out.append(p)
    return out


def run(args: argparse.Namespace) -> int:
    """Settings come from the environment (GOMA_EXT_REMOTE_TOKEN and the like); the server from each stand-in."""
    got = materialize(_expand(args.paths))
    print(f"goma-ext fetch: {got.objects} object(s) fetched ({got.bytes / MIB:.1f} MiB); "
          f"{len(got.not_stubs)} file(s) were not stand-ins")
    return 0
