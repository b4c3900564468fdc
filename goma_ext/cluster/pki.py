"""`goma-ext cluster pki`: a CA, a server certificate and client certificates for mTLS, made with Debian's openssl.

For development clusters and tests, not a production PKI: one CA key on disk, no revocation. Keys are EC P-256
(fast to make, accepted by gRPC), each written into a file made 0600 before openssl fills it."""

from __future__ import annotations

import ipaddress
import os
import re
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from goma_ext.cluster.postgres import ClusterError
from thinlto_base import safefs

CA_CERT, CA_KEY = "ca.crt", "ca.key"
SERVER_CERT, SERVER_KEY = "server.crt", "server.key"
DEFAULT_DAYS = 365
_DNS = re.compile(r"[A-Za-z0-9*]([A-Za-z0-9.-]*[A-Za-z0-9])?")  # what a subjectAltName DNS entry may hold here
_CLIENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # also a file name part: no '/', no leading '.'
_KEY_ARGS = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


@dataclass(frozen=True)
class PkiFile:
    """One file made (or reused, for the CA), and what it is, for the line printed about it."""

    path: Path
    what: str


def client_files(directory: Path, name: str) -> tuple[Path, Path]:
    """The certificate and key of client NAME in DIRECTORY."""
    return directory / f"client-{name}.crt", directory / f"client-{name}.key"


def subject_alt_name(names: Sequence[str]) -> str:
    """openssl's subjectAltName value for server NAMES: IP: for an address, DNS: for a host name."""
    entries = []
    for name in names:
        try:
            entries.append(f"IP:{ipaddress.ip_address(name)}")
        except ValueError:
            if not _DNS.fullmatch(name) or len(name) > 253:
                raise ClusterError(f"pki: --server-name {name!r} is neither an IP address nor a DNS name") from None
            entries.append(f"DNS:{name}")
    return ",".join(entries)


def _private_file(path: Path) -> None:
    """PATH created empty with mode 0600, for openssl to write a key into (it keeps the mode)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError as e:
        raise ClusterError(f"pki: {path}: {e.strerror}") from e


def _openssl(args: Sequence[str], key: Path) -> None:
    _private_file(key)
    try:
        proc = subprocess.run(["openssl", "req", "-x509", *_KEY_ARGS, "-keyout", str(key), *args],
                              capture_output=True, text=True, check=False)
    except OSError as e:
        key.unlink(missing_ok=True)
        raise ClusterError(f"pki: cannot run openssl: {e.strerror} (Debian package openssl)") from e
    if proc.returncode != 0:
        key.unlink(missing_ok=True)
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise ClusterError(f"pki: openssl req failed for {key.name}: {last}")


def _signed(directory: Path, cert: Path, key: Path, subject: str, extensions: Sequence[str], days: int) -> None:
    for path in (cert, key):
        if path.exists():
            raise ClusterError(f"pki: {path} exists; remove it or use another directory (nothing is overwritten)")
    added = [a for ext in extensions for a in ("-addext", ext)]
    _openssl(["-days", str(days), "-subj", f"/CN={subject}", "-CA", str(directory / CA_CERT),
              "-CAkey", str(directory / CA_KEY), *added, "-out", str(cert)], key)


def make(directory: Path, server_names: Sequence[str], clients: Sequence[str], days: int = DEFAULT_DAYS
         ) -> list[PkiFile]:
    """DIRECTORY's CA (made, or reused when ca.crt and ca.key are there), a server certificate for SERVER_NAMES
    (its subjectAltName; the first is its CN) when any are given, and one client certificate per name."""
    for name in clients:
        if not _CLIENT.fullmatch(name):
            raise ClusterError(f"pki: --client {name!r}: use letters, digits, '.', '_' and '-' only")
    san = subject_alt_name(server_names) if server_names else ""
    if days < 1:
        raise ClusterError("pki: --days must be at least 1")
    try:
        safefs.make_private_dirs(directory, 0o755)  # no directory it makes writable by a group others share
    except OSError as e:
        raise ClusterError(f"pki: {directory}: {e.strerror}") from e
    # The private keys are made there, and a CA found there signs the server's and the workers' certificates: a
    # directory someone else can change could hand us their CA (then they could issue certificates the cluster
    # trusts) or have openssl write through their links.
    why = safefs.unsafe_dir(directory)
    if why is not None:
        raise ClusterError(f"pki: {directory}: {why}; give a directory of yours that no one else can change")
    ca_cert, ca_key = directory / CA_CERT, directory / CA_KEY
    made: list[PkiFile] = []
    if ca_cert.exists() and ca_key.exists():
        st = os.lstat(ca_key)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise ClusterError(f"pki: {ca_key} is not a private file of yours (0600): not kept as the CA's key")
        made.append(PkiFile(ca_cert, "CA certificate (kept)"))
    else:
        for path in (ca_cert, ca_key):
            if path.exists():
                raise ClusterError(f"pki: {path} exists without its pair; remove it or use another directory")
        _openssl(["-days", str(days), "-subj", "/CN=goma-ext development CA",
                  "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                  "-out", str(ca_cert)], ca_key)
        made += [PkiFile(ca_cert, "CA certificate"), PkiFile(ca_key, "CA private key (0600)")]
    if server_names:
        cert, key = directory / SERVER_CERT, directory / SERVER_KEY
        _signed(directory, cert, key, server_names[0],
                [f"subjectAltName={san}", "basicConstraints=critical,CA:FALSE", "extendedKeyUsage=serverAuth"], days)
        made += [PkiFile(cert, f"server certificate ({san})"), PkiFile(key, "server private key (0600)")]
    for name in clients:
        cert, key = client_files(directory, name)
        _signed(directory, cert, key, name, ["basicConstraints=critical,CA:FALSE", "extendedKeyUsage=clientAuth"],
                days)
        made += [PkiFile(cert, f"client certificate (CN={name})"), PkiFile(key, "client private key (0600)")]
    return made
