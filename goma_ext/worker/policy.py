"""Which programs a worker runs: allow-listed compilers whose identity matches the action's platform, or (hermetic
actions) a program shipped in the input root; and whether the action's platform is one this worker offers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from goma_ext.reapi.proto import code_pb2, re_pb2
from goma_ext.remote.identity import (
    MATCH_PROPERTY_KEYS,
    OS_FAMILY,
    PROP_OS,
    PROP_SHA256,
    PROP_VERSION,
    CompilerIdentity,
    identify,
)
from goma_ext.worker.errors import Refusal

PROP_IMAGE = "container-image"  # the environment an action runs in: always checked, advertised or not
IDENTITY_KEYS = frozenset({PROP_SHA256, PROP_VERSION})  # per compiler; the allow-list checks them pairwise


class PlatformError(ValueError):
    """A --platform KEY=VALUE the worker cannot advertise (one line)."""


@dataclass(frozen=True)
class Offer:
    """Platform properties the worker advertises besides its compilers' (`--platform KEY=VALUE`), one value a key."""

    properties: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, items: Iterable[str]) -> Offer:
        props: dict[str, str] = {}
        for item in items:
            key, eq, value = item.partition("=")
            if not eq or not key or key != key.strip():
                raise PlatformError(f"--platform {item!r}: expected KEY=VALUE")
            if key in IDENTITY_KEYS:
                raise PlatformError(f"--platform {key}: the worker advertises its compilers' identities itself")
            if key == PROP_OS and value != OS_FAMILY:
                raise PlatformError(f"--platform {item}: this worker runs {PROP_OS}={OS_FAMILY}")
            if key in props and props[key] != value:
                raise PlatformError(f"--platform {key} given twice ({props[key]!r}, {value!r}): one value a key")
            props[key] = value
        return cls(tuple(sorted(props.items())))

    def value(self, key: str) -> str | None:
        return dict(self.properties).get(key)

    def check(self, wanted: Mapping[str, list[str]]) -> None:
        """Refuse (FAILED_PRECONDITION) an action asking for a value of a key this worker advertises, or for any
        container-image, that the worker does not have. Other keys it does not advertise are not requirements
        here (BuildGrid treats them as wildcards; see goma_ext/cluster/server.py)."""
        have = {PROP_OS: OS_FAMILY, **dict(self.properties)}
        for key in sorted(wanted):
            if key in IDENTITY_KEYS or (key not in have and key != PROP_IMAGE):
                continue
            for value in wanted[key]:
                if have.get(key) != value:
                    raise Refusal(f"it asks for {key}={value}; {_offered(key, have.get(key))}",
                                  code_pb2.FAILED_PRECONDITION)


NO_OFFER = Offer()


def _offered(key: str, value: str | None) -> str:
    if key == PROP_IMAGE:
        return f"this worker runs {value}" if value is not None else "this worker runs no container image"
    return f"this worker offers {key}={value}"


def requested(action: re_pb2.Action, command: re_pb2.Command) -> dict[str, list[str]]:
    """The action's platform properties (Action and Command platforms together), every value of each key."""
    props: dict[str, list[str]] = {}
    for p in list(action.platform.properties) + list(command.platform.properties):
        if p.value not in props.setdefault(p.name, []):
            props[p.name].append(p.value)
    return props


def is_input_program(program: str) -> bool:
    """A hermetic action's argv[0]: a path (it contains '/') to a program in the input root, not a bare name."""
    return "/" in program


@dataclass(frozen=True)
class Allowlist:
    """Program name (an action's argv[0], e.g. `clang++`) -> the local compilers of that name, with identities."""

    compilers: Mapping[str, tuple[CompilerIdentity, ...]]
    input_programs: bool = True  # also run programs shipped in the input root (sandboxed only)

    @classmethod
    def from_programs(cls, programs: Iterable[str], input_programs: bool = True) -> Allowlist:
        found: dict[str, list[CompilerIdentity]] = {}
        for p in programs:
            ident = identify(p, Path.cwd())
            if ident not in found.setdefault(Path(p).name, []):
                found[Path(p).name].append(ident)
        return cls({name: tuple(idents) for name, idents in found.items()}, input_programs)

    def properties(self, offer: Offer = NO_OFFER) -> list[tuple[str, str]]:
        """Device properties to advertise: every identity of every allow-listed compiler, and the offer."""
        props = {(PROP_OS, OS_FAMILY), *offer.properties}
        for idents in self.compilers.values():
            for ident in idents:
                props.update((k, v) for k, v in ident.properties() if k in MATCH_PROPERTY_KEYS)
        return sorted(props)

    def resolve(self, command: re_pb2.Command, platform: re_pb2.Platform) -> Path:
        """The local binary to run for `command` (argv[0] a bare name), or a Refusal saying why not."""
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
