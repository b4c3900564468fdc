"""HS256 JSON Web Tokens for the cluster's workers, clients and cache writers (RFC 7519; what BuildGrid 0.4.4's `jwt`
method checks with PyJWT: the signature with the shared secret, and an `exp` claim it requires). Standard library
only: minting needs nothing more than HMAC-SHA256, so goma-ext takes no PyJWT dependency for it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from enum import Enum

TOKEN_LIFETIME_S = 365 * 24 * 3600
RENEW_BEFORE_S = 30 * 24 * 3600  # `cluster start` mints new tokens when the old ones expire within this


class Role(Enum):
    """Who a token is for: its `sub` claim, the subject BuildGrid's ACL grants RPCs to (goma_ext/cluster/acl.py)."""

    WORKER = "goma-ext-worker"  # the Bots API and the CAS: takes and answers actions
    CLIENT = "goma-ext-client"  # runs actions and reads the action cache
    CACHE_WRITER = "goma-ext-cache-writer"  # a client that may also write the action cache (UpdateActionResult)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint(secret: str, role: Role, now: float | None = None, lifetime_s: int = TOKEN_LIFETIME_S) -> str:
    """A signed token for ROLE, valid from NOW for LIFETIME_S seconds."""
    t = int(time.time() if now is None else now)
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"sub": role.value, "iat": t, "exp": t + lifetime_s}
    payload = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


@dataclass(frozen=True)
class Claims:
    subject: str
    expires: int


def verify(secret: str, token: str) -> Claims | None:
    """The claims of a token this secret signed (HS256), or None (another key, malformed, no `exp`)."""
    try:
        header, payload, signature = token.split(".")
        want = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(want, _unb64(signature)):
            return None
        if json.loads(_unb64(header)).get("alg") != "HS256":
            return None
        claims = json.loads(_unb64(payload))
        return Claims(str(claims["sub"]), int(claims["exp"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def still_good(secret: str, token: str, now: float | None = None) -> bool:
    """Signed by SECRET and valid for at least RENEW_BEFORE_S more seconds."""
    claims = verify(secret, token)
    return claims is not None and claims.expires - (time.time() if now is None else now) > RENEW_BEFORE_S
