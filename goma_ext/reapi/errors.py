"""Typed remote errors: each says whether retrying (or falling back locally) may help."""

from __future__ import annotations

from goma_ext.errors import GomaExtError


class RemoteError(GomaExtError):
    """A remote-execution failure; `temporary` is true when a retry or a local fallback may succeed."""

    def __init__(self, message: str, *, temporary: bool, code: str | None = None) -> None:
        super().__init__(message)
        self.temporary = temporary
        self.code = code


class RemoteConfigError(RemoteError):
    """The remote configuration (YAML, flags or environment) is unusable."""

    def __init__(self, message: str) -> None:
        super().__init__(message, temporary=False, code="CONFIG")


class DigestMismatchError(RemoteError):
    """A blob's content did not hash to the digest it was fetched by."""

    def __init__(self, message: str) -> None:
        super().__init__(message, temporary=True, code="DIGEST_MISMATCH")


class InputError(RemoteError):
    """An action input cannot be represented remotely (outside the exec root, unreadable, not a file)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, temporary=False, code="INPUT")
