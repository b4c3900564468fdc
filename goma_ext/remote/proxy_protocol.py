"""The wire format and file layout shared by `goma-ext run`'s thin client and `goma-ext proxy` (standard library only).

Standard library only, and light: the thin client imports it on every action (no pathlib, hashlib, dataclasses).

A connection carries one request and its answer. Each message is a frame: a 4-byte big-endian length, then a
UTF-8 JSON object. The proxy answers a `run` with `wait` frames (one a second, so a client can tell a busy
proxy from a hung one) and then exactly one final frame: `result`, `error` (the remote side failed: fall back
to a local run), `refused` (the request is invalid) or `mismatch` (another goma-ext version: replace it).

State directory (mode 0700): per endpoint key K, `proxy-K.sock` (mode 0600), `proxy-K.lock` (held while
one is started), `proxy-K.log`, `proxy-K.pid` and `proxy-K.hung` (touched when it stopped answering). An endpoint
has SHARDS proxies (shard_count): shard 0 is `proxy-K.*`, shard S > 0 is `proxy-K-S.*`. A client sends an action
to the shard its command line names (shard_of), so identical actions meet on one proxy and run once.

A `run` request: op, version, argv, cwd (absolute), compiler {path, version, sha256} and settings {section,
env, flags, token_sha256}: the client's `remote:` YAML section, its GOMA_EXT_* variables (never the token)
and its command-line settings, which the proxy merges exactly as the in-process client would.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import struct
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up budget)
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    import socket

PROTOCOL = 1
HEADER = struct.Struct(">I")
MAX_REQUEST_BYTES = 1 << 20
MAX_ANSWER_BYTES = 256 << 20
HEARTBEAT_S = 1.0
SUN_PATH_MAX = 107  # sockaddr_un.sun_path holds 108 bytes including the terminating NUL

# Frame types of the proxy's answers.
WAIT = "wait"
RESULT = "result"
ERROR = "error"
REFUSED = "refused"
MISMATCH = "mismatch"

STATE_DIR_ENV = "GOMA_EXT_PROXY_DIR"
SILENCE_ENV = "GOMA_EXT_PROXY_TIMEOUT"  # seconds without a frame before a client gives up on the proxy
DEFAULT_SILENCE_S = 20.0
SHARDS_ENV = "GOMA_EXT_PROXY_SHARDS"  # proxy processes per endpoint; default from the machine (default_shards)
# One proxy per this many cores. A shard is one Python process (the GIL): at a few ms of CPU per executed action,
# one serves a few hundred actions a second, and 1,000 remote cores ask for 12 or more. A remote build leaves its own
# cores mostly idle during the backend phase, and a shard spends CPU only on the actions it serves, so up to half of
# them may be proxies: all the shards together use about a third of a 32-core machine's cores at that rate
# (docs/benchmarks.md, "The scale model with shards").
CORES_PER_SHARD = 2
MAX_SHARDS = 16
HUNG_HOLD_S = 30.0  # after a hung proxy, later clients run locally for this long instead of waiting too
# (NAME, DEFAULT, MEANING) for docs/reference/environment.md.
ENVIRONMENT: tuple[tuple[str, str, str], ...] = (
    (STATE_DIR_ENV, "`$XDG_RUNTIME_DIR/goma-ext`, else `~/.cache/goma-ext/proxy`",
     "where the user's proxies keep their sockets, locks and logs"),
    (SILENCE_ENV, f"`{DEFAULT_SILENCE_S:g}`", "seconds without a frame from the proxy before a client gives up on it "
                                             "(and runs the action itself)"),
    (SHARDS_ENV, f"one per {CORES_PER_SHARD} cores, 1 to {MAX_SHARDS}",
     f"proxy processes per endpoint (1 to {MAX_SHARDS}); identical actions always go to the same one"),
)


class FrameError(Exception):
    """A frame that is truncated, too large or not a JSON object."""


def version_tag() -> str:
    """Who speaks: goma-ext's version and the protocol number; client and proxy must agree exactly."""
    from goma_ext import __version__

    return f"{__version__}/p{PROTOCOL}"


def state_dir(env: Mapping[str, str]) -> str:
    """$GOMA_EXT_PROXY_DIR, else $XDG_RUNTIME_DIR/goma-ext, else ~/.cache/goma-ext/proxy (the user's alone)."""
    if env.get(STATE_DIR_ENV):
        return env[STATE_DIR_ENV]
    if env.get("XDG_RUNTIME_DIR"):
        return os.path.join(env["XDG_RUNTIME_DIR"], "goma-ext")
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache", "goma-ext", "proxy")


