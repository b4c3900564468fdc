"""Which programs a worker runs: allow-listed compilers whose identity matches the action's platform."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from goma_ext.remote.identity import MATCH_PROPERTY_KEYS, PROP_SHA256, PROP_VERSION, CompilerIdentity, identify
from goma_ext.remote.proto import re_pb2
from goma_ext.worker.errors import Refusal


@dataclass(frozen=True)
class Allowlist:
    """Program name (an action's argv[0], e.g. `clang++`) -> the local compilers of that name, with identities."""

    compilers: Mapping[str, tuple[CompilerIdentity, ...]]

    @classmethod
    def from_programs(cls, programs: Iterable[str]) -> Allowlist:
        found: dict[str, list[CompilerIdentity]] = {}
        for p in programs:
            ident = identify(p, Path.cwd())
            if ident not in found.setdefault(Path(p).name, []):
                found[Path(p).name].append(ident)
        return cls({name: tuple(idents) for name, idents in found.items()})

    def properties(self) -> list[tuple[str, str]]:
        """Device properties to advertise: every identity of every allow-listed compiler."""
        props = {("OSFamily", "linux")}
        for idents in self.compilers.values():
            for ident in idents:
                props.update((k, v) for k, v in ident.properties() if k in MATCH_PROPERTY_KEYS)
        return sorted(props)

    def resolve(self, command: re_pb2.Command, platform: re_pb2.Platform) -> Path:
        """The local binary to run for `command`, or a Refusal saying why not."""
        if not command.arguments:
            raise Refusal("command has no arguments")
        program = command.arguments[0]
        idents = self.compilers.get(program, ())
        if not idents or "/" in program:
            allowed = ", ".join(sorted(self.compilers)) or "none"
            raise Refusal(f"program {program!r} is not an allow-listed compiler (allowed: {allowed})")
        props = {p.name: p.value for p in list(platform.properties) + list(command.platform.properties)}
        for ident in idents:
            if props.get(PROP_SHA256) == ident.sha256 and props.get(PROP_VERSION) == ident.version:
                return ident.path
        have = "; ".join(f"{i.version!r} {i.sha256}" for i in idents)
        raise Refusal(
            f"compiler identity mismatch for {program}: action wants "
            f"{props.get(PROP_VERSION)!r} sha256 {props.get(PROP_SHA256)!r}, worker has {have}"
        )
