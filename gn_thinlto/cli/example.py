"""`gn-thinlto example`: build the bundled Chromium-style workspace and run every binary's self-check."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from gn_thinlto import tools
from gn_thinlto.cli import gen
from gn_thinlto.errors import GnThinltoError, is_file, make_dir, shown, write_text
from gn_thinlto.hook import STATE_DIR
from gn_thinlto.steps.backend_log import read_stats
from goma_ext.remote import stats
from goma_ext.remote.config import DEFAULT_STATS_LOG

DEFAULT_ROOT = Path("examples/chromium_style")
SELF_CHECK_TIMEOUT_S = 60


@dataclass(frozen=True)
class SelfCheck:
    """The result of running one built binary with no arguments."""

    binary: str
    ok: bool
    detail: str


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("example", help="build the bundled example workspace and run its self-checks")
    p.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="GN source root (default: %(default)s)")
    p.add_argument("--out", type=Path, default=Path("out/example"), help="build directory (default: %(default)s)")
    p.add_argument("--args", default="", help="extra GN args, as for `gn gen --args`")
    p.add_argument("--in-process", action="store_true",
                   help="build GN's own graph (lld runs ThinLTO in-process) instead of the gn-thinlto graph")
    gen.add_remote_argument(p)
    p.set_defaults(run=run)


def run_self_checks(out_dir: Path, binaries: list[str]) -> list[SelfCheck]:
    """Run each executable (paths relative to OUT) from OUT; a check passes on exit 0."""
    results = []
    for rel in binaries:
        try:
            proc = subprocess.run(
                [str((out_dir / rel).resolve())],
                cwd=out_dir,
                capture_output=True,
                text=True,
                timeout=SELF_CHECK_TIMEOUT_S,
            )
            lines = (proc.stdout + proc.stderr).strip().splitlines()
            results.append(SelfCheck(rel, proc.returncode == 0, lines[-1] if lines else f"exit {proc.returncode}"))
        except (OSError, subprocess.TimeoutExpired) as e:
            results.append(SelfCheck(rel, False, str(e)))
    return results


def run(args: argparse.Namespace) -> int:
    out_dir: Path = args.out
    if not is_file(args.root / ".gn", "--root"):
        raise GnThinltoError(f"--root {shown(args.root)}: no .gn file there; point it at a GN source root")
    root: Path = args.root.resolve()
    make_dir(out_dir, "--out")
    log = out_dir / "gn-thinlto-example.log"
    write_text(log, "", "--out")
    start = time.monotonic()
    backend_log = out_dir / STATE_DIR / "backend.log"
    if args.in_process and args.remote:
        raise GnThinltoError("--remote runs the graph's backends remotely; it cannot go with --in-process")
    remote_log = out_dir / DEFAULT_STATS_LOG
    remote_offset = len(stats.read(remote_log)) if remote_log.exists() else 0
    if args.in_process:
        # Asking for GN's own links in a gn-thinlto directory is explicit: drop our state, which the
        # example's GN guard (build/gn_thinlto_guard.py) would otherwise take as a mistaken plain `gn gen`.
        shutil.rmtree(out_dir / STATE_DIR, ignore_errors=True)
        print(f"gn gen {out_dir} (root {args.root}; in-process ThinLTO)")
        tools.gn_gen(out_dir, root, args.args, log=log)
    else:
        print(f"gn-thinlto gen {out_dir} (root {args.root}; ThinLTO phases in the ninja graph)")
        for line in gen.gen(out_dir, root, args.args, None, log=log, remote=args.remote):
            print(f"  {line}")
    log_offset = backend_log.stat().st_size if backend_log.exists() else 0
    print(f"ninja -C {out_dir}   (log: {log})")
    build = tools.ninja_build(out_dir, log=log)
    if not args.in_process:
        backends = read_stats(backend_log, log_offset)
        print(
            f"ThinLTO backends: {backends.hits + backends.misses} jobs run, {backends.hits} cache hits, "
            f"{backends.misses} compiled (cache: {out_dir}/gn-thinlto/cache)"
        )
    if args.remote:
        runs = stats.summarize(stats.read(remote_log)[remote_offset:]) if remote_log.exists() else None
        modes = runs["modes"] if runs else {}
        print(
            f"remote ({args.remote}): {modes.get('remote', 0)} executed remotely, "
            f"{modes.get('cache_hit', 0)} action-cache hits, {modes.get('fallback', 0)} local fallbacks "
            f"(details: gn-thinlto report {out_dir})"
        )
    executables = tools.gn_ls(out_dir, root, "--type=executable", "--as=output")
    shared = tools.gn_ls(out_dir, root, "--type=shared_library", "--as=output")
    modules = tools.gn_ls(out_dir, root, "--type=loadable_module", "--as=output")
    checks = run_self_checks(out_dir, executables)
    failed = [c for c in checks if not c.ok]
    for c in failed:
        print(f"  FAIL {c.binary}: {c.detail}")
    wall = time.monotonic() - start
    libraries = "library" if len(shared) == 1 else "libraries"
    plugins = f" + {len(modules)} loadable module{'' if len(modules) == 1 else 's'}" if modules else ""
    print(
        f"example: {len(executables)} executables + {len(shared)} shared {libraries}{plugins} built "
        f"({build.edges_run} ninja edges run), self-checks {len(checks) - len(failed)}/{len(checks)} passed, "
        f"{wall:.1f} s wall; outputs in {out_dir}/"
    )
    return 1 if failed else 0
