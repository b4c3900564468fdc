"""The regular-LTO module in partitions: how the thin-link step runs lld, and what it leaves, for a link with
partition edges.

CFI and whole-program devirtualization put part of every object (its split LTO unit) into the link's
regular-LTO module, which lld optimizes and compiles in one thread inside the thin link. For a link with
partition edges the step first decides how many partitions the module gets (N):
- `fixed` (the link's --lto-partitions=N, or the config's number): N;
- `auto`: one per AUTO_PARTITION_BYTES of the bitcode the inputs give the regular-LTO module (split LTO units'
  second modules and whole regular-LTO modules, thinlto_base.bitcode_blocks), at most the edges planned.
With N < 2 lld compiles the module itself, as without partition edges (lld splits only for N > 1, so this is
in-process lld's code). With N ≥ 2 lld runs with --lto-emit-llvm: it optimizes the module as in-process and
writes it to its -o as bitcode instead of compiling it. The step splits it as lld's --lto-partitions=N does
(llvm-split calls the same llvm::SplitModule with the same arguments), one bitcode file per partition edge; each
edge compiles its file like a backend, code generation only, behind the backend cache and remote execution.
Checked with clang/lld 19: every partition object is byte-identical to lld's own with --lto-partitions=N
(docs/design/partitions.md).

Whole-program devirtualization's branch funnels (functions calling llvm.icall.branch.funnel) need one more
step: LLVM's splitter places a funnel by its name's hash, apart from the vtables it jumps through, and code
generation of that partition aborts ("all llvm.icall.branch.funnel operands must refer to the same
GlobalValue"; in-process lld 19 and 22 abort alike, so no in-process counterpart exists). The step moves each
funnel into the partition that defines its vtables (llvm-extract, llvm-link). When that cannot be done (vtables
in two partitions, module inline asm moving along), the module is one partition, compiled by the first edge.

Edges beyond N get an empty bitcode file and write an empty object (steps.backend), which the final link never
names. Standard library only (the thin-link step runs `python -S`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from gn_thinlto.errors import GnThinltoError
from gn_thinlto.steps.thinlink_paths import AUTO_PARTITION_BYTES, partition_paths
from thinlto_base.bitcode_blocks import regular_lto_bytes
from thinlto_base.fsutil import read_bytes, replace_if_changed, write_if_changed

BRANCH_FUNNEL = b"llvm.icall.branch.funnel"  # the intrinsic's name, in the module's string table when declared
RECORD = "partitions.json"  # in the partition directory: what the last thin link chose, and why
EMIT_MODULE = "-Wl,--lto-emit-llvm"


def llvm_tool(link_driver: str, name: str) -> str:
    """The LLVM tool NAME of the link driver's own LLVM (its real directory: /usr/bin/clang++-19 is a link to
    /usr/lib/llvm-19/bin/clang++, where llvm-split is too); GnThinltoError when there is none."""
    found = shutil.which(link_driver)
    if found:
        tool = os.path.join(os.path.dirname(os.path.realpath(found)), name)
        if os.access(tool, os.X_OK):
            return tool
    raise GnThinltoError(f"partition edges need {name} beside the link driver {link_driver} (its LLVM's bin "
                         "directory); install it, or set lto_partitions: off in gn_thinlto.yaml")


def auto_count(regular_bytes: int, planned: int) -> int:
    """`auto`'s number of partitions for REGULAR_BYTES of split-LTO-unit input and PLANNED edges."""
    return min(planned, max(1, -(-regular_bytes // AUTO_PARTITION_BYTES)))


def count(m: Mapping[str, Any]) -> tuple[int, str]:
    """(N, why) for manifest M's link, decided before lld runs (see the module's doc)."""
    planned = m.get("partitions", 0)
    if not planned:
        return 0, "no partition edges"
    if m["partition_mode"] == "fixed":
        return planned, f"fixed: {planned}"
    regular = sum(regular_lto_bytes(b) for b in m["bitcode"] if os.path.isfile(b))
    n = auto_count(regular, planned)
    return n, (f"auto: {regular} bytes of regular-LTO input bitcode, one partition per "
               f"{AUTO_PARTITION_BYTES >> 20} MiB, at most {planned}")


def split(m: Mapping[str, Any], module: str, n: int, why: str) -> list[str]:
    """Leave manifest M's partition bitcode files in place (only changed ones rewritten) for N (≥ 2) partitions
    of MODULE, the bitcode lld wrote with --lto-emit-llvm; the objects the final link takes, partition 0 first
    (lld's order), maybe none: the final link leaves an empty module's objects out."""
    data = read_bytes(module) if os.path.isfile(module) else b""
    if not data or not _defined_symbols(m, module):
        return leave(m, [], 0, "the regular-LTO module is empty", len(data))
    prefix = os.path.join(m["stage_dir"], "part")
    _tool(m, "llvm-split", "-j", str(n), "-o", prefix, module)
    staged = [f"{prefix}{k}" for k in range(n)]
    if BRANCH_FUNNEL in data:
        unplaced = place_funnels(m, staged)
        if unplaced:
            return leave(m, [module], 1, f"{why}; one partition: {unplaced}", len(data))
        why += "; branch funnels placed with their vtables"
    return leave(m, staged, n, why, len(data))


def _tool(m: Mapping[str, Any], name: str, *args: str) -> str:
    """Run the link's LLVM tool NAME with ARGS; its standard output. GnThinltoError naming the link on failure."""
    tool = llvm_tool(m["argv"][0], name)
    proc = subprocess.run([tool, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise GnThinltoError(f"thin link of {m['target']}: {name} exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def _defined_symbols(m: Mapping[str, Any], bitcode: str) -> list[str]:
    """The symbols the bitcode file defines (llvm-nm)."""
    return _tool(m, "llvm-nm", "--defined-only", "--format=just-symbols", bitcode).split()


_FUNNEL_CALL = re.compile(r"@llvm\.icall\.branch\.funnel\((.*)\)")
_DEFINE = re.compile(r"^define [^@]*@(\"(?:[^\"\\]|\\.)*\"|[-\w$.]+)\(")
_GLOBAL = re.compile(r"@(\"(?:[^\"\\]|\\.)*\"|[-\w$.]+)")


def _name(token: str) -> str:
    """An IR global name as the symbol table spells it (a quoted name's \\XX escapes decoded)."""
    if not token.startswith('"'):
        return token
    return re.sub(r"\\([0-9A-Fa-f]{2})", lambda x: chr(int(x.group(1), 16)), token[1:-1])


def _operands(text: str) -> list[str]:
    """The top-level comma-separated operands of a call's argument list TEXT."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return out


def funnel_vtables(ir: str) -> dict[str, set[str]]:
    """Function name -> the globals its branch funnel call jumps through (the call's operands after the first
    are vtable address, target pairs), for each function of the textual IR that calls llvm.icall.branch.funnel."""
    out: dict[str, set[str]] = {}
    function = ""
    for line in ir.splitlines():
        d = _DEFINE.match(line)
        if d:
            function = _name(d.group(1))
            continue
        if line.startswith("}"):
            function = ""
        call = _FUNNEL_CALL.search(line) if function and " call " in line else None
        if call:
            pairs = [o for o in _operands(call.group(1))[1:] if o != "..."]
            out.setdefault(function, set()).update(
                _name(g.group(1)) for o in pairs[0::2] if (g := _GLOBAL.search(o)))
    return out


def place_funnels(m: Mapping[str, Any], parts: Sequence[str]) -> str:
    """Move every branch funnel of the partitions PARTS (bitcode files, changed in place) into the partition
    that defines the vtables it jumps through; "" when done, else why it cannot be (PARTS then unusable)."""
    home: dict[str, int] = {}  # defined symbol -> its partition
    candidates: dict[int, list[str]] = {}
    for k, part in enumerate(parts):
        for symbol in _defined_symbols(m, part):
            home[symbol] = k
            if "branch_funnel" in symbol:  # WholeProgramDevirt's names: __typeid_<id>_<offset>_branch_funnel
                candidates.setdefault(k, []).append(symbol)
    moves: dict[tuple[int, int], list[str]] = {}
    for k, names in sorted(candidates.items()):
        ir = _tool(m, "llvm-extract", "-S", *(f"--func={x}" for x in names), parts[k], "-o", "-")
        for function, vtables in sorted(funnel_vtables(ir).items()):
            where = {home[v] for v in vtables if v in home}
            if len(where) != 1:
                return f"the vtables of branch funnel {function} are in {len(where)} partitions"
            target = where.pop()
            if target != k:
                if k == 0 and any(line.startswith("module asm") for line in ir.splitlines()):
                    return "moving a branch funnel out of partition 0 would move its module inline asm"
                moves.setdefault((k, target), []).append(function)
    # Batched, as each run parses a whole partition: one extract per (source, target), then one delete per
    # source and one link per target, all extracts reading the sources before any is changed.
    incoming: dict[int, list[str]] = {}  # partition -> the files of funnels it takes
    outgoing: dict[int, list[str]] = {}  # partition -> the funnels it gives away
    for (source, target), functions in sorted(moves.items()):
        moved = f"{parts[source]}.to{target}"
        _tool(m, "llvm-extract", *(f"--func={f}" for f in functions), parts[source], "-o", moved)
        incoming.setdefault(target, []).append(moved)
        outgoing.setdefault(source, []).extend(functions)
    for source, functions in sorted(outgoing.items()):
        _tool(m, "llvm-extract", "--delete", *(f"--func={f}" for f in functions), parts[source], "-o",
              f"{parts[source]}.tmp")
        os.replace(f"{parts[source]}.tmp", parts[source])
    for target, moved_files in sorted(incoming.items()):
        _tool(m, "llvm-link", parts[target], *moved_files, "-o", f"{parts[target]}.tmp")
        os.replace(f"{parts[target]}.tmp", parts[target])
        for moved in moved_files:
            os.unlink(moved)
    return ""


def leave(m: Mapping[str, Any], staged: Sequence[str], n: int, why: str, module_bytes: int | None = None) -> list[str]:
    """Put the STAGED partition bitcode files in place of the first edges' (the rest empty), record N, WHY and
    the size of the module lld wrote (None: lld compiled it itself); the objects of the filled edges."""
    planned, directory = m["partitions"], m["partition_dir"]
    objects = []
    for k in range(planned):
        bitcode, obj = partition_paths(directory, k)
        if k >= len(staged):
            write_if_changed(bitcode, b"")
            continue
        if os.path.dirname(staged[k]) == m["stage_dir"]:
            replace_if_changed(staged[k], bitcode)
        else:  # the module itself (lld's -o), kept for the next run's comparison
            write_if_changed(bitcode, read_bytes(staged[k]))
        objects.append(obj)
    record = {"module_bytes": module_bytes, "planned": planned, "partitions": n, "why": why}
    write_if_changed(os.path.join(directory, RECORD), json.dumps(record, sort_keys=True) + "\n")
    return objects
