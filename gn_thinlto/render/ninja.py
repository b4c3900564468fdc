"""Rendering a GraphPlan into ninja text (our files, and the small edits to GN's files). Pure: text in, text out."""

from __future__ import annotations

import itertools
import os
import shlex
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gn_thinlto import steps
from gn_thinlto.errors import GnThinltoError
from gn_thinlto.plan.model import Backend, BackendCommand, FinalLink, GraphPlan, TargetPlan, TargetSummary
from gn_thinlto.render.templating import render, shell_join
from gn_thinlto.steps import ninja_syntax
from gn_thinlto.steps.step_args import socket_path, step_flags
from goma_ext import __version__

SHARED_FILE = "gn-thinlto/shared.ninja"
SHARED_NAIVE_RSP = "gn-thinlto/shared.naive_inputs.rsp"
REMOTE_LINK_DIR = "gn-thinlto/remote-link"  # the final links' lld shim under `download: minimal`
NAIVE_RSP_NAME = "naive_inputs.rsp"  # per target: every bitcode object of the link, for the remote stats
BUILD_EDIT_MARKER = "# gn-thinlto: ThinLTO graph"
STEP_DIR = os.path.dirname(os.path.abspath(steps.__file__))  # the installed gn_thinlto.steps package
THIN_LINK_STEP = "thinlink"
BACKEND_STEP = "backend"


def _common(source: str) -> dict[str, object]:
    return {"version": __version__, "source": source}


@dataclass(frozen=True)
class BackendGroup:
    """Consecutive backend edges of one ninja file with the same BackendCommand. The file binds the command's
    parts once, as top-level variables HEAD_VAR and FLAGS_VAR (scoped to the file: GN's build.ninja reaches
    ours through subninja); ninja expands them in each edge's argv when it parses the edge, so the commands
    ninja runs and hashes are the same as with the whole argv on every edge."""

    head_var: str
    flags_var: str
    command: BackendCommand
    backends: tuple[Backend, ...]


# Characters that need neither shell quoting nor ninja escaping in a value (shlex.quote leaves them alone).
_SHELL_PLAIN = (string.ascii_letters + string.digits + "_@%+=:,./-").encode()


def _shell_plain(text: str) -> bool:
    """Whether TEXT has only characters that need no quoting or escaping (a byte deletion, not a regular
    expression: it scans the paths of tens of thousands of backends in a few milliseconds)."""
    return text.isascii() and not text.encode("ascii").translate(None, _SHELL_PLAIN)


def backend_edges(group: BackendGroup) -> str:
    """GROUP's build statements, through the writer's batch form (a large link has tens of thousands). When
    no path of an object's arguments needs quoting (one check over them all), its argv is formatted directly."""
    head_ref = f"${group.head_var} " if group.command.head else ""
    flags_ref = f" ${group.flags_var}" if group.command.flags else ""
    backends = group.backends
    files = group.command.inputs
    if files:  # rare (a link's sample profile): each edge also depends on them, written one by one
        return "\n".join(
            ninja_syntax.build(b.native, "gn_thinlto_backend", b.bitcode, [*([b.index] if b.index else []), *files],
                               implicit_outputs=[b.dwo] if b.dwo else (),
                               variables=[("argv", ninja_syntax.raw(
                                   f"{head_ref}{ninja_syntax.escape(shell_join(b.object_args))}{flags_ref}")),
                                          ("description", b.description)])
            for b in backends)
    natives = [b.native for b in backends]
    bitcodes = [b.bitcode for b in backends]
    indexes = [b.index for b in backends]
    if _shell_plain("".join(natives) + "".join(bitcodes) + "".join(indexes)):  # Backend.object_args, unquoted
        argvs = [f"{head_ref}{b.bitcode}{f' -fthinlto-index={b.index}' if b.index else ''} -o {b.native}{flags_ref}"
                 for b in backends]
        descriptions = [f"BACKEND {n}" for n in natives]  # Backend.description, without a property call each
    else:
        argvs = [f"{head_ref}{ninja_syntax.escape(shell_join(b.object_args))}{flags_ref}" for b in backends]
        descriptions = [b.description for b in backends]
    return ninja_syntax.build_lines(  # the template ends the last line
        "gn_thinlto_backend", natives, bitcodes, implicit=indexes, implicit_outputs=[b.dwo for b in backends],
        variables={"argv": argvs, "description": descriptions}, raw_keys={"argv"})


