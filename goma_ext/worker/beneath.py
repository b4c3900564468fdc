"""File operations a root worker does inside a tree an action wrote or shaped: relative to a directory file
descriptor, one path component at a time, never following a symlink and never leaving the tree.

Why not paths: a path is resolved by the kernel when it is used, and an action controls every directory entry
under its input root (it plants links after its inputs were checked, and its input tree can hold chains such as
`d -> .`, `u -> d/..` whose text stays inside while the kernel resolves them outside). What root does there — create
an output's parent, hand directories over, copy an output, read one to upload it — goes through here: each
component is opened with O_NOFOLLOW (O_DIRECTORY for parents), relative to the previous one's descriptor, and `..`
is refused. That is openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) walked by hand (Python 3.11 has no openat2), the
way Buildbarn's bb_worker opens its build directories.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from goma_ext.worker.errors import bad_path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def components(rel: str, what: str) -> list[str]:
    """The names of a relative path ('' and '.' are the directory itself); `..`, absolute paths and NUL refused."""
    if rel.startswith("/") or "\0" in rel:
        raise bad_path(f"{what} {rel!r} is absolute or holds a NUL byte")
    names = [n for n in rel.split("/") if n not in ("", ".")]
    if ".." in names:
        raise bad_path(f"{what} {rel!r} holds '..' (the worker follows no path upwards)")
    return names


def _open_child(dir_fd: int, name: str, rel: str, what: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise bad_path(f"{what} {rel!r}: {name!r} is a symlink or not a directory") from None
        raise


def open_dir(root_fd: int, rel: str, what: str, create: bool = False, mode: int = 0o755) -> int:
    """A new descriptor of root/rel, a directory reached through directories only (created when `create`)."""
    fd = os.dup(root_fd)
    try:
        for name in components(rel, what):
            if create:
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                except FileExistsError:
                    pass
            child = _open_child(fd, name, rel, what)
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def opened_dir(root_fd: int, rel: str, what: str, create: bool = False) -> Iterator[int]:
    fd = open_dir(root_fd, rel, what, create)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def root_dir(path: str | os.PathLike[str]) -> Iterator[int]:
    """A descriptor of the tree's top directory itself (which must not be a symlink)."""
    fd = os.open(path, _DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


def parent_and_name(rel: str, what: str) -> tuple[str, str]:
    names = components(rel, what)
    if not names:
        raise bad_path(f"{what} {rel!r} names the directory itself, not a file")
    return "/".join(names[:-1]), names[-1]


def open_regular(root_fd: int, rel: str, what: str) -> int | None:
    """A read descriptor of the regular file root/rel (None when it does not exist); a symlink anywhere on the way,
    or a final entry that is not a regular file (a FIFO, a device, a directory), is refused."""
    parent, name = parent_and_name(rel, what)
    try:
        dir_fd = open_dir(root_fd, parent, what)
    except FileNotFoundError:
        return None
    try:
        # O_NONBLOCK: opening a FIFO planted at the name must not wait for a writer
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise bad_path(f"{what} {rel!r} is a symlink") from None
        raise
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise bad_path(f"{what} {rel!r} is not a regular file")
    return fd


def chown_dirs(root_fd: int, uid: int, gid: int) -> None:
    """Give root and every directory below it (reached through directories only) to uid:gid; files and symlinks
    keep their owner. Nothing is followed: a symlink to a directory is not a directory here."""
    os.fchown(root_fd, uid, gid)
    _walk_dirs(root_fd, lambda fd: os.fchown(fd, uid, gid))


def _walk_dirs(top_fd: int, visit: Callable[[int], None]) -> None:
    """Call visit(fd) for every directory strictly below top_fd, parents first, through O_NOFOLLOW opens."""
    stack = [os.dup(top_fd)]
    try:
        while stack:
            fd = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    names = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
                for name in names:
                    try:
                        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except OSError as e:
                        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                            continue  # replaced since it was listed: not a directory of this tree any more
                        raise
                    try:
                        visit(child)
                    except BaseException:
                        os.close(child)
                        raise
                    stack.append(child)
            finally:
                os.close(fd)
    finally:
        for fd in stack:
            os.close(fd)
