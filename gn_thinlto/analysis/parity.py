"""Do two builds' binaries hold the same code (`gn-thinlto parity OUT_INPROC OUT_GRAPH`)? For each linked ELF
binary present in both build directories: the same defined functions with the same sizes, the same allocated
sections' sizes, the same dynamic symbols. One line per binary; exit 0 when every binary is at parity.

The tolerance defaults to 0: gn-thinlto's backends reproduce lld's in-process code generation (the same
levels, section and relocation options), which gives byte-identical objects, so any size difference is a
routing bug to find, not noise. `--tolerance PCT` accepts each function and section within PCT percent of its
in-process size (for comparing against a toolchain whose backends are known to differ slightly).

Two section differences are lld's, not the backends', and are accounted for exactly: .relro_padding (NOBITS
padding to a page boundary, which follows the layout) is not compared; and lld parses the objects of its
in-process LTO ignoring their COMDAT groups (lld/ELF/Driver.cpp, compileBitcodeFiles: the groups were resolved on
the bitcode), so COMDAT data that code generation creates, the `DW.ref.__gxx_personality_v0` pointer of every
object with exception tables, is kept once per object in-process and once per binary from native objects
(the symbol names only the first): when both binaries define one and .data is 8*k bytes larger in-process,
.rela.dyn 24*k bytes larger or equal (a pointer and its dynamic relocation per copy, ELF64), both count as equal.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from gn_thinlto.analysis.elf_summary import ElfError, ElfSummary, linked_type, summarize
from gn_thinlto.errors import GnThinltoError

WORST = 10
# Build-directory trees that hold objects, generated sources and gn-thinlto's own files, not linked binaries.
_SKIP_DIRS = frozenset({"obj", "gen", "gn-thinlto", "gn-edited"})
_LAYOUT_PADDING = frozenset({".relro_padding"})
_POINTER, _RELA = 8, 24  # bytes per DW.ref copy: the pointer in .data, its Elf64_Rela in .rela.dyn


class Verdict(enum.Enum):
    EQUAL = "equal"
    WITHIN = "within tolerance"
    DIFFERENT = "differing"


@dataclass(frozen=True)
class SizeDiff:
    """One function (all of a name's local copies together) or section: its size in each build (None: absent)."""

    name: str
    inproc: int | None
    graph: int | None

    @property
    def delta(self) -> int:
        return abs((self.inproc or 0) - (self.graph or 0))

    def within(self, tolerance: float) -> bool:
        if self.inproc is None or self.graph is None:
            return False
        return self.delta <= tolerance / 100 * max(self.inproc, self.graph)

    def __str__(self) -> str:
        def size(n: int | None) -> str:
            return "absent" if n is None else f"{n:,}"

        return f"{self.name} {size(self.inproc)}→{size(self.graph)}"


@dataclass(frozen=True)
class Comparison:
    """How one kind of content (functions, sections) of a binary compares: COUNT compared, DIFFS the unequal."""

    count: int
    inproc_bytes: int
    graph_bytes: int
    diffs: tuple[SizeDiff, ...]
    tolerance: float

    @property
    def verdict(self) -> Verdict:
        if not self.diffs:
            return Verdict.EQUAL
        return Verdict.WITHIN if all(d.within(self.tolerance) for d in self.diffs) else Verdict.DIFFERENT

    def describe(self, what: str) -> str:
        if self.verdict is Verdict.EQUAL:
            return f"{self.count:,} {what} equal ({self.inproc_bytes:,} bytes)"
        worst = sorted(self.diffs, key=lambda d: (-d.delta, d.name))[:WORST]
        return (f"{len(self.diffs):,} of {self.count:,} {what} {self.verdict.value} "
                f"({self.inproc_bytes:,}→{self.graph_bytes:,} bytes; worst: {', '.join(map(str, worst))})")


def compare_sizes(inproc: Mapping[str, int], graph: Mapping[str, int], tolerance: float) -> Comparison:
    names = sorted(set(inproc) | set(graph))
    diffs = tuple(SizeDiff(n, inproc.get(n), graph.get(n)) for n in names if inproc.get(n) != graph.get(n))
    return Comparison(len(names), sum(inproc.values()), sum(graph.values()), diffs, tolerance)


def _by_name(summary: ElfSummary) -> dict[str, int]:
    """Function sizes by name; local functions of several translation units sharing a name are summed."""
    out: dict[str, int] = {}
    for (name, size), n in summary.functions.items():
        out[name] = out.get(name, 0) + size * n
    return out


@dataclass(frozen=True)
class BinaryParity:
    name: str
    functions: Comparison
    sections: Comparison
    dynamic_only_inproc: tuple[str, ...]
    dynamic_only_graph: tuple[str, ...]
    stripped: bool
    extra_dw_refs: int = 0  # DW.ref copies lld's in-process link keeps beyond the graph build's

    @property
    def at_parity(self) -> bool:
        return (self.functions.verdict is not Verdict.DIFFERENT and self.sections.verdict is not Verdict.DIFFERENT
                and not self.dynamic_only_inproc and not self.dynamic_only_graph)

    def line(self) -> str:
        parts = ["no symbol table (stripped): functions not compared" if self.stripped
                 else self.functions.describe("functions"), self.sections.describe("sections")]
        if self.dynamic_only_inproc or self.dynamic_only_graph:
            only = [*(f"-{s}" for s in self.dynamic_only_inproc[:WORST]),
                    *(f"+{s}" for s in self.dynamic_only_graph[:WORST])]
            parts.append(f"dynamic symbols differ: {', '.join(only)}")
        else:
            parts.append("dynamic symbols equal")
        if self.extra_dw_refs:
            parts.append(f"in-process keeps {self.extra_dw_refs} more DW.ref COMDAT copies (lld, accounted for)")
        return f"{self.name}: {'at parity' if self.at_parity else 'NOT at parity'}: {'; '.join(parts)}"


def _sections(inproc: ElfSummary, graph: ElfSummary) -> tuple[dict[str, int], dict[str, int], int]:
    """Both builds' section sizes to compare, and how many more DW.ref copies the in-process binary holds: layout
    padding left out, and the DW.ref copies lld keeps in-process counted in the graph build's .data and
    .rela.dyn when they account for the sizes exactly."""
    ours = {n: s for n, s in inproc.sections.items() if n not in _LAYOUT_PADDING}
    theirs = {n: s for n, s in graph.sections.items() if n not in _LAYOUT_PADDING}
    data = ours.get(".data", 0) - theirs.get(".data", 0)
    if not (inproc.dw_ref and graph.dw_ref) or data <= 0 or data % _POINTER:
        return ours, theirs, 0
    copies = data // _POINTER
    rela = ours.get(".rela.dyn", 0) - theirs.get(".rela.dyn", 0)
    if rela not in (0, _RELA * copies):
        return ours, theirs, 0
    for section in (".data", ".rela.dyn"):
        if section in theirs:
            theirs[section] = ours[section]
    return ours, theirs, copies


def compare(name: str, inproc: ElfSummary, graph: ElfSummary, tolerance: float = 0.0) -> BinaryParity:
    stripped = inproc.stripped or graph.stripped
    functions = compare_sizes({} if stripped else _by_name(inproc), {} if stripped else _by_name(graph), tolerance)
    ours, theirs, extra = _sections(inproc, graph)
    return BinaryParity(name, functions, compare_sizes(ours, theirs, tolerance),
                        tuple(sorted(inproc.dynamic - graph.dynamic)), tuple(sorted(graph.dynamic - inproc.dynamic)),
                        stripped, extra)


def linked_binaries(out_dir: Path) -> Iterator[str]:
    """Paths (relative to OUT_DIR, sorted) of the linked ELF files in a build directory, objects' trees skipped."""
    found = []
    for parent, dirs, files in os.walk(out_dir):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for f in files:
            path = Path(parent) / f
            if not path.is_symlink() and linked_type(path) is not None:
                found.append(str(path.relative_to(out_dir)))
    yield from sorted(found)


def compare_builds(inproc_dir: Path, graph_dir: Path, tolerance: float = 0.0) -> list[BinaryParity]:
    common = sorted(set(linked_binaries(inproc_dir)) & set(linked_binaries(graph_dir)))
    if not common:
        raise GnThinltoError(f"no linked binary is in both {inproc_dir} and {graph_dir}")
    out = []
    for rel in common:
        try:
            out.append(compare(rel, summarize(inproc_dir / rel), summarize(graph_dir / rel), tolerance))
        except ElfError as e:
            raise GnThinltoError(f"{rel}: {e}") from e
    return out
