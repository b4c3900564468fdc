"""gRPC channels for a RemoteConfig: TLS with an optional CA file and client certificate, size limits, auth metadata."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import grpc

from goma_ext.reapi.errors import RemoteConfigError
from goma_ext.reapi.secret_file import read_secret

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# What each PEM file must hold, so a swapped or wrong file is one clear line here rather than an opaque
# handshake failure later.
PEM_MARKERS = {"ca_file": b"-----BEGIN CERTIFICATE-----", "client_cert": b"-----BEGIN CERTIFICATE-----",
               "client_key": b"PRIVATE KEY-----"}


class ChannelSettings(Protocol):
    """What a channel needs of the remote configuration (the client side's RemoteConfig has it), so the REAPI basics
    do not import the settings."""

    @property
    def target(self) -> str: ...
    @property
    def secure(self) -> bool: ...
    @property
    def ca_file(self) -> Path | None: ...
    @property
    def client_cert(self) -> Path | None: ...
    @property
    def client_key(self) -> Path | None: ...
    @property
    def compression(self) -> str: ...


@dataclass(frozen=True)
class TlsMaterial:
    """The PEM bytes ssl_channel_credentials takes (None: the default roots, or no client certificate)."""

    root_certificates: bytes | None = None
    private_key: bytes | None = None
    certificate_chain: bytes | None = None


def _pem(setting: str, path: Path | None) -> bytes | None:
    if path is None:
        return None
    what = "private key" if setting == "client_key" else "certificate"
    if setting == "client_key":
        return read_secret(setting, path, PEM_MARKERS[setting], what)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise RemoteConfigError(f"remote {setting} {path}: {e.strerror}") from e
    if PEM_MARKERS[setting] not in data:
        raise RemoteConfigError(f"remote {setting} {path}: not a PEM {what}")
    return data


def tls_material(cfg: ChannelSettings) -> TlsMaterial:
    """Read cfg's CA file and client certificate and key; a missing or unreadable one names the setting and file."""
    root = _pem("ca_file", cfg.ca_file)
    chain = _pem("client_cert", cfg.client_cert)  # the certificate first: the file a user names first
    return TlsMaterial(root_certificates=root, private_key=_pem("client_key", cfg.client_key), certificate_chain=chain)


def open_channel(cfg: ChannelSettings) -> grpc.Channel:
    """An (insecure or TLS) channel; nothing is sent until the first call."""
    options = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.enable_retries", 0),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
    ]
    # gzip: every message this channel sends is compressed; the server decompresses any algorithm gRPC knows,
    # and compresses its answers only when it is configured to (grpc.Compression is per server, not per call)
    compression = grpc.Compression.Gzip if cfg.compression == "gzip" else None
    if not cfg.secure:
        return grpc.insecure_channel(cfg.target, options=options, compression=compression)
    tls = tls_material(cfg)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=tls.root_certificates, private_key=tls.private_key, certificate_chain=tls.certificate_chain
    )
    return grpc.secure_channel(cfg.target, credentials, options=options, compression=compression)
