"""GN's link edges, evaluated: the link argv, its response-file template, and every input classified as
ThinLTO bitcode, native object, archive (with members) or other. Pure functions over parsed GN data."""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from gn_thinlto.gn.ninja_text import Edge, NinjaFile, Rule, evaluate_rule_binding
from gn_thinlto.gn.project import GnProject, GnTarget, GnTool
from gn_thinlto.plan import linkline
from gn_thinlto.plan.config import LinkWrapper
from gn_thinlto.plan.linkline import LtoMode, Refused
from gn_thinlto.plan.model import InputKind

_V = TypeVar("_V")
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
    """GN's link edge for one target, evaluated and taken apart.

    GN's command is WRAPPER + INNER + TAIL: WRAPPER runs the inner command (a link wrapper script with its
    options and `--`, a launcher such as ccache or `env VAR=…`; often empty), INNER is the clang link, and
    TAIL is shell after it (`&& strip …`). INNER is BEFORE + the link's inputs + AFTER, with GN's response
    file expanded in place (it may hold flags around `{{inputs}}`, or not be used at all)."""

    file: str
    edge: Edge
    wrapper: tuple[str, ...]
    before: tuple[str, ...]
    after: tuple[str, ...]
    tail: tuple[str, ...]
    whole_archive: bool
    restat: bool = False
    pool: str = ""

    def inner(self, inputs: Sequence[str]) -> list[str]:
        """The inner link command with INPUTS in the place of GN's inputs."""
        return [*self.before, *inputs, *self.after]

    def command(self, inputs: Sequence[str]) -> list[str]:
        """GN's whole command (wrapper and tail included) with INPUTS in the place of GN's inputs."""
        return [*self.wrapper, *self.inner(inputs), *self.tail]


@dataclass(frozen=True)
class LinkInput:
    path: str
    kind: InputKind
    members: tuple[tuple[str, InputKind], ...] = ()  # set for archives GN builds: their objects, in order
    # Derived once per input (the classifier shares one LinkInput among all links naming the path): a link
    # of 30,000 objects is mostly concatenations of these.
    objects: tuple[str, ...] = field(init=False, compare=False, repr=False)  # the archive's members, or the path
    bitcode: tuple[str, ...] = field(init=False, compare=False, repr=False)  # the ThinLTO bitcode among objects
    other_members: tuple[str, ...] = field(init=False, compare=False, repr=False)  # an archive's non-bitcode

    def __post_init__(self) -> None:
        if self.members:
            objects = tuple(m for m, _ in self.members)
            bitcode = tuple(m for m, k in self.members if k is InputKind.BITCODE)
        else:
            objects = (self.path,)
            bitcode = objects if self.kind is InputKind.BITCODE else ()
        object.__setattr__(self, "objects", objects)
        object.__setattr__(self, "bitcode", bitcode)
        object.__setattr__(self, "other_members", tuple(m for m, k in self.members if k is not InputKind.BITCODE))

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


class _LazyIndex:
    """The outputs and rules of GN's ninja files, indexed a file at a time as lookups need them: FIRST (e.g.
    the toolchain files and the files a link read last time) in the given order, then, on the first miss, all
    the others in sorted order. A regeneration that re-plans one link parses the few files that link reads
    instead of thousands. GN never writes two edges for one output, so a hit in any file is the answer."""

    def __init__(self, graph: GnGraph, first: Sequence[str]) -> None:
        self._graph = graph
        self.producers: dict[str, Producer] = {}
        self.rules: dict[str, Rule] = {}
        self._loaded: set[str] = set()
        early = [n for n in dict.fromkeys(first) if n in graph.ninja]
        rest = sorted(set(graph.ninja).difference(early))
        self._pending = rest[::-1] + early[::-1]  # popped from the end

    def load(self, name: str) -> None:
        if name in self._loaded or name not in self._graph.ninja:
            return
        self._loaded.add(name)
        parsed = self._graph.ninja[name]
        for edge in parsed.edges:
            for o in edge.outputs:
                self.producers.setdefault(o, Producer(name, edge))
        for rule_name, rule in parsed.rules.items():
            self.rules.setdefault(rule_name, rule)

    def load_next(self) -> bool:
        """Index one more file; False when every file is indexed."""
        while self._pending:
            name = self._pending.pop()
            if name not in self._loaded:
                self.load(name)
                return True
        return False


