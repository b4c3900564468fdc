"""GetCapabilities: check the server speaks SHA-256 and learn its batch size limit."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from goma_ext.reapi import retry
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.proto import re_grpc, re_pb2

DEFAULT_BATCH_BYTES = 4 * 1024 * 1024 - 4096


@dataclass(frozen=True)
class ServerLimits:
    """What the client may rely on, from the server's Capabilities."""

    max_batch_bytes: int
    exec_enabled: bool
    cache_update_enabled: bool


def limits_from(caps: re_pb2.ServerCapabilities) -> ServerLimits:
    """Validate a Capabilities answer (no asserts: a bad server gets a typed, non-temporary error)."""
    sha = re_pb2.DigestFunction.SHA256
    cache_fn = caps.cache_capabilities.digest_function
    if sha not in cache_fn:
        names = [re_pb2.DigestFunction.Value.Name(f) for f in cache_fn] or ["none"]
        raise RemoteError(f"server CAS does not offer SHA256 digests (offers {', '.join(names)})", temporary=False)
    exec_caps = caps.execution_capabilities
    if exec_caps.exec_enabled and exec_caps.digest_function not in (sha, re_pb2.DigestFunction.UNKNOWN):
        raise RemoteError("server execution does not use SHA256 digests", temporary=False)
    batch = caps.cache_capabilities.max_batch_total_size_bytes or DEFAULT_BATCH_BYTES
    return ServerLimits(
        max_batch_bytes=max(1024, batch),
        exec_enabled=exec_caps.exec_enabled,
        cache_update_enabled=caps.cache_capabilities.action_cache_update_capabilities.update_enabled,
    )


def fetch(
    channel: grpc.Channel, instance: str, metadata: tuple[tuple[str, str], ...], policy: retry.RetryPolicy
) -> ServerLimits:
    stub = re_grpc.CapabilitiesStub(channel)
    request = re_pb2.GetCapabilitiesRequest(instance_name=instance)
    caps = retry.call("GetCapabilities", lambda t: stub.GetCapabilities(request, timeout=t, metadata=metadata), policy)
    return limits_from(caps)
