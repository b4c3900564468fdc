"""GN's project.json as typed records: targets with their kind, toolchain, outputs and test-only flag."""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
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


def parse_project(data: Mapping[str, Any]) -> GnProject:
    """Turn project.json's decoded JSON into a GnProject; missing keys raise GnThinltoError."""
    try:
        settings = data["build_settings"]
        build_dir = settings["build_dir"]
        targets = {}
        for label, t in data["targets"].items():
            targets[label] = GnTarget(
                label=label,
                type=TargetType.parse(t["type"]),
                toolchain=t.get("toolchain", settings["default_toolchain"]),
                testonly=bool(t.get("testonly", False)),
                outputs=tuple(_rel(o, build_dir) for o in t.get("outputs", ())),
                ldflags=tuple(t.get("ldflags", ())),
            )
        return GnProject(
            build_dir=build_dir,
            root_path=settings["root_path"],
            default_toolchain=settings["default_toolchain"],
            targets=targets,
            gen_input_files=tuple(settings.get("gen_input_files", ())),
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise GnThinltoError(f"project.json: unexpected structure ({type(e).__name__}: {e})") from e
