"""The GN hook: `gn gen OUT --ide=json --json-ide-script=…` runs it with OUT/project.json after GN wrote its ninja.

It plans every ThinLTO link, writes gn-thinlto's ninja files, removes the planned links' edges from GN's
per-target ninja files and includes ours from build.ninja. GN only runs the script when project.json's
content changed, while every `gn gen` rewrites GN's ninja files; so the hook first rewrites project.json
with an extra `gn_thinlto` key: the next `gn gen` (by hand, or ninja's regeneration rule, which keeps the
--ide flags) always finds it changed and runs the hook again.

Pointing GN at it (GN cannot take --ide flags from .gn, but its regeneration rule keeps them once given):
  gn-thinlto gen OUT [--root DIR] [--args ARGS] [--config FILE]
      writes OUT/gn-thinlto/gn_hook.py (a launcher for this interpreter) and runs
      gn gen OUT --ide=json --json-ide-script=gn-thinlto/gn_hook.py [--json-ide-script-args=FILE]
  gn gen OUT --ide=json --json-ide-script=/abs/path/to/gn_thinlto/hook.py [--json-ide-script-args=CONFIG]
      directly, when the python GN runs scripts with can import gn_thinlto: GN uses `script_executable`
      from the project's .gn (e.g. script_executable = "/path/to/venv/bin/python3"), else python3.
The config is ROOT/gn_thinlto.yaml unless CONFIG is given; it becomes an input of GN's regeneration rule.
"""

from __future__ import annotations

import gc
import json
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gn_thinlto.errors import GnThinltoError, decode_json, is_file, read_text
from gn_thinlto.gn import ninja_text
from gn_thinlto.gn.project import parse_project
from gn_thinlto.plan.config import CONFIG_FILE_NAME, Config, load_config
from gn_thinlto.plan.links import GnGraph
from gn_thinlto.plan.model import GraphPlan, RemoteBackends
from gn_thinlto.regen import regenerate
from gn_thinlto.render.ninja import (
    BUILD_EDIT_MARKER,
    REMOTE_LINK_DIR,
    edit_build_ninja,
    edit_gn_target_files,
    remote_link_shim,
)
from gn_thinlto.steps.launcher_build import build_launcher
from gn_thinlto.steps.step_args import default_servers
from goma_ext.errors import GomaExtError
from goma_ext.remote import config as remote_config
from goma_ext.remote.wrapper import link_command, wrap_command
from thinlto_base.fsutil import write_if_changed

STATE_DIR = "gn-thinlto"
PROJECT_COPY = f"{STATE_DIR}/project.json"
REFUSED_FILE = f"{STATE_DIR}/refused.txt"
LINKS_FILE = f"{STATE_DIR}/links.txt"
STEP_LAUNCHER = f"{STATE_DIR}/step-launcher"  # compiled by the hook from gn_thinlto/steps/launcher.c
PROJECT_MARKER_KEY = "gn_thinlto"
EDIT_MARKER = "# gn-thinlto:"
GN_NINJA = "GN's ninja file"


def read_gn_ninja(
    out_dir: Path, toolchain_files: Sequence[str]
) -> tuple[dict[str, ninja_text.NinjaFile], dict[str, str]]:
    """Each toolchain.ninja parsed, and the texts of it and every file it subninjas (relative to OUT); the
    subninja'd files are parsed later, when planning needs them (a regeneration needs few of them)."""
    toolchains: dict[str, ninja_text.NinjaFile] = {}
    texts: dict[str, str] = {}
    for tc in toolchain_files:
        if not is_file(out_dir / tc, GN_NINJA):
            continue
        texts[tc] = read_text(out_dir / tc, GN_NINJA)
        toolchains[tc] = ninja_text.parse(texts[tc])
        for sub in toolchains[tc].subninjas:
            if not sub.startswith(f"{STATE_DIR}/"):
                texts[sub] = read_text(out_dir / sub, GN_NINJA)
    return toolchains, texts


def load_graph(
    out_dir: Path, project_data: Mapping[str, Any]
) -> tuple[GnGraph, dict[str, str], dict[str, ninja_text.NinjaFile]]:
    """GN's data for OUT: project.json (decoded) and GN's ninja files (parsed when read); also the files'
    texts and the parsed toolchain files."""
    project = parse_project(project_data)
    toolchain_names = sorted({project.toolchain_ninja(t.toolchain) for t in project.targets.values()})
    toolchains, texts = read_gn_ninja(out_dir, toolchain_names)
    if any(EDIT_MARKER in text for text in texts.values()):
        raise GnThinltoError(f"{out_dir}: GN's ninja files already carry gn-thinlto edits; run `gn gen` again")
    parents = {sub: tc.variables for tc in toolchains.values() for sub in tc.subninjas}
    return GnGraph(project, ninja_text.LazyNinjaFiles(texts, parents, toolchains)), texts, toolchains


