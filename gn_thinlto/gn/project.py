"""GN's project.json as typed records: targets with their kind, toolchain, outputs and test-only flag."""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gn_thinlto.errors import GnThinltoError


class TargetType(enum.Enum):
    """GN target types (`gn help target_types`) this tool distinguishes."""

    EXECUTABLE = "executable"
    SHARED_LIBRARY = "shared_library"
    LOADABLE_MODULE = "loadable_module"
    STATIC_LIBRARY = "static_library"
    SOURCE_SET = "source_set"
    OTHER = "other"

    @classmethod
    def parse(cls, value: str) -> TargetType:
        try:
            return cls(value)
        except ValueError:
            return cls.OTHER

    @property
    def is_link(self) -> bool:
        return self in (TargetType.EXECUTABLE, TargetType.SHARED_LIBRARY, TargetType.LOADABLE_MODULE)


class GnTool(enum.Enum):
    """GN tool names (`gn help tool`) as they appear in rule names: TOOL, or TOOLCHAIN_TOOL elsewhere."""

    ALINK = "alink"
    SOLINK = "solink"
    SOLINK_MODULE = "solink_module"
    LINK = "link"

    @classmethod
    def of_rule(cls, rule: str) -> GnTool | None:
        return _tool_of_rule(rule)


@functools.cache
def _tool_of_rule(rule: str) -> GnTool | None:
    """GnTool.of_rule, once per rule name (a build has a few dozen; the planner asks once per link input)."""
    for tool in sorted(GnTool, key=lambda t: -len(t.value)):
        if rule == tool.value or rule.endswith("_" + tool.value):
            return tool
    return None


@dataclass(frozen=True)
class GnTarget:
    """One target of project.json; `outputs` are relative to the build directory."""

    label: str
    type: TargetType
    toolchain: str
    testonly: bool
    outputs: tuple[str, ...]
    ldflags: tuple[str, ...]

    @property
    def label_no_toolchain(self) -> str:
        return self.label.split("(")[0]


@dataclass(frozen=True)
class GnProject:
    """The parts of project.json the planner reads."""

    build_dir: str
    root_path: str
    default_toolchain: str
    targets: Mapping[str, GnTarget]
    gen_input_files: tuple[str, ...]

    def toolchain_ninja(self, toolchain: str) -> str:
        """The toolchain.ninja GN writes for TOOLCHAIN, relative to the build dir."""
        if toolchain == self.default_toolchain:
            return "toolchain.ninja"
        return f"{toolchain.split(':')[-1]}/toolchain.ninja"

    def target_ninja(self, target: GnTarget) -> str:
        """The per-target ninja file GN writes (obj/DIR/NAME.ninja, under the toolchain dir if not default)."""
        label = target.label_no_toolchain
        path, _, name = label[2:].partition(":")
        prefix = "" if target.toolchain == self.default_toolchain else f"{target.toolchain.split(':')[-1]}/"
        return f"{prefix}obj/{path + '/' if path else ''}{name}.ninja"


def _rel(path: str, build_dir: str) -> str:
    if path.startswith(build_dir):
        rel = path[len(build_dir):]
        return rel if "/" in rel else f"./{rel}"
    return path


_REQUIRED = object()


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number")


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "an object": lambda v: isinstance(v, dict), "a string": lambda v: isinstance(v, str),
    "a list of strings": _is_strings, "true or false": lambda v: isinstance(v, bool),
}


def _field(data: Any, key: str, where: str, expected: str, default: Any = _REQUIRED) -> Any:
    """DATA[KEY] (DEFAULT when absent, unless required), DATA being the object at WHERE; the value must be
    EXPECTED (a key of _TYPE_CHECKS), else GnThinltoError naming where it is."""
    if not isinstance(data, dict):
        raise GnThinltoError(f"project.json: {where}: expected an object, found {_kind(data)}")
    if key not in data:
        if default is _REQUIRED:
            raise GnThinltoError(f"project.json: {where}: no {key!r} (not from `gn gen --ide=json`?)")
        return default
    value = data[key]
    if not _TYPE_CHECKS[expected](value):
        at = key if where == "top level" else f"{where}.{key}"
        raise GnThinltoError(f"project.json: {at}: expected {expected}, found {_kind(value)}")
    return value


def _target(label: str, t: Any, default_toolchain: str, build_dir: str) -> GnTarget:
    """One target of project.json. Its fields are checked at once, and one by one (to name the bad one) only
    on failure: a Chromium project.json has tens of thousands of targets."""
    if not isinstance(t, dict) or not (
        isinstance(t.get("type"), str) and isinstance(t.get("toolchain", ""), str)
        and isinstance(t.get("testonly", False), bool) and _is_strings(t.get("outputs", []))
        and _is_strings(t.get("ldflags", []))
    ):
        where = f"targets[{label!r}]"
        _field(t, "type", where, "a string")
        _field(t, "toolchain", where, "a string", "")
        _field(t, "testonly", where, "true or false", False)
        _field(t, "outputs", where, "a list of strings", [])
        _field(t, "ldflags", where, "a list of strings", [])
    return GnTarget(
        label=label,
        type=TargetType.parse(t["type"]),
        toolchain=t.get("toolchain", default_toolchain),
        testonly=t.get("testonly", False),
        outputs=tuple(_rel(o, build_dir) for o in t.get("outputs", ())),
        ldflags=tuple(t.get("ldflags", ())),
    )


def parse_project(data: Mapping[str, Any]) -> GnProject:
    """Turn project.json's decoded JSON into a GnProject; a missing key or a value of the wrong type raises
    GnThinltoError naming where it is."""
    settings = _field(data, "build_settings", "top level", "an object")
    build_dir = _field(settings, "build_dir", "build_settings", "a string")
    default_toolchain = _field(settings, "default_toolchain", "build_settings", "a string")
    targets = _field(data, "targets", "top level", "an object")
    return GnProject(
        build_dir=build_dir,
        root_path=_field(settings, "root_path", "build_settings", "a string"),
        default_toolchain=default_toolchain,
        targets={label: _target(label, t, default_toolchain, build_dir) for label, t in targets.items()},
        gen_input_files=tuple(_field(settings, "gen_input_files", "build_settings", "a list of strings", [])),
    )