class LazyView(Mapping[str, _V]):
    """One table of a _LazyIndex (its producers or its rules) as a mapping: a miss indexes more files."""

    def __init__(self, index: _LazyIndex, table: dict[str, _V]) -> None:
        self._index, self._table = index, table

    def __getitem__(self, key: str) -> _V:
        while key not in self._table:
            if not self._index.load_next():
                raise KeyError(key)
        return self._table[key]

    def __iter__(self) -> Iterator[str]:
        while self._index.load_next():
            pass
        return iter(self._table)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def lazy_index(graph: GnGraph, first: Sequence[str] = ()
               ) -> tuple[LazyView[Producer], LazyView[Rule], Callable[[str], None]]:
    """Lazy producers_of and rules_of over GRAPH, looking in FIRST first; also a function that indexes one
    more file early (the files a link read last time, before it is planned again)."""
    index = _LazyIndex(graph, first)
    return LazyView(index, index.producers), LazyView(index, index.rules), index.load


_SHELL_QUOTING = re.compile(r"[\\'\"]")
_SHELL_SPACE = re.compile(r"[ \t\r\n]+")


# A word of a shell command without single quotes: escaped characters, double-quoted strings, other characters.
_WORD = re.compile(r'(?:\\.|"(?:[^"\\]|\\.)*"|[^ \t\r\n"\\])+', re.DOTALL)
_WORD_PART = re.compile(r'\\(.)|"((?:[^"\\]|\\.)*)"|([^"\\]+)', re.DOTALL)
_QUOTED_ESCAPE = re.compile(r'\\(["\\])')  # inside double quotes shlex unescapes only " and \


# The whole text as such words (possessive: no backtracking, so a long command with an unbalanced quote fails
# in linear time and goes to shlex, which reports it).
_WORDS = re.compile(r'[ \t\r\n]*+(?:(?:\\.|"(?:[^"\\]|\\.)*+"|[^ \t\r\n"\\])++[ \t\r\n]*+)*+\Z', re.DOTALL)


def _unquote(word: str) -> str:
    if '"' not in word and "\\" not in word:
        return word
    out = []
    for escaped, quoted, plain in _WORD_PART.findall(word):
        if escaped:
            out.append(escaped)
        elif plain:
            out.append(plain)
        else:  # a double-quoted string (maybe empty)
            out.append(_QUOTED_ESCAPE.sub(r"\1", quoted))
    return "".join(out)


def shell_split(text: str) -> list[str]:
    """shlex.split(TEXT). GN's commands rarely quote, and then splitting on shlex's whitespace is the same; with
    double quotes and backslashes but no single quote (GN's toolchains write "$cxx" and \\$ORIGIN), a regular
    expression splits the words and undoes their quoting as shlex does; anything else goes to shlex."""
    if not _SHELL_QUOTING.search(text):
        return [t for t in _SHELL_SPACE.split(text) if t]
    if "'" not in text and _WORDS.match(text):
        return [_unquote(w) for w in _WORD.findall(text)]
    return shlex.split(text)


def command_argv(producer: Producer, graph: GnGraph, rules: Mapping[str, Rule], key: str = "command") -> list[str]:
    rule = rules.get(producer.edge.rule)
    if rule is None:
        raise Refused(f"GN rule {producer.edge.rule!r} not found")
    text = evaluate_rule_binding(rule, key, producer.edge, graph.ninja[producer.file].variables)
    try:
        return shell_split(text)
    except ValueError as e:
        raise Refused(f"cannot split the {producer.edge.rule} command of {producer.edge.outputs[0]}: {e}") from e


_SPECIAL = frozenset({"in", "in_newline", "out"})


def _command_names(rule: Rule) -> tuple[str, ...]:
    """Every variable RULE's command refers to, through its other bindings (e.g. $depfile -> $out), sorted."""
    names: set[str] = set()
    todo = ["command"]
    while todo:
        for m in _VAR_NAME.finditer(rule.bindings.get(todo.pop(), "")):
            name = m.group(1) or m.group(2)
            if name not in names:
                names.add(name)
                if name in rule.bindings and name != "command":
                    todo.append(name)
    return tuple(sorted(names))


_VAR_NAME = re.compile(r"\$(?:\{([a-zA-Z0-9_.-]+)\}|([a-zA-Z0-9_-]+))")


_NAMES_OF: dict[int, tuple[Rule, tuple[str, ...]]] = {}  # id(rule) -> (rule, its command's names)


def _command_names_of(rule: Rule) -> tuple[str, ...]:
    """_command_names, once per Rule object (a rule is unhashable: its bindings are a mapping)."""
    hit = _NAMES_OF.get(id(rule))
    if hit is None or hit[0] is not rule:
        hit = _NAMES_OF[id(rule)] = (rule, _command_names(rule))
    return hit[1]