@dataclass(frozen=True)
class HookResult:
    plan: GraphPlan
    files_written: int
    links_planned: int  # the others were kept from the last run (incremental regeneration)


def remote_backends(config: Config, endpoint: str | None, env: Mapping[str, str],
                    out_dir: Path) -> RemoteBackends | None:
    """How backends launch remotely: the `remote:` section < environment < `gen --remote`; None for local. A token
    file or client key that the backends (run in OUT_DIR) would refuse is refused here."""
    overrides = {"endpoint": endpoint} if endpoint else None
    try:
        cfg = remote_config.load_config(dict(config.remote), env, overrides)
        if cfg is not None:
            remote_config.check_secrets(cfg, out_dir, missing_ok=True)
    except GomaExtError as e:
        raise GnThinltoError(f"{config.source}: remote: {e}") from e
    if cfg is None:
        return None
    launcher = wrap_command([], cfg)
    if launcher[-1:] != ["--"]:
        raise GnThinltoError(f"goma_ext.remote.wrapper.wrap_command gave {launcher!r}, which does not end in `--`")
    link = tuple(link_command(cfg)) if cfg.download == "minimal" else ()
    return RemoteBackends(launcher=tuple(launcher[:-1]), jobs=cfg.jobs, link_launcher=link)


def write_link_shim(out_dir: Path, plan: GraphPlan) -> int:
    """The final links' lld shim (download: minimal), executable; 1 if written."""
    shim = remote_link_shim(plan)
    if not shim:
        return 0
    path = out_dir / REMOTE_LINK_DIR / "ld.lld"
    written = write_if_changed(path, shim)
    path.chmod(0o755)
    return int(written)


def mark_project_json(raw: str) -> str:
    """project.json's text with our marker key added before its closing brace (GN writes an object)."""
    body = raw.rstrip()
    if not body.endswith("}"):
        raise GnThinltoError("project.json: not a JSON object")
    note = json.dumps({"note": "gn-thinlto marks this file so that every gn gen re-runs its hook"})
    return f"{body[:-1].rstrip()},\n  {json.dumps(PROJECT_MARKER_KEY)}: {note}\n}}\n"


def step_launcher(out_dir: Path) -> str:
    """The step launcher's path in OUT_DIR, built if needed; "" (after one warning line) when it cannot be."""
    why = build_launcher(str(out_dir), STEP_LAUNCHER)
    if why:
        print(f"gn-thinlto: warning: step launcher not built ({why}); each backend edge runs a Python step "
              "(step_server: false silences this)")
        return ""
    if (out_dir / "build.ninja.d").is_file():  # deleted, it is built again by `gn gen` (GN writes the file)
        _add_regeneration_input(out_dir, out_dir / STEP_LAUNCHER)
    return STEP_LAUNCHER


def run_hook(project_json: Path, config_path: Path | None, python: str, remote: str | None = None) -> HookResult:
    raw = read_text(project_json)
    out_dir = project_json.resolve().parent
    data = decode_json(raw, project_json)
    if not isinstance(data, dict):
        raise GnThinltoError(f"{project_json}: not a JSON object")
    # Mark project.json before anything can fail: GN re-runs this hook only when the file's content differs
    # from what it generates, so a marked file makes every later `gn gen` (with the hook flags) run it.
    if data.pop(PROJECT_MARKER_KEY, None) is None:
        write_if_changed(project_json, mark_project_json(raw))
        write_if_changed(out_dir / PROJECT_COPY, raw)
    graph, texts, toolchains = load_graph(out_dir, data)
    root = Path(graph.project.root_path)
    config_file = config_path if config_path is not None else root / CONFIG_FILE_NAME
    if is_file(config_file, "config"):  # listed first, so that fixing a bad config re-runs gn and this hook
        _add_regeneration_input(out_dir, config_file)
    if (out_dir / "build.ninja.d").is_file():  # GN writes it at every gen (absent: a test's copy of GN's files)
        if config_path is None and not config_file.exists():  # one made later must be read: a new entry
            _add_regeneration_input(out_dir, config_file.parent)  # changes its directory's mtime
        # An upgraded gn-thinlto plans again (a fix of its planning reaches existing build directories): pip
        # replaces this file, among all of the package's.
        _add_regeneration_input(out_dir, Path(__file__))
    config = load_config(config_path, root)
    build_text = read_text(out_dir / "build.ninja", GN_NINJA)
    backends_remote = remote_backends(config, remote, os.environ, out_dir)
    launcher = step_launcher(out_dir) if config.step_server else ""
    servers = config.step_servers if isinstance(config.step_servers, int) else default_servers(os.cpu_count() or 1)
    regen = regenerate(out_dir, graph, texts, toolchains, config, python, backends_remote, step_launcher=launcher,
                       step_servers=servers)
    plan, written = regen.plan, regen.written
    written += write_link_shim(out_dir, plan)
    for rel, text in edit_gn_target_files(texts, plan).items():
        written += write_if_changed(out_dir / rel, text)
    written += write_if_changed(out_dir / "build.ninja", edit_build_ninja(build_text, plan))
    refused = "".join(f"{r.label} ({r.output}): {r.reason}\n" for r in plan.refusals)
    write_if_changed(out_dir / REFUSED_FILE, refused)
    write_if_changed(out_dir / LINKS_FILE, links_report(plan))
    for r in plan.refusals:
        print(f"gn-thinlto: {r.label}: left to GN's in-process ThinLTO link: {r.reason}")
    return HookResult(plan, written, regen.planned)


