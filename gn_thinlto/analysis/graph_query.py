"""Questions about a built graph that need ninja's view including dyndep-discovered inputs.

`ninja -t commands TARGET` (ninja 1.11) does not follow inputs that a dyndep file adds, even once the file
exists; `ninja -t query` does. So backend jobs in a target's dependency tree are counted by walking
`ninja -t query` breadth-first (one ninja call per level).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gn_thinlto import tools
from gn_thinlto.errors import GnThinltoError

BACKEND_RULE = "gn_thinlto_backend"


@dataclass(frozen=True)
class QueryNode:
    path: str
    rule: str  # empty for a source file
    inputs: tuple[str, ...]


def parse_query(text: str) -> list[QueryNode]:
    """Parse `ninja -t query` output (node header, `input: RULE`, indented input lines, `outputs:`)."""
    nodes: list[QueryNode] = []
    path, rule, section = "", "", ""
    inputs: list[str] = []
    for line in text.splitlines():
        if line and not line.startswith(" "):
            if path:
                nodes.append(QueryNode(path, rule, tuple(inputs)))
            path, rule, inputs, section = line.rstrip(":"), "", [], ""
        elif line.startswith("  input: "):
            rule, section = line.split(": ", 1)[1], "in"
        elif line.startswith("  outputs:"):
            section = "out"
        elif line.startswith("    ") and section == "in":
            inputs.append(line.strip().removeprefix("|| ").removeprefix("| "))
    if path:
        nodes.append(QueryNode(path, rule, tuple(inputs)))
    return nodes


def walk(out_dir: Path, targets: Iterable[str]) -> dict[str, QueryNode]:
    """Every node in the dependency trees of TARGETS, as ninja sees them now (dyndep files loaded)."""
    seen: dict[str, QueryNode] = {}
    frontier = sorted(set(targets))
    ninja = tools.find_tool("ninja", "NINJA")
    while frontier:
        text = tools.run_checked([ninja, "-C", str(out_dir), "-t", "query", *frontier])
        nxt: set[str] = set()
        for node in parse_query(text):
            seen[node.path] = node
            nxt.update(i for i in node.inputs if i not in seen)
        frontier = sorted(nxt - set(seen))
    return seen


def backend_outputs(out_dir: Path, target: str) -> list[str]:
    """The native objects of backend edges TARGET depends on (including through dyndep)."""
    return sorted(n.path for n in walk(out_dir, [target]).values() if n.rule == BACKEND_RULE)


def backend_outputs_of(out_dir: Path, targets: Sequence[str]) -> dict[str, list[str]]:
    """backend_outputs of each of TARGETS (spelled as ninja prints them), from one walk of all their trees."""
    nodes = walk(out_dir, targets)
    found = {}
    for target in targets:
        if target not in nodes:
            raise GnThinltoError(f"ninja -t query in {out_dir} does not name {target!r} as given")
        seen: set[str] = set()
        todo = [target]
        while todo:
            if (path := todo.pop()) not in seen:
                seen.add(path)
                todo.extend(nodes[path].inputs)
        found[target] = sorted(p for p in seen if nodes[p].rule == BACKEND_RULE)
    return found
