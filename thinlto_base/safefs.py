"""File access that no planted file can subvert: directories opened one component at a time without following
symbolic links, files created exclusively (never through a link), reads of regular files only, capped, and
never blocking on a FIFO. Everything below a directory fd, so a directory swapped for a link between two calls
is refused rather than followed.

Used by the cache (a directory other users may write) and the build steps. Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


PATH_MAX = 4096  # Linux: a longer path cannot be opened, and os.makedirs would recurse once per component


def makedirs(path: str) -> None:
    """os.makedirs(PATH, exist_ok=True), with a path too long for the OS refused up front (ENAMETOOLONG) instead
    of os.makedirs recursing once per component into a RecursionError."""
    if len(os.fsencode(path)) >= PATH_MAX:
        raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), path[:200])
    os.makedirs(path, exist_ok=True)


class Refused(OSError):
    """A path that is not what it must be: a link where a directory or file belongs, a FIFO, a device, or a
    file larger than its cap. An OSError, so every caller that handles I/O errors handles it."""


def open_dir(parent: int | str, name: str = "", create: bool = False) -> int:
    """An fd of directory NAME in PARENT (an fd, or a path taken as given: the configured root may be a link);
    with CREATE, made when missing. A link or a non-directory at NAME is Refused."""
    if isinstance(parent, str):
        if create:
            makedirs(parent)
        return os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(name, 0o777, dir_fd=parent)
        except FileExistsError:
            pass
        return open_dir(parent, name)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW met a link, or NAME is a file
            raise Refused(e.errno, "not a directory (a symbolic link or a file): refused", name) from None
        raise


def open_dirs(root: int, names: tuple[str, ...], create: bool = False) -> int:
    """The fd of ROOT/NAMES[0]/NAMES[1]/…, each opened without following links (see open_dir)."""
    fd = root
    for name in names:
        child = open_dir(fd, name, create)
        if fd != root:
            os.close(fd)
        fd = child
    return fd if fd != root else os.dup(root)


def check_regular(st: os.stat_result, name: str, cap: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise Refused(0, "not a regular file (a FIFO, device, socket or directory): refused", name)
    if st.st_size > cap:
        raise Refused(0, f"larger than the {cap} bytes it may have: refused", name)


def read_regular(name: str, dir_fd: int | None = None, cap: int = 1 << 32) -> tuple[bytes, os.stat_result]:
    """The content and stat of regular file NAME (in DIR_FD, or a path), at most CAP bytes; a link, FIFO,
    device or a larger file is Refused (opened non-blocking: a FIFO cannot stall the reader)."""
    fd = _open_nofollow(name, READ_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        check_regular(st, name, cap)
        chunks, left = [], st.st_size + 1  # one byte more: a file that grew past its stat is seen
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > cap:
            raise Refused(0, f"larger than the {cap} bytes it may have: refused", name)
        return data, st
    finally:
        os.close(fd)


def holds(name: str | os.PathLike[str], sha256: str, size: int, executable: bool = False) -> bool:
    """Whether NAME is a regular file (not through a link) of SIZE bytes hashing to SHA256 (lowercase hex), and
    executable by its owner when EXECUTABLE. A missing file, a link, a FIFO or any error is False: the caller then
    writes the bytes itself. The mode is checked one way only: a file that holds the bytes keeps the mode it has
    (an executable bit a non-executable output need not have, 0700 where a new file would get 0755)."""
    import hashlib

    try:
        fd = open_nofollow(os.fspath(name), os.O_RDONLY)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        try:
            st = os.fstat(fd)
            if st.st_size != size or (executable and not st.st_mode & stat.S_IXUSR):
                return False
            return hashlib.file_digest(f, "sha256").hexdigest() == sha256
        except OSError:
            return False


COPY_CHUNK = 1 << 20


def copy_fd(src: int, dst: int) -> None:
    """Copy src's bytes to dst (both regular files, offsets at 0)."""
    while True:
        n = os.sendfile(dst, src, None, COPY_CHUNK)
        if n == 0:
            return


def create_exclusive(name: str, dir_fd: int | None = None, mode: int = 0o666) -> int:
    """A new file NAME opened for writing: never an existing file, never through a link."""
    return _open_nofollow(name, CREATE_FLAGS, mode, dir_fd=dir_fd)