def endpoint_key(cwd: str, endpoint: str, instance: str, ca_file: str | None, token_file: str | None,
                 token_sha256: str, headers: tuple[tuple[str, str], ...] = (), *, client_cert: str | None = None,
                 client_key: str | None = None, compression: str | None = None) -> str:
    """16 hex digits naming one proxy: what selects the server and the credentials (files as absolute paths
    from cwd, a token only as its hash). CRC-32 rather than SHA-256: it only names files, and zlib loads in a
    fraction of the time hashlib takes (the thin client's start-up budget). A client certificate is part of the
    identity: clients presenting different ones (or none) never share a proxy. It is added only when set, so
    the keys of settings without one stay what they were. So is compression: the proxy's channel compresses or
    does not (`off`, the default, keeps the key)."""
    import zlib

    def absolute(p: str | None) -> str:
        return os.path.normpath(os.path.join(cwd, p)) if p else ""

    fields = [endpoint, instance, absolute(ca_file), absolute(token_file), token_sha256, [list(h) for h in headers]]
    if client_cert or client_key:
        fields.append([absolute(client_cert), absolute(client_key)])
    compression = (compression or "").strip().lower()
    if compression and compression != "off":
        fields.append(["compression", compression])
    text = json.dumps(fields).encode()
    return f"{zlib.crc32(text):08x}{zlib.crc32(text[::-1]):08x}"


def token_hash(token: str | None) -> str:
    """What the key and requests carry of a bearer token: its SHA-256 (hashlib loaded only when there is one)."""
    if not token:
        return ""
    import hashlib

    return hashlib.sha256(token.encode()).hexdigest()


def paths(directory: str, key: str, shard: int = 0) -> dict[str, str]:
    name = f"proxy-{key}" if shard == 0 else f"proxy-{key}-{shard}"
    return {kind: os.path.join(directory, f"{name}.{kind}") for kind in ("sock", "lock", "log", "pid", "hung")}


