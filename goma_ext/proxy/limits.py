"""How much one proxy takes on (standard library only: the CLI reads these without loading the server)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_IDLE_S = 600.0
DEFAULT_MAX_ACTIVE = 256  # actions the proxy works on at once; more wait in its queue (clients get `wait`)
# Open client connections at once. Each waits for its action, so a ninja -j1000 build holds about 1,000; one
# costs a descriptor, not a thread (see listener.py). Beyond the cap a client is refused and runs its action
# locally.
DEFAULT_MAX_CONNECTIONS = 2048
DEFAULT_REQUEST_TIMEOUT_S = 10.0  # from connect to the request's last byte (a local client sends it at once)


@dataclass(frozen=True)
class Limits:
    """Actions at once, open connections, and the deadline for a whole request."""

    max_active: int = DEFAULT_MAX_ACTIVE
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