def open_nofollow(name: str, flags: int, mode: int = 0o666, dir_fd: int | None = None) -> int:
    """os.open with O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC added; only a regular file may be opened."""
    fd = _open_nofollow(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    try:
        check_regular(os.fstat(fd), name, 1 << 62)
    except OSError:
        os.close(fd)
        raise
    return fd


def _open_nofollow(name: str, flags: int, mode: int = 0o666, dir_fd: int | None = None) -> int:
    try:
        return os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
            raise Refused(e.errno, "a symbolic link: refused", name) from None
        raise


def write_new(name: str, data: bytes, dir_fd: int | None = None, mode: int | None = None) -> None:
    """Write DATA to a new file NAME (create_exclusive); MODE, when given, is set exactly (umask aside)."""
    fd = create_exclusive(name, dir_fd)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def unlink_quiet(name: str, dir_fd: int | None = None) -> None:
    """Remove NAME (a link itself, never its target); a missing file is fine."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def unsafe_dir(path: str | os.PathLike[str]) -> str | None:
    """Why PATH is not a directory that only this user (and root) can change, or None when it is one: PATH itself a
    directory, not a link, of this effective user and writable by no one else; every directory above it (after
    resolving links) root's or this user's, and writable by others only with the sticky bit (as /tmp is), so no one
    else can rename or replace what lies below. A root-side step that creates, chmods or removes things under
    PATH by path is then safe from other local users. PATH itself may not be a link (its parent may be)."""
    euid = os.geteuid()
    absolute = os.path.abspath(path)
    real = os.path.join(os.path.realpath(os.path.dirname(absolute)), os.path.basename(absolute))
    try:
        st = os.lstat(real)
    except OSError as e:
        return e.strerror or str(e)
    if not stat.S_ISDIR(st.st_mode):
        return "a link, not a directory" if stat.S_ISLNK(st.st_mode) else "not a directory"
    if st.st_uid != euid:
        return f"owned by uid {st.st_uid}, not by uid {euid}"
    if _writable_by_others(st):
        return f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return unsafe_above(real) or unsafe_links(absolute)


def unsafe_links(path: str | os.PathLike[str], hops: int = 40) -> str | None:
    """Why a link on the way to PATH could be turned elsewhere by another user, or None: each link met while
    resolving PATH (as the kernel does, component by component, into each link's target) must lie where only root
    and this user can change it, and in a directory others may write to (a sticky one, as /tmp) be root's or this
    user's own, since there its owner may replace it. Checking only the resolved directories would pass a link
    another user re-points after the check."""
    euid = os.geteuid()
    parts = [p for p in os.fspath(path).split("/") if p not in ("", ".")]
    if not os.path.isabs(path):
        return unsafe_links(os.path.join(os.getcwd(), path), hops)
    prefix = "/"  # resolved so far: no link in it
    for i, part in enumerate(parts):
        if part == "..":
            prefix = os.path.dirname(prefix)
            continue
        here = os.path.join(prefix, part)
        try:
            st = os.lstat(here)
        except OSError:
            return None  # what does not exist yet is no link (the resolved path's own check speaks for it)
        if not stat.S_ISLNK(st.st_mode):
            prefix = here
            continue
        if hops == 0:
            return f"{here}: too many links"
        why = unsafe_above(here)
        if why is not None:
            return f"the link {here}: {why}"
        parent = os.lstat(prefix)
        if st.st_uid not in (0, euid) and _writable_by_others(parent):
            return f"{here} is a link of uid {st.st_uid}, who could turn it elsewhere"
        target = os.readlink(here)
        rest = "/".join(parts[i + 1:])
        return unsafe_links(os.path.join(prefix if not target.startswith("/") else "/", target, rest), hops - 1)
    return None


def make_private_dirs(path: str | os.PathLike[str], mode: int = 0o700) -> None:
    """os.makedirs, with MODE for every directory it makes, not only the last: intermediate ones made under a umask
    of 002 would be writable by a group that others may share, and refused by unsafe_dir."""
    missing = []
    here = os.path.abspath(path)
    while not os.path.lexists(here):
        missing.append(here)
        here = os.path.dirname(here)
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            pass


def _writable_by_others(st: os.stat_result) -> bool:
    """Writable by another user than its owner: by all, or by a group that someone else is in (a group of the owner's
    own, as a umask of 002 with user private groups gives, is not others)."""
    return bool(st.st_mode & 0o002 or (st.st_mode & 0o020 and not _private_group(st.st_gid, st.st_uid)))


def _private_group(gid: int, uid: int) -> bool:
    """Whether UID is the only user in group GID (as a member, or with it as their primary group)."""
    import grp
    import pwd

    try:
        owner = pwd.getpwuid(uid).pw_name
        members = grp.getgrgid(gid).gr_mem
    except KeyError:
        return False
    return all(m == owner for m in members) and all(p.pw_uid == uid for p in pwd.getpwall() if p.pw_gid == gid)


def unsafe_above(path: str | os.PathLike[str]) -> str | None:
    """Why another user than root and this one could rename or replace PATH (a directory above it theirs, or open to
    others without the sticky bit), or None. PATH's parent is resolved first."""
    euid = os.geteuid()
    parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    while True:
        try:
            st = os.lstat(parent)
        except OSError as e:
            return f"{parent}: {e.strerror or e}"
        if not stat.S_ISDIR(st.st_mode):
            return f"{parent} is not a directory"
        if st.st_uid not in (0, euid):
            return f"{parent} is owned by uid {st.st_uid}, who could replace what lies below it"
        if _writable_by_others(st) and not st.st_mode & stat.S_ISVTX:
            return f"{parent} is writable by others without the sticky bit (mode {stat.S_IMODE(st.st_mode):o})"
        if parent == "/":
            return None
        parent = os.path.dirname(parent)