def backend_groups(backends: Sequence[Backend]) -> list[BackendGroup]:
    """BACKENDS in runs sharing a command; variables are numbered when a file has more than one run."""
    runs = [(command, tuple(run)) for command, run in itertools.groupby(backends, key=lambda b: b.command)]
    groups = []
    for n, (command, run) in enumerate(runs, 1):
        suffix = f"_{n}" if len(runs) > 1 else ""
        groups.append(
            BackendGroup(f"gn_thinlto_backend_head{suffix}", f"gn_thinlto_backend_flags{suffix}", command, run)
        )
    return groups


def step_command(python: str, step: str, step_dir: str = STEP_DIR) -> list[str]:
    """How a rule runs a build step: the module as a script under `python -S`.

    ninja starts a step once per backend edge and per thin link, so start-up counts: `-S` skips the
    site-packages scan (our steps need only the standard library; the script puts its package's parent on
    sys.path), 10 ms against 30 ms for `python -m` with an editable install.
    """
    return [python, "-S", f"{step_dir}/{step}.py"]


def render_files(plan: GraphPlan, source: str = "project.json", step_dir: str = STEP_DIR) -> dict[str, str]:
    """Every file gn-thinlto owns (ninja, and with remote backends their naive-input lists), by path in OUT."""
    files = build_files(plan, source, step_dir)
    files.update(shared_files(plan, source))
    for t in plan.targets:
        files.update(target_files(plan, t, source))
    return files


def build_files(plan: GraphPlan, source: str = "project.json", step_dir: str = STEP_DIR) -> dict[str, str]:
    """The build-wide files: rules and the list of target files (with shared_files, every file but the links')."""
    ctx = _common(source)
    cached = bool(plan.cache_dir)  # without a cache, no policy and no writers to trust
    backend = [*step_command(plan.python, BACKEND_STEP, step_dir),
               *step_flags(plan.cache_dir, plan.backend_log, plan.cache_policy if cached else "",
                           plan.cache_trusted_writers if cached else ())]
    if plan.step_launcher:  # the launcher hands the step to the build dir's server
        sock = socket_path(backend, os.path.dirname(plan.backend_log) or ".")
        servers = ["--servers", str(plan.step_servers)] if plan.step_servers > 1 else []
        backend = [plan.step_launcher, *servers, sock, *backend, "--socket", sock]
    files = {
        plan.rules_file: render(
            "rules.ninja.j2",
            plan=plan,
            thin_link_command=step_command(plan.python, THIN_LINK_STEP, step_dir),
            backend_command=backend,
            **ctx,
        ),
        plan.targets_file: render("targets.ninja.j2", plan=plan, shared_file=SHARED_FILE, **ctx),
    }
    return files


def shared_files(plan: GraphPlan, source: str = "project.json") -> dict[str, str]:
    """The shared null-index backends' ninja file (and with remote backends their naive-input list)."""
    if not plan.shared_backends:
        return {}
    files = {SHARED_FILE: render("shared_backends.ninja.j2", plan=plan, naive_rsp=SHARED_NAIVE_RSP,
                                 backend_groups=backend_groups(plan.shared_backends), backend_edges=backend_edges,
                                 **_common(source))}
    if plan.remote is not None:
        files[SHARED_NAIVE_RSP] = _naive_inputs(plan.shared_backends)
    return files


