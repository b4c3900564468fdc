"""gRPC channels for a RemoteConfig: TLS with an optional CA file, message size limits, auth metadata."""

from __future__ import annotations

import grpc

from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.errors import RemoteConfigError

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def open_channel(cfg: RemoteConfig) -> grpc.Channel:
    """An (insecure or TLS) channel; nothing is sent until the first call."""
    options = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.enable_retries", 0),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
    ]
    if not cfg.secure:
        return grpc.insecure_channel(cfg.target, options=options)
    root = None
    if cfg.ca_file is not None:
        try:
            root = cfg.ca_file.read_bytes()
        except OSError as e:
            raise RemoteConfigError(f"remote ca_file {cfg.ca_file}: {e.strerror}") from e
    return grpc.secure_channel(cfg.target, grpc.ssl_channel_credentials(root_certificates=root), options=options)