def compile_mode_key(producer: Producer, rule: Rule) -> tuple[object, ...] | None:
    """What PRODUCER's evaluated command depends on apart from its $in/$out paths: its file (whose variables
    every edge of the file shares), its rule, and the edge's own bindings the command refers to. Compiles of
    one target share it, so one evaluation and split serves all their objects. None when an input or output
    path looks like an option (then that path could change the command's options)."""
    edge = producer.edge
    if any(p.startswith("-") for p in (*edge.inputs, *edge.outputs)):
        return None
    names = _command_names_of(rule)
    return (producer.file, edge.rule, tuple((n, edge.bindings.get(n)) for n in names if n not in _SPECIAL))


def object_kind(path: str, producers: Mapping[str, Producer], graph: GnGraph, rules: Mapping[str, Rule],
                modes: dict[tuple[object, ...], LtoMode | str] | None = None) -> InputKind:
    """PATH's kind as a link input, from the command of the edge producing it. MODES, when given, keeps the LTO
    mode of each compile_mode_key for the next object compiled alike (a str: why such a ThinLTO object is
    refused)."""
    producer = producers.get(path)
    if producer is None:
        if path.endswith((".o", ".obj")):
            raise Refused(f"prebuilt object {path} has no GN edge; cannot tell whether it is bitcode")
        return InputKind.OTHER
    if GnTool.of_rule(producer.edge.rule) is not None:  # an archive or a linked binary
        return InputKind.OTHER
    rule = rules.get(producer.edge.rule)
    key = compile_mode_key(producer, rule) if modes is not None and rule is not None else None
    mode = modes.get(key) if modes is not None and key is not None else None
    if mode is None:
        argv = command_argv(producer, graph, rules)
        mode = linkline.lto_mode(argv)
        if mode is LtoMode.THIN:
            mode = linkline.compile_refusal(argv) or mode
        if modes is not None and key is not None:
            modes[key] = mode
    if isinstance(mode, str):
        raise Refused(f"{path}: {mode}")
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
        self._modes: dict[tuple[object, ...], LtoMode | str] = {}

    def object_kind(self, path: str) -> InputKind:
        kind = self._kinds.get(path)
        if kind is None:
            try:
                kind = object_kind(path, self._producers, self._graph, self._rules, self._modes)
            except Refused as e:
                kind = e.reason
            self._kinds[path] = kind
        if isinstance(kind, str):
            raise Refused(kind)
        return kind

    def classify_all(self, paths: Sequence[str]) -> tuple[LinkInput, ...]:
        """classify() of each of PATHS (known paths without a call per path)."""
        known = self._inputs
        return tuple(known.get(p) or self.classify(p) for p in paths)

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


# A clang driver as a command token: clang, clang++, clang-19, x86_64-linux-gnu-clang++, /usr/bin/clang++-22.
_DRIVER = re.compile(r"^(?:.*/)?(?:[\w.+]+-)*clang(?:\+\+)?(?:-\d+(?:\.\d+)*)?$")
_SHELL_OPERATOR = re.compile(r"^(?:&&|\|\||;|\||&|\d*>>?.*|<.*)$")


def is_shell_operator(token: str) -> bool:
    """Whether TOKEN of a shell-split command is shell syntax (`&&`, `;`, `2>/dev/null`, …) rather than an argument."""
    return bool(_SHELL_OPERATOR.match(token))


def _driver_index(tokens: Sequence[str], wrappers: Sequence[LinkWrapper]) -> int:
    """Where the inner link command starts: after a configured wrapper's marker, else after a `--` that
    precedes a clang driver (`python3 wrapper.py … -- clang++ …`), else at the first clang driver
    (`ccache clang++ …`, `env LC_ALL=C clang++ …`)."""
    for w in wrappers:
        hit = next((i for i, t in enumerate(tokens) if fnmatch.fnmatchcase(t, w.match)), None)
        if hit is not None:
            if w.inner_after not in tokens[hit + 1:]:
                raise Refused(f"link command matches link_wrappers {w.match!r} but has no {w.inner_after!r} after it")
            return tokens.index(w.inner_after, hit + 1) + 1
    for i, t in enumerate(tokens):
        if t == "--" and i + 1 < len(tokens) and _DRIVER.match(tokens[i + 1]):
            return i + 1
    for i, t in enumerate(tokens):
        if _DRIVER.match(t) or t.rsplit("/", 1)[-1] == "ld.lld":
            return i
        if is_shell_operator(t) and t not in ("&&", ";"):
            break
    raise Refused(f"cannot find the clang link command inside {' '.join(tokens[:3])} …; if "
                  f"{tokens[0].rsplit('/', 1)[-1]!r} wraps one, name it in gn_thinlto.yaml link_wrappers")