def default_shards(cores: int | None = None) -> int:
    """Proxies per endpoint on a machine of CORES cores (default: this one): one per CORES_PER_SHARD cores, 1 to
    MAX_SHARDS."""
    return max(1, min(MAX_SHARDS, (os.cpu_count() or 1 if cores is None else cores) // CORES_PER_SHARD))


def shard_count(env: Mapping[str, str]) -> int:
    """$GOMA_EXT_PROXY_SHARDS, else default_shards(); ValueError if it is not a whole number from 1 to MAX_SHARDS."""
    text = env.get(SHARDS_ENV, "").strip()
    if not text:
        return default_shards()
    n = int(text)
    if not 1 <= n <= MAX_SHARDS:
        raise ValueError(f"{SHARDS_ENV}={text!r}: expected 1 to {MAX_SHARDS}")
    return n


def shard_of(argv: Sequence[str], shards: int) -> int:
    """The shard an action goes to: a hash of its command line (CRC-32, see endpoint_key), so that identical actions
    from any build directory or client reach the same proxy and its in-flight deduplication."""
    if shards <= 1:
        return 0
    import zlib

    return zlib.crc32("\0".join(argv).encode(errors="surrogateescape")) % shards


def make_state_dir(directory: str) -> None:
    """Create the state directory as the user's alone (0700); refuse one that another user owns or could replace,
    or reached through a link another user could re-point: the proxy writes its pid, log, lock and `.hung` files
    there by path, and another user who could swap the directory for one of theirs would have those writes follow
    links of their choosing (say GOMA_EXT_PROXY_DIR=/tmp/goma-ext/$USER, where someone else made /tmp/goma-ext
    first). Not for the thin client: it only reads and touches `.hung` there (mark_hung, without following a
    link)."""
    from thinlto_base import safefs  # the full client's and the proxy's: the thin client imports only the stdlib

    try:
        safefs.make_private_dirs(directory)
        real = os.path.realpath(directory)  # a link of the user's own, where no one else can change it, is fine
        fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        raise OSError(f"proxy state directory {directory}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise OSError(f"proxy state directory {directory} belongs to uid {st.st_uid}, not to this user")
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    why = safefs.unsafe_links(directory) or safefs.unsafe_dir(real)
    if why is not None:
        raise OSError(f"proxy state directory {directory}: {why}; set {STATE_DIR_ENV} to a directory of yours")


def silence_s(env: Mapping[str, str]) -> float:
    """$GOMA_EXT_PROXY_TIMEOUT (ValueError if it is not a number)."""
    return float(env.get(SILENCE_ENV, DEFAULT_SILENCE_S))


def hung_recently(hung_file: str) -> bool:
    """Whether a client marked this proxy hung (touched its `.hung` file) less than HUNG_HOLD_S ago."""
    import time

    try:
        return time.time() - os.stat(hung_file).st_mtime < HUNG_HOLD_S
    except OSError:
        return False


def mark_hung(hung_file: str) -> None:
    try:
        fd = os.open(hung_file, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError:
        return
    try:
        os.utime(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_socket_path(path: str) -> None:
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise OSError(f"proxy socket path {path} is longer than {SUN_PATH_MAX} bytes; set {STATE_DIR_ENV} shorter")


def send(sock: socket.socket, message: Mapping[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks: list[bytes] = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket, limit: int) -> dict[str, Any]:
    """One frame as a dict; EOFError when the peer closed before a frame began or inside one."""
    (size,) = HEADER.unpack(_recv_exact(sock, HEADER.size))
    if size > limit:
        raise FrameError(f"frame of {size} bytes exceeds the limit of {limit}")
    try:
        message = json.loads(_recv_exact(sock, size))
    except (ValueError, RecursionError) as e:  # RecursionError: nested too deeply for the parser
        raise FrameError(f"frame is not JSON: {e}") from e
    if not isinstance(message, dict):
        raise FrameError(f"frame is a JSON {type(message).__name__}, not an object")
    return message


def exchange(sock: socket.socket, message: Mapping[str, Any], silence_s: float) -> dict[str, Any]:
    """Send a request and return the final frame, skipping `wait` frames; TimeoutError when the proxy stays
    silent for silence_s, EOFError/FrameError/OSError when the connection breaks."""
    sock.settimeout(silence_s)
    try:
        send(sock, message)
    except (BrokenPipeError, ConnectionResetError):
        pass  # a proxy at its connection cap answers (refuses) before reading: its frame may still be there
    while True:
        frame = receive(sock, MAX_ANSWER_BYTES)
        if frame.get("type") != WAIT:
            return frame


class Result:
    """A `result` frame's fields, decoded and type-checked (FrameError if not)."""

    __slots__ = ("bytes_uploaded", "exit_code", "input_bytes", "mode", "phases", "stderr", "stdout")

    def __init__(self, frame: Mapping[str, Any]) -> None:
        import base64

        try:
            self.exit_code = int(frame["exit_code"])
            self.stdout = base64.b64decode(frame["stdout"])
            self.stderr = base64.b64decode(frame["stderr"])
            self.mode = str(frame["mode"])
            self.bytes_uploaded, self.input_bytes = int(frame["bytes_uploaded"]), int(frame["input_bytes"])
            self.phases = {str(k): float(v) for k, v in dict(frame["phases"]).items()}
        except (KeyError, TypeError, ValueError) as e:
            raise FrameError(f"malformed result frame: {e!r}") from e

    @property
    def cache_hit(self) -> bool:
        return self.mode == "cache_hit"


def run_message(argv: list[str], cwd: str, compiler: tuple[str, str, str], section: Mapping[str, Any],
                env: Mapping[str, str], flags: Mapping[str, str | None], token_sha256: str,
                files: tuple[list[str], list[str]] | None = None) -> dict[str, Any]:
    """A `run` request. compiler = (resolved path, version line, sha256); env is filtered to GOMA_EXT_*
    without secrets; flags are the command line's settings (endpoint, instance, ca_file, client_cert, client_key,
    token_file, exec_root).
    files = (inputs, outputs) relative to cwd, for a caller that knows them (the DTLTO distributor); without
    it the proxy derives them from the backend command and its index."""
    path, version, sha256 = compiler
    extra = {"inputs": files[0], "outputs": files[1]} if files is not None else {}
    return {
        **extra,
        "op": "run",
        "version": version_tag(),
        "argv": argv,
        "cwd": cwd,
        "compiler": {"path": path, "version": version, "sha256": sha256},
        "settings": {
            "section": dict(section),
            "env": {k: v for k, v in env.items() if k.startswith("GOMA_EXT_") and not k.endswith("_TOKEN")},
            "flags": {k: str(v) for k, v in flags.items() if v is not None},
            "token_sha256": token_sha256,
        },
    }


def connect(path: str | os.PathLike[str], timeout_s: float = 2.0) -> socket.socket:
    """A connection to the proxy listening at PATH, refused (PermissionError) unless it runs as this user: whoever
    else could make a socket there (a GOMA_EXT_PROXY_DIR others can write to) would get our requests, answer them
    with exit codes and outputs of its choice, and learn our command lines."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect(os.fspath(path))
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if uid != os.geteuid():
            raise PermissionError(errno.EPERM, f"served by uid {uid}, not by this user", os.fspath(path))
    except BaseException:
        sock.close()
        raise
    return sock
