"""The regular-LTO module in partitions: how the thin-link step runs lld, and what it leaves, for a link with
partition edges.

CFI and whole-program devirtualization put part of every object (its split LTO unit) into the link's
regular-LTO module, which lld optimizes and compiles in one thread inside the thin link. For a link with
partition edges the step first decides how many partitions the module gets (N):
- `fixed` (the link's --lto-partitions=N, or the config's number): N;
- `auto`: one per AUTO_PARTITION_BYTES of the link's split-LTO-unit bitcode (the inputs' regular-LTO modules,
  thinlto_base.bitcode_blocks), at most the edges planned.
With N < 2 lld compiles the module itself, as without partition edges (lld splits only for N > 1, so this is
in-process lld's code). With N ≥ 2 lld runs with --lto-emit-llvm: it optimizes the module as in-process and
writes it to its -o as bitcode instead of compiling it. The step splits it as lld's --lto-partitions=N does
(llvm-split calls the same llvm::SplitModule with the same arguments), one bitcode file per partition edge; each
edge compiles its file like a backend, code generation only, behind the backend cache and remote execution.
Checked with clang/lld 19: every partition object is byte-identical to lld's own with --lto-partitions=N
(docs/design/partitions.md).

Whole-program devirtualization's branch funnels (calls of llvm.icall.branch.funnel) cannot be split: LLVM's
splitter separates a funnel from the vtables it jumps through, and code generation of that partition aborts
("all llvm.icall.branch.funnel operands must refer to the same GlobalValue"; in-process lld 19 and 22 alike).
Such a module is one partition, compiled by the first edge.

Edges beyond N get an empty bitcode file and write an empty object (steps.backend), which the final link never
names. Standard library only (the thin-link step runs `python -S`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from gn_thinlto.errors import GnThinltoError
from gn_thinlto.steps.thinlink_paths import partition_paths
from thinlto_base.bitcode_blocks import regular_lto_bytes
from thinlto_base.fsutil import read_bytes, replace_if_changed, write_if_changed

AUTO_PARTITION_BYTES = 4 << 20  # plan.config.AUTO_PARTITION_MIB
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
    return n, (f"auto: {regular} bytes of split-LTO-unit bitcode, one partition per "
               f"{AUTO_PARTITION_BYTES >> 20} MiB, at most {planned}")


def has_definitions(nm: str, module: str) -> bool:
    """Whether the bitcode MODULE defines any symbol: the final link leaves an empty module's objects out."""
    proc = subprocess.run([nm, "--defined-only", "--format=just-symbols", module], capture_output=True, text=True)
    if proc.returncode != 0:
        raise GnThinltoError(f"{nm} {module}: exit {proc.returncode}: {proc.stderr.strip()}")
    return bool(proc.stdout.strip())


def split(m: Mapping[str, Any], module: str, n: int, why: str) -> list[str]:
    """Leave manifest M's partition bitcode files in place (only changed ones rewritten) for N partitions of
    MODULE, the bitcode lld wrote with --lto-emit-llvm; the objects the final link takes, partition 0 first (lld's
    order), maybe none."""
    driver, stage = m["argv"][0], m["stage_dir"]
    data = read_bytes(module) if os.path.isfile(module) else b""
    if not data or not has_definitions(llvm_tool(driver, "llvm-nm"), module):
        return leave(m, [], 0, "the regular-LTO module is empty")
    if BRANCH_FUNNEL in data:
        n, why = 1, "the module has branch funnels, which LLVM cannot split: one partition"
    if n == 1:
        return leave(m, [module], 1, why, len(data))
    prefix = os.path.join(stage, "part")
    proc = subprocess.run([llvm_tool(driver, "llvm-split"), "-j", str(n), "-o", prefix, module],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise GnThinltoError(f"thin link of {m['target']}: llvm-split exit {proc.returncode}: {proc.stderr.strip()}")
    return leave(m, [f"{prefix}{k}" for k in range(n)], n, why, len(data))


def leave(m: Mapping[str, Any], staged: Sequence[str], n: int, why: str, module_bytes: int = 0) -> list[str]:
    """Put the STAGED partition bitcode files in place of the first edges' (the rest empty), record N and WHY;
    the objects of the filled edges."""
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
