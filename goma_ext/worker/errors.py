"""Refusals: a lease the worker will not run, with the gRPC status code it is completed with."""

from __future__ import annotations

from goma_ext.errors import GomaExtError
from goma_ext.reapi.proto import code_pb2


class Refusal(GomaExtError):
    """The action breaks the worker's policy (program, identity, paths); completes the lease, never crashes."""

    def __init__(self, message: str, code: int = code_pb2.PERMISSION_DENIED) -> None:
        super().__init__(message)
        self.code = code


def bad_path(message: str) -> Refusal:
    return Refusal(message, code_pb2.INVALID_ARGUMENT)
