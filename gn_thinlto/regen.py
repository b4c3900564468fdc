"""Incremental regeneration: plan and write only the links whose GN data changed since the hook's last run.

Every `gn gen` (by hand, or ninja's regeneration rule after a BUILD.gn edit) rewrites all of GN's ninja files
and runs the hook. The hook keeps a record per link target in OUT/gn-thinlto/hook_state.pickle: a key (the
target's project.json data and everything build-wide the planner reads: the config, GN's rules and toolchain
variables, the remote settings, this code), the digest of every GN ninja file its planning read (its own link
edge's file, and the files of the edges producing its inputs and archive members), the inputs no GN edge
produced, the outcome (planned, refused, …, with what the build-wide files need), and the size and mtime of
each file it wrote. A link whose key and read files are unchanged, none of whose unproduced inputs a changed
file now produces, and whose written files are as the hook left them, is kept as it was: neither planned nor
rendered nor written. Every other link is planned and rendered as a full run would, its files written only when
their content changed. The build-wide files (rules, target list, shared backends, GN's edited files) are made
from the outcomes of all links, kept or new, by the same functions as a full run: the files are the same bytes
(tests/integration/test_regen_equivalence.py checks a sequence of edits against full runs).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

import gn_thinlto
import thinlto_base
from gn_thinlto.gn.ninja_text import NinjaFile
from gn_thinlto.gn.project import GnProject, GnTarget, GnTool
from gn_thinlto.plan.config import Config
from gn_thinlto.plan.links import GnGraph, InputClassifier, Producer, lazy_index
from gn_thinlto.plan.model import Backend, GraphPlan, LinkOutcome, LinkStatus, RemoteBackends
from gn_thinlto.plan.planner import assemble, link_targets, minimized_path, plan_link
from gn_thinlto.render import records_json
from gn_thinlto.render.ninja import STEP_DIR, build_files, shared_files, target_files
from gn_thinlto.render.templating import TEMPLATE_PACKAGE
from thinlto_base.fsutil import write_if_changed

STATE_FILE = "gn-thinlto/hook_state.pickle"
STATE_FORMAT = 1


@dataclass
class LinkRecord:
    key: str
    reads: dict[str, str]  # GN ninja file -> digest of its text, for each file the link's planning read
    unproduced: frozenset[str]  # inputs of its link edge that no GN edge produced
    outcome: LinkOutcome  # without the full plan
    files: dict[str, tuple[int, int]]  # each file written for this link -> (size, mtime_ns) after the run


@dataclass
class HookState:
    key: str  # the build-wide part of every link's key
    digests: dict[str, str] = field(default_factory=dict)  # every GN ninja file -> digest of its text
    links: dict[str, LinkRecord] = field(default_factory=dict)
    shared_files: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Regeneration:
    plan: GraphPlan
    planned: int  # links planned in this run (the others were kept from the last run)
    written: int  # files written because their content changed


def text_digest(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def _code_digest() -> str:
    """This package's planning and rendering code (with the build steps' path formulas and the cache's naming
    rules it uses) and templates: a changed gn-thinlto plans everything again."""
    root = Path(gn_thinlto.__file__).parent
    cache = Path(thinlto_base.__file__).parent
    templates = Path(str(resources.files(TEMPLATE_PACKAGE)))
    h = hashlib.sha1(usedforsecurity=False)
    for path in sorted([*root.glob("*.py"), *root.glob("plan/*.py"), *root.glob("render/*.py"),
                        *root.glob("gn/*.py"), *root.glob("steps/*.py"), *cache.glob("*.py"),
                        *templates.glob("*.j2")]):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def build_key(project: GnProject, toolchains: Mapping[str, NinjaFile], config: Config, python: str,
              remote: RemoteBackends | None, step_dir: str) -> str:
    """What every link's plan depends on besides its own data: GN's rules and toolchain variables (not the
    toolchain's list of subninjas, which every added target changes), the config, the interpreter, the remote
    settings, this code."""
    rules = sorted((n, repr(t.variables), repr(t.rules)) for n, t in toolchains.items())
    parts = (STATE_FORMAT, _code_digest(), project.build_dir, project.root_path, project.default_toolchain, rules,
             repr(replace(config, source="")), python, repr(remote), step_dir)  # not where the config file is
    return hashlib.sha1(repr(parts).encode(), usedforsecurity=False).hexdigest()


def _link_key(build: str, target: GnTarget) -> str:
    return hashlib.sha1(f"{build}\0{target!r}".encode(), usedforsecurity=False).hexdigest()


def load_state(out_dir: Path) -> HookState | None:
    """The last run's state, or None (none, unreadable or from another format: everything is planned)."""
    try:
        with open(out_dir / STATE_FILE, "rb") as f:
            state = pickle.load(f)
    except Exception:  # a missing, unreadable or outdated state only costs a full run
        return None
    return state if isinstance(state, HookState) else None


def save_state(out_dir: Path, state: HookState) -> None:
    write_if_changed(out_dir / STATE_FILE, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _unchanged(out_dir: Path, files: Mapping[str, tuple[int, int]]) -> bool:
    return all(_stat(out_dir / rel) == seen for rel, seen in files.items())


InputReads = tuple[frozenset[str], frozenset[str]]  # (GN files read, paths no GN edge produces)


def _input_reads(path: str, producers: Mapping[str, Producer], minimized: bool) -> InputReads:
    """What classifying link input PATH reads: the edge producing it and, for an archive, its members' edges."""
    files: set[str] = set()
    unproduced: set[str] = set()

    def read(p: str) -> Producer | None:
        found = producers.get(p)
        if found is None:
            unproduced.add(p)
        else:
            files.add(found.file)
        return found

    producer = read(path)
    archive = producer is not None and GnTool.of_rule(producer.edge.rule) is GnTool.ALINK
    for o in producer.edge.inputs if producer is not None and archive else (path,):
        if (o is path or read(o) is not None) and minimized and o.endswith(".o"):
            read(minimized_path(o))
    return frozenset(files), frozenset(unproduced)


def link_reads(target: GnTarget, outcome: LinkOutcome, producers: Mapping[str, Producer], project: GnProject,
               minimized: bool, memo: dict[str, InputReads]) -> tuple[set[str], set[str]]:
    """The GN ninja files TARGET's planning read, and its link inputs no GN edge produces. Not-ThinLTO and
    excluded links read only their own link edge; the others also the edges producing their inputs (for an
    archive, its members) and, with minimized bitcode, the thin-link objects. MEMO keeps each input's reads
    for the other links that name it."""
    files = {project.target_ninja(target)}
    unproduced: set[str] = set()
    own = producers.get(target.outputs[0])
    if own is None:
        return files, {target.outputs[0]}
    files.add(own.file)
    if outcome.status in (LinkStatus.NOT_THINLTO, LinkStatus.EXCLUDED):
        return files, unproduced
    for path in own.edge.inputs:
        hit = memo.get(path)
        if hit is None:
            hit = memo[path] = _input_reads(path, producers, minimized)
        files |= hit[0]
        unproduced |= hit[1]
    return files, unproduced


def regenerate(out_dir: Path, graph: GnGraph, texts: Mapping[str, str], toolchains: Mapping[str, NinjaFile],
               config: Config, python: str, remote: RemoteBackends | None, step_dir: str = STEP_DIR,
               step_launcher: str = "", step_servers: int = 1) -> Regeneration:
    """Plan GRAPH's links (only the changed ones when OUT has a usable state), write gn-thinlto's files whose
    content changed, save the state for the next run, and return the plan. Each link's full plan is dropped
    once its files are written (the hook's memory holds one link's backends at a time): the plan returned has
    every link's summary (`links`) and no `targets`."""
    build = build_key(graph.project, toolchains, config, python, remote, step_dir)
    digests = {name: text_digest(text) for name, text in texts.items()}
    old = load_state(out_dir)
    if old is None or old.key != build:
        old = HookState(build)
    changed = [n for n, d in digests.items() if old.digests.get(n) != d]
    producers, rules, prefetch = lazy_index(graph, [*toolchains, *changed])
    classifier = InputClassifier(graph, producers, rules)
    new_outputs: set[str] | None = None  # outputs of the changed files, computed when first needed

    def newly_produced(paths: frozenset[str]) -> bool:
        nonlocal new_outputs
        if new_outputs is None:
            new_outputs = {o for n in changed for e in graph.ninja[n].edges for o in e.outputs}
        return not new_outputs.isdisjoint(paths)

    settings = GraphPlan(targets=(), refusals=(), python=python, remote=remote)
    state = HookState(build, digests)
    interned: dict[str, Backend] = {}
    input_reads: dict[str, InputReads] = {}
    outcomes: list[LinkOutcome] = []
    planned = written = 0
    targets = link_targets(graph.project)
    shared_changed = set(old.links) != {t.label for t in targets}
    for target in targets:
        key = _link_key(build, target)
        rec = old.links.get(target.label)
        if (rec is not None and rec.key == key and all(digests.get(f) == d for f, d in rec.reads.items())
                and not (rec.unproduced and newly_produced(rec.unproduced)) and _unchanged(out_dir, rec.files)):
            state.links[target.label] = rec
            outcomes.append(rec.outcome)
            continue
        for name in rec.reads if rec is not None else ():
            prefetch(name)
        outcome = plan_link(target, graph, config, producers, rules, classifier, interned)
        planned += 1
        files: dict[str, tuple[int, int]] = {}
        if outcome.plan is not None:
            t = outcome.plan
            rendered = target_files(settings, t)
            if t.thin_link is not None:
                rendered[t.thin_link.manifest_path] = records_json.dumps(t.thin_link.manifest, indent=1) + "\n"
            for rel, text in rendered.items():
                written += write_if_changed(out_dir / rel, text)
                files[rel] = _stat(out_dir / rel) or (-1, -1)
        reads, unproduced = link_reads(target, outcome, producers, graph.project, config.minimized_bitcode,
                                       input_reads)
        kept = replace(outcome, plan=None)  # its shared backends are the objects of `interned`: pickled once
        state.links[target.label] = LinkRecord(key, {f: digests.get(f, "") for f in sorted(reads)},
                                               frozenset(unproduced), kept, files)
        outcomes.append(kept)
        shared_changed = shared_changed or bool(outcome.shared) or bool(rec is not None and rec.outcome.shared)
    plan = replace(assemble(outcomes, config, python), remote=remote, step_launcher=step_launcher,
                   step_servers=step_servers)
    for rel, text in build_files(plan, step_dir=step_dir).items():
        written += write_if_changed(out_dir / rel, text)
    if plan.shared_backends:
        # The shared backends are the union of the null-index links' own: rendered again (40,000 edges for a
        # Chromium-sized set of tests) only when one of those links was planned again, added or removed.
        if shared_changed or not old.shared_files or not _unchanged(out_dir, old.shared_files):
            rendered = shared_files(plan)
            for rel, text in rendered.items():
                written += write_if_changed(out_dir / rel, text)
            state.shared_files = {rel: _stat(out_dir / rel) or (-1, -1) for rel in rendered}
        else:
            state.shared_files = old.shared_files
    save_state(out_dir, state)
    return Regeneration(plan, planned, written)

