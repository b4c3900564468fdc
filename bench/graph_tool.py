"""The edge to gn-thinlto's graph ([graph]): whether it is installed, and running its GN hook on a build dir."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from bench.fsio import REPO
from bench.measure import Sample, run

NULL_INDEX_CONFIG = "testonly: shared_null_index\n"


def available() -> str | None:
    """None when the hook can run here, else why not (one line for the report)."""
    if importlib.util.find_spec("gn_thinlto.hook") is None:
        return "gn_thinlto.hook not present ([graph] not landed)"
    return None


def source_state() -> str:
    """Commit the benchmark ran at, and whether gn_thinlto/ and templates/ differ from it (uncommitted work)."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "gn_thinlto", "templates", "goma_ext"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    return f"{head}{' + uncommitted gn_thinlto/templates/goma_ext changes' if dirty else ''}"


def gn_gen(out_dir: Path, root: Path, args: str = "", ide_json: bool = False) -> Sample:
    cmd = ["gn", "gen", str(out_dir), f"--root={root}"]
    if args:
        cmd.append(f"--args={args}")
    if ide_json:
        cmd.append("--ide=json")
    return run(cmd)


# Limits on one hook run, so a graph too large for the hook fails alone instead of taking the machine down.
HOOK_MEMORY_GIB = 12


def hook(out_dir: Path, config: Path | None = None, timeout_s: int | None = None) -> Sample:
    """Run the hook alone on a directory `gn gen --ide=json` just wrote (what GN's --json-ide-script does)."""
    limits = ["prlimit", f"--as={HOOK_MEMORY_GIB << 30}"] + (["timeout", str(timeout_s)] if timeout_s else [])
    cmd = [*limits, sys.executable, "-m", "gn_thinlto.hook", str(out_dir / "project.json")]
    if config is not None:
        cmd.append(str(config))
    return run(cmd, cwd=REPO)


def gen_with_graph(out_dir: Path, root: Path, args: str = "", config: Path | None = None,
                   timeout_s: int | None = None) -> tuple[Sample, Sample]:
    """`gn gen --ide=json` then the hook, timed apart: (GN's sample, the hook's sample)."""
    return gn_gen(out_dir, root, args, ide_json=True), hook(out_dir, config, timeout_s)