def inner_command(tokens: Sequence[str], wrappers: Sequence[LinkWrapper] = ()) -> tuple[int, int]:
    """Where the clang link command sits in a shell-split link command: TOKENS[start:end]. Before it, a
    wrapper or launcher; after it, shell (`&& strip …`). Raises Refused when there is no clang command."""
    start = _driver_index(tokens, wrappers)
    end = next((i for i in range(start, len(tokens)) if is_shell_operator(tokens[i])), len(tokens))
    return start, end


def _split_with_sentinel(text: str, what: str, output: str) -> list[str]:
    try:
        return shell_split(text.replace(_IN_SENTINEL, f" {_IN_SENTINEL} "))
    except ValueError as e:
        raise Refused(f"cannot split the {what} of {output}: {e}") from e


def _whole_archive_at(tokens: Sequence[str]) -> bool:
    whole = False
    for t in tokens:
        for part in t[4:].split(",") if t.startswith("-Wl,") else ():
            if part in ("--whole-archive", "-whole-archive"):
                whole = True
            elif part in ("--no-whole-archive", "-no-whole-archive"):
                whole = False
    return whole


def _check_wrapper_leaves_inner_alone(inner: Sequence[str]) -> None:
    """The thin link runs the inner command without its wrapper, so the wrapper must not change what that
    command links. Chromium's wrapper_utils does for Rust: it drops -LinkWrapper,… options and puts every
    .rlib in --whole-archive."""
    changed = next((t for t in inner if t.startswith("-LinkWrapper,") or t.endswith(".rlib")), None)
    if changed is not None:
        raise Refused(f"the link wrapper rewrites its link command ({changed!r}); the thin link cannot run it alone")


def gn_link(target: GnTarget, graph: GnGraph, producers: Mapping[str, Producer], rules: Mapping[str, Rule],
            wrappers: Sequence[LinkWrapper] = ()) -> GnLink:
    """TARGET's link edge taken apart into wrapper, inner command and tail, its inputs located in either
    the command or its response file; raises Refused when that cannot be done with certainty."""
    output = target.outputs[0]
    producer = producers.get(output)
    if producer is None:
        raise Refused(f"no GN edge produces {output}")
    edge, rule = producer.edge, rules.get(producer.edge.rule)
    if rule is None:
        raise Refused(f"GN rule {edge.rule!r} not found")
    file_vars = graph.ninja[producer.file].variables
    sentinel_edge = Edge(edge.outputs, (), edge.rule, (_IN_SENTINEL,), (), (), edge.bindings, 0, 0)
    tokens = _split_with_sentinel(evaluate_rule_binding(rule, "command", sentinel_edge, file_vars), "command", output)
    rsp_path = evaluate_rule_binding(rule, "rspfile", edge, file_vars)
    if rsp_path and f"@{rsp_path}" in tokens:
        content = evaluate_rule_binding(rule, "rspfile_content", sentinel_edge, file_vars)
        rsp_tokens = _split_with_sentinel(content, f"response file {rsp_path}", output)
        at = tokens.index(f"@{rsp_path}")
        tokens[at : at + 1] = rsp_tokens
    if tokens.count(_IN_SENTINEL) != 1:
        where = "its command and response file name" if rsp_path else "its command names"
        raise Refused(f"{where} the inputs {tokens.count(_IN_SENTINEL)} times (expected once)")
    start, end = inner_command(tokens, wrappers)
    at = tokens.index(_IN_SENTINEL)
    if not start <= at < end:
        raise Refused("the link's inputs are not arguments of its clang link command")
    before, after = tuple(tokens[start:at]), tuple(tokens[at + 1 : end])
    if any(t in ("-Wl,--start-lib", "--start-lib") for t in (*before, *after)):
        raise Refused("link command already uses --start-lib")
    if start:
        _check_wrapper_leaves_inner_alone(tokens[start:end])
    restat = (edge.bindings.get("restat") or rule.bindings.get("restat", "")).strip() not in ("", "0", "false")
    pool = evaluate_rule_binding(rule, "pool", edge, file_vars) if "pool" in rule.bindings else ""
    pool = edge.bindings.get("pool", pool)
    return GnLink(producer.file, edge, tuple(tokens[:start]), before, after, tuple(tokens[end:]),
                  _whole_archive_at(before), restat, pool)
