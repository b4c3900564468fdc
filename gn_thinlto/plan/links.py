"""GN's link edges, evaluated: the link argv, its response-file template, and every input classified as
ThinLTO bitcode, native object, archive (with members) or other. Pure functions over parsed GN data."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from gn_thinlto.gn.ninja_text import Edge, NinjaFile, Rule, evaluate_rule_binding
from gn_thinlto.gn.project import GnProject, GnTarget, GnTool
from gn_thinlto.plan import linkline
from gn_thinlto.plan.linkline import LtoMode, Refused
from gn_thinlto.plan.model import InputKind

_IN_SENTINEL = "\x00gn-thinlto-inputs\x00"


@dataclass(frozen=True)
class GnGraph:
    """GN's output for one build dir: project.json and the parsed ninja files (keyed by path in OUT)."""

    project: GnProject
    ninja: Mapping[str, NinjaFile]


@dataclass(frozen=True)
class Producer:
    file: str
    edge: Edge


@dataclass(frozen=True)
class GnLink:
    """GN's link edge for one target, evaluated: argv (rsp not expanded) and the rsp template."""

    file: str
    edge: Edge
    argv: tuple[str, ...]
    rsp_path: str
    rsp_prefix: tuple[str, ...]
    rsp_suffix: tuple[str, ...]
    whole_archive: bool


@dataclass(frozen=True)
class LinkInput:
    path: str
    kind: InputKind
    members: tuple[tuple[str, InputKind], ...] = ()  # set for archives GN builds: their objects, in order

    @property
    def is_archive(self) -> bool:
        return bool(self.members)


def producers_of(graph: GnGraph) -> dict[str, Producer]:
    out: dict[str, Producer] = {}
    for name in sorted(graph.ninja):
        for edge in graph.ninja[name].edges:
            for o in edge.outputs:
                out[o] = Producer(name, edge)
    return out


def rules_of(graph: GnGraph) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for name in sorted(graph.ninja):
        rules.update(graph.ninja[name].rules)
    return rules


_SHELL_QUOTING = re.compile(r"[\\'\"]")
_SHELL_SPACE = re.compile(r"[ \t\r\n]+")


def shell_split(text: str) -> list[str]:
    """shlex.split(TEXT); GN's commands rarely quote, and then splitting on shlex's whitespace is the same."""
    if _SHELL_QUOTING.search(text):
        return shlex.split(text)
    return [t for t in _SHELL_SPACE.split(text) if t]


def command_argv(producer: Producer, graph: GnGraph, rules: Mapping[str, Rule], key: str = "command") -> list[str]:
    rule = rules.get(producer.edge.rule)
    if rule is None:
        raise Refused(f"GN rule {producer.edge.rule!r} not found")
    text = evaluate_rule_binding(rule, key, producer.edge, graph.ninja[producer.file].variables)
    try:
        return shell_split(text)
    except ValueError as e:
        raise Refused(f"cannot split the {producer.edge.rule} command of {producer.edge.outputs[0]}: {e}") from e


def object_kind(path: str, producers: Mapping[str, Producer], graph: GnGraph, rules: Mapping[str, Rule]) -> InputKind:
    producer = producers.get(path)
    if producer is None:
        if path.endswith((".o", ".obj")):
            raise Refused(f"prebuilt object {path} has no GN edge; cannot tell whether it is bitcode")
        return InputKind.OTHER
    if GnTool.of_rule(producer.edge.rule) is not None:  # an archive or a linked binary
        return InputKind.OTHER
    mode = linkline.lto_mode(command_argv(producer, graph, rules))
    if mode is LtoMode.FULL:
        raise Refused(f"{path} is compiled with full LTO; only ThinLTO objects can be split")
    return InputKind.BITCODE if mode is LtoMode.THIN else InputKind.NATIVE


class InputClassifier:
    """Link inputs classified for every link of one plan, each path once: links share most of their inputs
    (a 1,000-object source_set in 100 tests), and each classification evaluates and splits a compile command."""

    def __init__(self, graph: GnGraph, producers: Mapping[str, Producer], rules: Mapping[str, Rule]) -> None:
        self._graph, self._producers, self._rules = graph, producers, rules
        self._kinds: dict[str, InputKind | str] = {}  # a str is the reason object_kind refused the path
        self._inputs: dict[str, LinkInput] = {}

    def object_kind(self, path: str) -> InputKind:
        kind = self._kinds.get(path)
        if kind is None:
            try:
                kind = object_kind(path, self._producers, self._graph, self._rules)
            except Refused as e:
                kind = e.reason
            self._kinds[path] = kind
        if isinstance(kind, str):
            raise Refused(kind)
        return kind

    def classify(self, path: str) -> LinkInput:
        """PATH as a link input: its kind, and for an archive GN builds its members' kinds, in order."""
        found = self._inputs.get(path)
        if found is None:
            producer = self._producers.get(path)
            if producer is not None and GnTool.of_rule(producer.edge.rule) is GnTool.ALINK:
                members = tuple((m, self.object_kind(m)) for m in producer.edge.inputs)
                found = LinkInput(path, InputKind.OTHER, members)
            else:
                found = LinkInput(path, self.object_kind(path))
            self._inputs[path] = found
        return found


def gn_link(target: GnTarget, graph: GnGraph, producers: Mapping[str, Producer], rules: Mapping[str, Rule]) -> GnLink:
    output = target.outputs[0]
    producer = producers.get(output)
    if producer is None:
        raise Refused(f"no GN edge produces {output}")
    rule = rules[producer.edge.rule]
    file_vars = graph.ninja[producer.file].variables
    argv = command_argv(producer, graph, rules)
    rsp_path = evaluate_rule_binding(rule, "rspfile", producer.edge, file_vars)
    if not rsp_path or f"@{rsp_path}" not in argv:
        raise Refused("GN link command does not read its inputs from an @rspfile")
    edge = producer.edge
    sentinel_edge = Edge(edge.outputs, (), edge.rule, (_IN_SENTINEL,), (), (), edge.bindings, 0, 0)
    content = evaluate_rule_binding(rule, "rspfile_content", sentinel_edge, file_vars)
    try:
        tokens = shlex.split(content.replace(_IN_SENTINEL, " " + _IN_SENTINEL + " "))
    except ValueError as e:
        raise Refused(f"cannot parse the rsp content {content!r}: {e}") from e
    if tokens.count(_IN_SENTINEL) != 1:
        raise Refused(f"rsp content {rule.bindings.get('rspfile_content', '')!r} must name the inputs exactly once")
    at = tokens.index(_IN_SENTINEL)
    prefix, suffix = tuple(tokens[:at]), tuple(tokens[at + 1 :])
    whole = False
    for t in (*argv[: argv.index(f"@{rsp_path}")], *prefix):
        if t in ("-Wl,--whole-archive", "-Wl,-whole-archive"):
            whole = True
        elif t in ("-Wl,--no-whole-archive", "-Wl,-no-whole-archive"):
            whole = False
    if any(t.startswith("-") and "lib" in t and "start-lib" in t for t in (*prefix, *suffix)):
        raise Refused("rsp content already uses --start-lib")
    return GnLink(producer.file, producer.edge, tuple(argv), rsp_path, prefix, suffix, whole)