def links_report(plan: GraphPlan) -> str:
    """Every link target of the build and what became of it, one per line, sorted by label."""
    rows = [(t.label, "graph", t.ninja_file) for t in plan.links]
    rows += [(r.label, "left to GN", r.reason) for r in plan.refusals]
    rows += [(label, "excluded", "by the targets: patterns of gn_thinlto.yaml") for label in plan.excluded]
    rows += [(label, "not ThinLTO", "no -flto=thin in its link") for label in plan.not_thinlto]
    return "".join(f"{label}\t{status}\t{detail}\n" for label, status, detail in sorted(rows))


def link_count(plan: GraphPlan) -> int:
    """Every link target of the build, whatever became of it."""
    return len(plan.links) + len(plan.refusals) + len(plan.excluded) + len(plan.not_thinlto)


def summary_line(plan: GraphPlan) -> str:
    total = link_count(plan)
    excluded = f", {len(plan.excluded)} excluded by the config" if plan.excluded else ""
    return (f"gn-thinlto: {total} link targets: {len(plan.links)} ThinLTO links in the ninja graph, "
            f"{len(plan.refusals)} left to GN{excluded}, {len(plan.not_thinlto)} not ThinLTO (details: {LINKS_FILE})")


def _add_regeneration_input(out_dir: Path, path: Path) -> None:
    """Make ninja re-run gn (and so this hook) when PATH changes (the config, its directory, this package's code, the
    step launcher): list it in GN's build.ninja.d."""
    depfile = out_dir / "build.ninja.d"
    text = read_text(depfile, "GN's").rstrip("\n")
    entry = str(path.resolve()).replace(" ", "\\ ")
    if f" {entry}" not in text:
        write_if_changed(depfile, f"{text} {entry}\n")


def check_graph_in_place(out_dir: Path) -> None:
    """Stop with a clear message when OUT's ninja files are GN's alone (generated without the hook)."""
    build = out_dir / "build.ninja"
    if not is_file(build):
        raise GnThinltoError(f"{out_dir}: no build.ninja; run `gn-thinlto gen {out_dir}` first")
    if BUILD_EDIT_MARKER not in read_text(build):
        raise GnThinltoError(
            f"{out_dir} was generated without the gn-thinlto hook (a plain `gn gen`?), so ninja would build "
            f"GN's in-process ThinLTO links; run `gn-thinlto gen {out_dir}` to restore the graph"
        )


def report_error(line: str) -> None:
    """Print LINE on stderr, and on GN's own stderr when GN runs quietly (ninja's regeneration uses `gn -q`,
    which swallows script output and says only "Python has quit with exit code 2"). Not when that is a regular
    file (`ninja > log`): written through a second file description, at its own offset, the line would be
    overwritten by ninja's next lines or overwrite them."""
    print(line, file=sys.stderr)
    parent = Path(f"/proc/{os.getppid()}")
    try:
        parent_argv = (parent / "cmdline").read_bytes().split(b"\0")
        gn_stderr_path = parent / "fd" / "2"
        if b"-q" in parent_argv and b"gen" in parent_argv and not stat.S_ISREG(os.stat(gn_stderr_path).st_mode):
            with open(gn_stderr_path, "a") as gn_stderr:
                gn_stderr.write(line + "\n")
    except OSError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    # The plan of a large build is millions of small acyclic objects (a backend per object per link): the cyclic
    # collector would scan them again and again as they are made (a fifth of the hook's time) to free nothing.
    gc.disable()
    args = list(sys.argv[1:] if argv is None else argv)
    remote = None
    if args[:1] == ["--remote"] and len(args) >= 2:
        remote, args = args[1], args[2:]
    if not 1 <= len(args) <= 2:
        print("gn-thinlto: error: usage: hook.py [--remote URL] OUT/project.json [CONFIG.yaml]", file=sys.stderr)
        return 2
    try:
        config = Path(args[1]) if len(args) == 2 and args[1] else None
        result = run_hook(Path(args[0]), config, sys.executable, remote)
    except GnThinltoError as e:
        report_error(f"gn-thinlto: error: {e}")
        return 2
    print(summary_line(result.plan))
    total = link_count(result.plan)
    if result.links_planned < total:
        print(f"gn-thinlto: {total - result.links_planned} of {total} link targets unchanged since the last run, "
              f"{result.links_planned} planned again")
    return 0


if __name__ == "__main__":
    sys.exit(main())
