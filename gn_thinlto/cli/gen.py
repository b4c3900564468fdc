"""`gn-thinlto gen OUT [--root DIR] [--args ARGS] [--config FILE]`: `gn gen` with the gn-thinlto hook.

Writes OUT/gn-thinlto/gn_hook.py, a two-line launcher that runs the hook with this interpreter (GN runs
--json-ide-script with its own python, which may not have gn-thinlto's dependencies), then runs
`gn gen OUT --ide=json --json-ide-script=gn-thinlto/gn_hook.py`. GN's regeneration rule keeps those flags,
so ninja's own re-runs of gn (after a BUILD.gn change) re-apply the graph too.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

from gn_thinlto import tools
from gn_thinlto.errors import GnThinltoError, file_error, is_file, make_dir, read_text, shown
from gn_thinlto.hook import PROJECT_MARKER_KEY, check_graph_in_place
from thinlto_base.fsutil import write_if_changed

HOOK_LAUNCHER = "gn-thinlto/gn_hook.py"
_LAUNCHER_TEXT = '''\
# Written by `gn-thinlto gen`: GN runs this (--json-ide-script); it runs the gn-thinlto hook with the
# interpreter gn-thinlto is installed in.
import os
import sys

PYTHON = {python!r}
os.execv(PYTHON, [PYTHON, "-m", "gn_thinlto.hook", *{hook_args!r}, *sys.argv[1:]])
'''


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("gen", help="run `gn gen` with the gn-thinlto hook (ThinLTO edges in the ninja graph)")
    p.add_argument("out", type=Path, help="build directory")
    p.add_argument("--root", type=Path, default=Path("."), help="GN source root (default: .)")
    p.add_argument("--args", default="", help="GN build arguments, as for `gn gen --args`")
    p.add_argument("--config", type=Path, help="gn_thinlto.yaml (default: ROOT/gn_thinlto.yaml if present)")
    add_remote_argument(p)
    p.set_defaults(run=run)


def add_remote_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--remote", metavar="URL",
                   help="run backends over REAPI at grpc://HOST:PORT or grpcs://… (overrides the config's remote:)")


def hook_flags(out_dir: Path, config: Path | None, remote: str | None = None) -> list[str]:
    """Write the launcher (which carries --remote to every later regeneration) and return the hook's gn flags."""
    hook_args = ["--remote", remote] if remote else []
    write_if_changed(out_dir / HOOK_LAUNCHER, _LAUNCHER_TEXT.format(python=sys.executable, hook_args=hook_args))
    flags = ["--ide=json", f"--json-ide-script={HOOK_LAUNCHER}"]
    if config is not None:
        flags.append(f"--json-ide-script-args={config.resolve()}")
    return flags


def gen(
    out_dir: Path, root: Path, args: str, config: Path | None, log: Path | None = None, remote: str | None = None
) -> list[str]:
    """Run gn gen with the hook; return the hook's `gn-thinlto: …` lines (refusals and the summary)."""
    if not is_file(root / ".gn", "--root"):
        raise GnThinltoError(f"--root {shown(root)}: no .gn file there; point it at a GN source root")
    if config is not None and not is_file(config, "--config"):
        raise GnThinltoError(f"--config {shown(config)}: no such file")
    _check_script_executable(root / ".gn")
    make_dir(out_dir, "build directory")
    _forget_unmarked_project_json(out_dir)
    stdout = tools.gn_gen(out_dir, root.resolve(), args, extra=hook_flags(out_dir, config, remote), log=log)
    check_graph_in_place(out_dir)
    return [line for line in stdout.splitlines() if line.startswith("gn-thinlto:")]


def _check_script_executable(dot_gn: Path) -> None:
    """GN runs the hook with the .gn's script_executable, else with `python` from PATH, which Debian 12 lacks:
    GN's own error for that is only 'Python has quit with exit code 127'."""
    if shutil.which("python") is None and not re.search(r"^\s*script_executable\s*=", read_text(dot_gn), re.M):
        raise GnThinltoError(f"{dot_gn}: no script_executable, so GN would run the hook with `python`, which is not "
                             'on PATH; add script_executable = "python3" to it')


def _forget_unmarked_project_json(out_dir: Path) -> None:
    """A project.json from a `gn gen --ide=json` without the hook would look unchanged to GN, which would then
    skip the hook; removing it makes GN write it and run the hook."""
    project = out_dir / "project.json"
    try:
        if f'"{PROJECT_MARKER_KEY}"'.encode() not in project.read_bytes():
            project.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise file_error(project, e) from e


def run(args: argparse.Namespace) -> int:
    for line in gen(args.out, args.root, args.args, args.config, remote=args.remote):
        print(line)
    return 0
