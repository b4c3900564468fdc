"""Pure construction of REAPI Command and Action messages from an exec-root-relative action spec."""

from __future__ import annotations

from dataclasses import dataclass

from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.proto import re_pb2


@dataclass(frozen=True)
class ActionSpec:
    """One remote action; every path is relative (to the exec root or the working directory)."""

    arguments: tuple[str, ...]
    working_directory: str
    output_paths: tuple[str, ...]
    platform: tuple[tuple[str, str], ...]
    input_root: Digest
    timeout_s: int = 600
    salt: bytes = b""
    environment: tuple[tuple[str, str], ...] = ()  # the whole environment of the command


@dataclass(frozen=True)
class BuiltAction:
    """The serialized Command and Action and their digests."""

    command: bytes
    command_digest: Digest
    action: bytes
    action_digest: Digest


def _platform(props: tuple[tuple[str, str], ...]) -> re_pb2.Platform:
    return re_pb2.Platform(properties=[re_pb2.Platform.Property(name=k, value=v) for k, v in sorted(props)])


def build(spec: ActionSpec) -> BuiltAction:
    """Canonical messages: sorted outputs, properties and environment variables (the command's whole environment)."""
    outputs = sorted(set(spec.output_paths))
    command = re_pb2.Command(
        arguments=list(spec.arguments),
        environment_variables=[
            re_pb2.Command.EnvironmentVariable(name=k, value=v) for k, v in sorted(spec.environment)
        ],
        output_files=outputs,
        output_paths=outputs,
        working_directory="" if spec.working_directory in ("", ".") else spec.working_directory,
        platform=_platform(spec.platform),
    )
    command_bytes = serialize(command)
    command_digest = Digest.of_bytes(command_bytes)
    action = re_pb2.Action(
        command_digest=command_digest.to_proto(),
        input_root_digest=spec.input_root.to_proto(),
        platform=_platform(spec.platform),
        salt=spec.salt,
    )
    action.timeout.seconds = spec.timeout_s
    action_bytes = serialize(action)
    return BuiltAction(command_bytes, command_digest, action_bytes, Digest.of_bytes(action_bytes))
