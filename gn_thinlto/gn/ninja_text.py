"""Reading the ninja files GN writes: a small parser and variable evaluator for GN's subset of ninja syntax.

Pure functions on text. GN emits top-level variables, `rule` blocks, `build` edges with indented bindings,
`subninja`/`include`/`default`/`pool` lines and comments; that is all this module understands.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from gn_thinlto.errors import GnThinltoError

_VAR_RE = re.compile(r"\$(\{[a-zA-Z0-9_.-]+\}|[a-zA-Z0-9_-]+|.)", re.DOTALL)


@dataclass(frozen=True)
class Rule:
    """A `rule NAME` block: its unevaluated bindings (command, rspfile, …)."""

    name: str
    bindings: Mapping[str, str]


@dataclass(frozen=True)
class Edge:
    """One `build` statement with unescaped paths and its unevaluated edge bindings.

    `first_line`/`last_line` (0-based, inclusive) locate the statement and its bindings in the file text.
    """

    outputs: tuple[str, ...]
    implicit_outputs: tuple[str, ...]
    rule: str
    inputs: tuple[str, ...]
    implicit: tuple[str, ...]
    order_only: tuple[str, ...]
    bindings: Mapping[str, str]
    first_line: int
    last_line: int


@dataclass(frozen=True)
class NinjaFile:
    """The parsed content of one ninja file; `variables` are already evaluated (as ninja does)."""

    variables: Mapping[str, str]
    rules: Mapping[str, Rule]
    edges: tuple[Edge, ...]
    subninjas: tuple[str, ...] = field(default=())

    def edge_for_output(self, path: str) -> Edge | None:
        return next((e for e in self.edges if path in e.outputs or path in e.implicit_outputs), None)


def _logical_lines(text: str) -> list[tuple[int, int, str]]:
    """Join `$`-continued lines; yield (first_line, last_line, text) without comments-only lines."""
    out: list[tuple[int, int, str]] = []
    raw = text.split("\n")
    i = 0
    while i < len(raw):
        start, line = i, raw[i]
        while line.endswith("$") and not line.endswith("$$") and i + 1 < len(raw):
            i += 1
            line = line[:-1] + raw[i].lstrip(" ")
        out.append((start, i, line))
        i += 1
    return out


def _split_paths(text: str) -> list[str]:
    """Split an escaped path list on unescaped spaces and unescape `$ `, `$:`, `$$`."""
    if "$" not in text:  # nothing escaped (GN's usual paths): every space separates
        return [p for p in text.split(" ") if p]
    paths: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "$" and i + 1 < len(text):
            cur.append(text[i + 1])
            i += 2
            continue
        if c == " ":
            if cur:
                paths.append("".join(cur))
                cur = []
        else:
            cur.append(c)
        i += 1
    if cur:
        paths.append("".join(cur))
    return paths


def _find_unescaped(text: str, token: str) -> int:
    first = text.find(token)
    if first < 0 or "$" not in text[:first]:  # nothing escaped before it (GN's usual paths)
        return first
    i = 0
    while i < len(text):
        if text[i] == "$":
            i += 2
            continue
        if text.startswith(token, i):
            return i
        i += 1
    return -1


def _parse_build(line: str, first: int) -> tuple[tuple[str, ...], tuple[str, ...], str, str]:
    body = line[len("build "):]
    colon = _find_unescaped(body, ":")
    if colon < 0:
        raise GnThinltoError(f"ninja line {first + 1}: build statement without ':'")
    outs_text, rest = body[:colon], body[colon + 1:].strip()
    outs, _, implicit_outs = outs_text.partition(" | ")
    rule, _, ins = rest.partition(" ")
    return tuple(_split_paths(outs)), tuple(_split_paths(implicit_outs)), rule, ins


def _split_inputs(ins: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    ins = ins.split(" |@ ")[0]
    ins, _, order = ins.partition(" || ")
    if ins.startswith("|| "):
        ins, order = "", ins[3:]
    explicit, _, implicit = ins.partition(" | ")
    if explicit.startswith("| "):
        explicit, implicit = "", explicit[2:]
    return tuple(_split_paths(explicit)), tuple(_split_paths(implicit)), tuple(_split_paths(order))


def parse(text: str, parent: Mapping[str, str] | None = None) -> NinjaFile:
    """Parse GN-generated ninja text; `parent` holds variables visible from an enclosing file."""
    variables: dict[str, str] = dict(parent or {})
    rules: dict[str, Rule] = {}
    edges: list[Edge] = []
    subninjas: list[str] = []
    lines = _logical_lines(text)
    i = 0
    while i < len(lines):
        first, last, line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        block: dict[str, str] = {}
        while i < len(lines) and lines[i][2].startswith(" ") and lines[i][2].strip():
            key, _, value = lines[i][2].strip().partition("=")
            block[key.strip()] = value.lstrip(" ")
            last = lines[i][1]
            i += 1
        if line.startswith("rule "):
            name = line[5:].strip()
            rules[name] = Rule(name, block)
        elif line.startswith("build "):
            outs, implicit_outs, rule, ins = _parse_build(line, first)
            explicit, implicit, order = _split_inputs(ins)
            bound = {k: evaluate(v, variables) for k, v in block.items()}
            edges.append(Edge(outs, implicit_outs, rule, explicit, implicit, order, bound, first, last))
        elif line.startswith("subninja "):
            subninjas.extend(_split_paths(line[9:]))
        elif line.startswith(("include ", "default ", "pool ")):
            continue
        elif "=" in line:
            key, _, value = line.partition("=")
            variables[key.strip()] = evaluate(value.lstrip(" "), variables)
        else:
            raise GnThinltoError(f"ninja line {first + 1}: cannot parse {line[:60]!r}")
    return NinjaFile(variables, rules, tuple(edges), tuple(subninjas))


def evaluate(value: str, *scopes: Mapping[str, str]) -> str:
    """Expand `$var`, `${var}` and the `$$`, `$ `, `$:` escapes, looking names up in SCOPES in order."""

    def lookup(m: re.Match[str]) -> str:
        token = m.group(1)
        if token.startswith("{"):
            name = token[1:-1]
        elif re.fullmatch(r"[a-zA-Z0-9_-]+", token):
            name = token
        else:
            return token if token in "$ :" else "$" + token
        for scope in scopes:
            if name in scope:
                return scope[name]
        return ""

    return _VAR_RE.sub(lookup, value)


def evaluate_rule_binding(rule: Rule, key: str, edge: Edge, file_vars: Mapping[str, str]) -> str:
    """A rule binding as ninja evaluates it for EDGE: edge bindings, then $in/$out, then file scope."""
    special = {
        "in": " ".join(edge.inputs),
        "in_newline": "\n".join(edge.inputs),
        "out": " ".join(edge.outputs),
    }
    raw = rule.bindings.get(key, "")
    edge_scope = edge.bindings
    # Rule bindings may refer to other rule bindings (e.g. $rspfile inside command): those RAW names, evaluated.
    named = {m.group(1).strip("{}") for m in _VAR_RE.finditer(raw)}
    rule_scope = {k: evaluate(v, edge_scope, special, file_vars) for k, v in rule.bindings.items()
                  if k != key and k in named}
    return evaluate(raw, edge_scope, special, rule_scope, file_vars)


class LazyNinjaFiles(Mapping[str, NinjaFile]):
    """GN's ninja files by path, each parsed on first access (with its parent's variables)."""

    def __init__(self, texts: Mapping[str, str], parents: Mapping[str, Mapping[str, str]],
                 parsed: Mapping[str, NinjaFile] | None = None) -> None:
        self._texts, self._parents = texts, parents
        self._parsed: dict[str, NinjaFile] = dict(parsed or {})

    def __getitem__(self, name: str) -> NinjaFile:
        found = self._parsed.get(name)
        if found is None:
            found = self._parsed[name] = parse(self._texts[name], self._parents.get(name))
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._texts

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)
