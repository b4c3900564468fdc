"""bench/subjects/sdists.py extracts a pinned archive keeping no owner from it: as root, files are root's (not whichever
local user has the archive's uid), without set-id or group/world write bits."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from bench.measure import BenchError
from bench.subjects import sdists


def _archive(path: Path) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, data, mode in (("pkg-1/", None, 0o777), ("pkg-1/run", b"#!/bin/sh\n", 0o6777)):
            info = tarfile.TarInfo(name.rstrip("/"))
            info.uid, info.gid, info.uname, info.gname = 4242, 4242, "", ""
            info.mode = mode
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_archive_keeps_no_owner_and_no_set_id_bit(tmp_path: Path) -> None:
    tarball = tmp_path / "pkg-1.tar.gz"
    sha = _archive(tarball)
    sdists.unpack(tarball, sha, "pkg-1", tmp_path / "pkg")
    for p in (tmp_path / "pkg", tmp_path / "pkg" / "run"):
        st = os.lstat(p)
        assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()), p
        assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID | 0o022), oct(st.st_mode)


def test_a_member_outside_the_directory_is_refused(tmp_path: Path) -> None:
    tarball = tmp_path / "evil-1.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        info = tarfile.TarInfo("../escape")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(sdists.BenchError, match=r"unexpected member '\.\./escape'"):
        sdists.unpack(tarball, hashlib.sha256(tarball.read_bytes()).hexdigest(), "evil-1", tmp_path / "evil")
    assert not (tmp_path / "escape").exists()


def test_the_debian_mirror_is_the_machines_own(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "other.sources").write_text("Types: deb\nURIs: https://mirror.example/node_20.x\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\n")
    assert sdists.debian_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    (tmp_path / "sources.list").write_text("# one-line\ndeb [arch=amd64] http://one.example/debian bookworm main\n")
    assert sdists.debian_mirror(tmp_path) == "http://one.example/debian"
    (tmp_path / "sources.list").unlink()
    with pytest.raises(BenchError, match="no Debian archive"):
        sdists.debian_mirror(tmp_path)