def final_argv(plan: GraphPlan, f: FinalLink) -> tuple[str, ...]:
    """F's command; with remote final links (`download: minimal`), its clang finds lld in REMOTE_LINK_DIR first
    (`-B`: the shim there runs the link remotely; same arguments as lld would get, -fuse-ld=lld kept)."""
    if plan.remote is None or not plan.remote.link_launcher:
        return f.argv
    if why := _own_linker(f):
        raise GnThinltoError(f"remote.download: minimal: the final link of {f.outputs[0]} {why}, so it would not "
                             "run the remote lld that reads the objects kept in the CAS; use download: all")
    return (*f.argv[:f.driver_at + 1], f"-B{REMOTE_LINK_DIR}/", *f.argv[f.driver_at + 1:])


def _own_linker(f: FinalLink) -> str:
    """Why clang would not run the ld.lld in REMOTE_LINK_DIR for F ("" when it would)."""
    if f.driver_at < 0:
        return "has no clang driver gn-thinlto can find"
    args = f.argv[f.driver_at + 1:]
    if "-fuse-ld=lld" not in args:
        return "does not ask for lld (-fuse-ld=lld)"
    for a in args:
        if a.startswith(("-B", "--prefix", "--ld-path")) or (a.startswith("-fuse-ld=") and a != "-fuse-ld=lld"):
            return f"names its own linker ({a})"
    return ""


def remote_link_shim(plan: GraphPlan) -> str:
    """The `ld.lld` in REMOTE_LINK_DIR (a shell script), or "" without remote final links."""
    if plan.remote is None or not plan.remote.link_launcher:
        return ""
    return ("#!/bin/sh\n# lld for the final links (remote.download: minimal): written by gn-thinlto gen\n"
            f"exec {shlex.join(plan.remote.link_launcher)} \"$@\"\n")


def target_files(plan: GraphPlan, t: TargetPlan, source: str = "project.json") -> dict[str, str]:
    """One planned link's ninja file (and with remote backends its naive-input list)."""
    naive_rsp = f"{t.directory}/{NAIVE_RSP_NAME}"
    files = {t.ninja_file: render("target.ninja.j2", t=t, remote=plan.remote, naive_rsp=naive_rsp,
                                  final_argv=final_argv(plan, t.final_link),
                                  backend_groups=backend_groups(t.backends), backend_edges=backend_edges,
                                  **_common(source))}
    if plan.remote is not None:
        files[naive_rsp] = _naive_inputs(t.backends)
    return files


def _naive_inputs(backends: Sequence[Backend]) -> str:
    return render("naive_inputs.rsp.j2", bitcode=sorted({b.bitcode for b in backends}))


def edit_build_ninja(text: str, plan: GraphPlan) -> str:
    """Insert our include/subninja lines after GN's `subninja toolchain.ninja` (idempotent)."""
    if BUILD_EDIT_MARKER in text:
        return text
    lines = text.split("\n")
    try:
        at = lines.index("subninja toolchain.ninja")
    except ValueError:
        raise GnThinltoError("build.ninja has no 'subninja toolchain.ninja' line; is it GN's?") from None
    edit = render("gn_build_edit.ninja.j2", rules_file=plan.rules_file, targets_file=plan.targets_file)
    return "\n".join([*lines[: at + 1], edit.rstrip("\n"), *lines[at + 1 :]])


def edit_gn_target_files(texts: Mapping[str, str], plan: GraphPlan) -> dict[str, str]:
    """Remove GN's link edge of every planned target from its GN ninja file, leaving a pointer comment."""
    by_file: dict[str, list[TargetSummary]] = {}
    for t in plan.links:
        by_file.setdefault(t.gn_ninja_file, []).append(t)
    out: dict[str, str] = {}
    for name, targets in sorted(by_file.items()):
        lines = texts[name].split("\n")
        for t in sorted(targets, key=lambda t: t.gn_edge_lines[0], reverse=True):
            first, last = t.gn_edge_lines
            note = render("gn_link_moved.ninja.j2", output=t.output, ninja_file=t.ninja_file).rstrip("\n")
            lines[first : last + 1] = [note]
        out[name] = "\n".join(lines)
    return out
