"""The planner: GN's data (project.json + GN's ninja files, parsed) and a Config in, a GraphPlan out. Pure."""

from __future__ import annotations

import functools
import hashlib
import itertools
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gn_thinlto.errors import GnThinltoError
from gn_thinlto.gn.ninja_text import Rule, evaluate_rule_binding
from gn_thinlto.gn.project import GnProject, GnTarget
from gn_thinlto.plan import linkline
from gn_thinlto.plan.config import AUTO_PARTITIONS, Config, TestonlyMode
from gn_thinlto.plan.linkline import LtoMode, Refused
from gn_thinlto.plan.links import GnGraph, GnLink, InputClassifier, LinkInput, Producer, gn_link, producers_of, rules_of
from gn_thinlto.plan.lld_options import backend_flag_files
from gn_thinlto.plan.model import (
    Backend,
    BackendCommand,
    FinalLink,
    GraphPlan,
    InputKind,
    LinkOutcome,
    LinkStatus,
    Refusal,
    TargetPlan,
    TargetSummary,
    ThinLink,
    ThinLinkManifest,
)
from gn_thinlto.steps.thinlink_paths import INDEX_SUFFIX, PARTITION_DIR, index_paths, partition_paths
from thinlto_base.policy import PolicyError, parse_policy
from thinlto_base.split_dwarf import split_dwarf_file
from thinlto_base.two_step import CODEGEN_OPTION, codegen_only

__all__ = ["GnGraph", "assemble", "plan_graph", "plan_link", "plan_target", "selected_links", "target_directory"]


def target_directory(config: Config, target: GnTarget) -> str:
    output = target.outputs[0].removeprefix("./")
    label = target.label_no_toolchain
    return posixpath.normpath(
        config.target_dir.format(output=output, name=label.split(":")[-1], dir=label[2:].split(":")[0] or ".")
    )


def _replace_output(argv: Sequence[str], new: str) -> list[str]:
    out = list(argv)
    if "-o" not in out or out.index("-o") + 1 >= len(out):
        raise Refused("link command has no '-o OUTPUT'")
    out[out.index("-o") + 1] = new
    return out


_GROUP_FLAGS = frozenset({"-Wl,--start-group", "-Wl,--end-group", "-Wl,-(", "-Wl,-)"})


def _without_groups(argv: Sequence[str]) -> list[str]:
    """lld refuses --start-lib inside --start-group; lld resolves archives without groups anyway."""
    return [a for a in argv if a not in _GROUP_FLAGS]


def _thin_link_items(inputs: Sequence[LinkInput], whole_archive: bool) -> tuple[list[str], bool]:
    items: list[str] = []
    lazy = False
    for inp in inputs:
        if not inp.is_archive or whole_archive:
            items += inp.objects
        else:
            items += ("-Wl,--start-lib", *inp.objects, "-Wl,--end-lib")
            lazy = True
    return items, lazy


def _final_items(
    inputs: Sequence[LinkInput], native_of: Mapping[str, str], whole_archive: bool, null_index: bool
) -> tuple[list[str], bool]:
    """The final link's static inputs: every non-bitcode input in order, native archive members still lazy.

    With a thin link, the natives of the used bitcode are appended at build time in the thin link's order,
    after all other inputs, which is where lld's in-process ThinLTO puts its outputs (same layout). Without
    a thin link (null index) every bitcode object's native takes its place, and archives stay wholly lazy.
    """
    items: list[str] = []
    lazy = False
    for inp in inputs:
        if inp.kind is InputKind.BITCODE:
            if null_index:
                items.append(native_of[inp.path])
        elif not inp.is_archive:
            items.append(inp.path)
        elif null_index and not whole_archive:
            items.extend(("-Wl,--start-lib", *(native_of.get(m, m) for m, _ in inp.members), "-Wl,--end-lib"))
            lazy = True
        else:
            members = [native_of[m] if null_index and k is InputKind.BITCODE else m
                       for m, k in inp.members if null_index or k is not InputKind.BITCODE]
            if members and whole_archive:
                items.extend(members)
            elif members:
                items.extend(("-Wl,--start-lib", *members, "-Wl,--end-lib"))
                lazy = True
    return items, lazy


def _eager(inp: LinkInput, whole_archive: bool) -> tuple[str, ...]:
    """Inputs the link loads unconditionally: plain inputs, and archive members under --whole-archive."""
    return inp.objects if not inp.is_archive or whole_archive else ()


def _bitcode_objects(inputs: Sequence[LinkInput]) -> list[str]:
    return list(dict.fromkeys(itertools.chain.from_iterable(inp.bitcode for inp in inputs)))


def _backend_command(f: _LinkFacts) -> BackendCommand:
    """F's backend command: one clang run when lld's code generation level is its optimization level, else the
    backend step's two-step form (thinlto_base.keys.BackendJob: clang cannot set them apart). Its inputs: the
    files the routed flags name, and the flag values the link declares as inputs (_inputs)."""
    cg, opt = f.analysis.cg_opt_level, f.analysis.opt_level
    two_step = (f"{CODEGEN_OPTION}{cg}",) if cg != opt else ()
    flags = ("-Wno-unused-command-line-argument", *f.flags)
    return BackendCommand((*two_step, f.compiler, "-c", "-x", "ir"), flags, _inputs(f, flags))


def flag_inputs(flags: Sequence[str], declared: Sequence[str] = (), out_dir: str = "/") -> tuple[str, ...]:
    """The files backend FLAGS name that ninja must know of: the routed flags' files (a sample profile, a
    basic-block sections list), then each value (`-flag=V`, `-mllvm -opt=V`, a separate V) that DECLARED holds,
    paths compared as absolute ones under OUT_DIR (a flag may name `/src/x.txt`, ninja `../x.txt`)."""
    def absolute(path: str) -> str:
        return posixpath.normpath(posixpath.join(out_dir, path))

    known = {absolute(d): d for d in declared}
    values = (f.rsplit("=", 1)[-1] if f.startswith("-") else f for f in flags)
    named = [known[absolute(v)] for v in values if v and absolute(v) in known]
    routed = [known.get(absolute(f), f) for f in backend_flag_files(flags)]  # one file, one name: the link's
    return tuple(dict.fromkeys((*routed, *named)))


def _inputs(f: _LinkFacts, flags: Sequence[str]) -> tuple[str, ...]:
    """The files F's backends with FLAGS depend on besides their bitcode and index: flag_inputs, with the files
    F's link declares (GN `inputs`: ninja's implicit inputs of its edge)."""
    return flag_inputs(flags, f.link.edge.implicit, f.out_dir)


def _index_dir(tdir: str) -> str:
    """Where a thin-linked target keeps its index and imports files (the backends read them from there)."""
    return f"{tdir}/index"


def _native_dir(tdir: str) -> str:
    """Where a thin-linked target's backends write their natives: NATIVE_DIR/BITCODE."""
    return f"{tdir}/native"


def _shared_dir(command: BackendCommand) -> str:
    """Where null-index backends of COMMAND go, shared by the links with the same command: its inputs too, so
    that two links declaring other files for the same flags never make one edge twice."""
    extra = ("", *command.inputs) if command.inputs else ()  # none: the directory it always had
    digest = hashlib.sha256("\0".join((*command.head, *command.flags, *extra)).encode()).hexdigest()[:12]
    return f"gn-thinlto/shared/{digest}"


@dataclass(frozen=True)
class _LinkFacts:
    """What plan_target learned about one link, shared by its edge builders."""

    target: GnTarget
    link: GnLink
    inputs: tuple[LinkInput, ...]
    analysis: linkline.LinkAnalysis
    bitcode: tuple[str, ...]
    flags: tuple[str, ...]
    compiler: str
    tdir: str
    null_index: bool
    out_dir: str  # the build directory's absolute path (GN's root_path and build_dir), to compare paths


def _analyze(target: GnTarget, graph: GnGraph, config: Config, producers: Mapping[str, Producer],
             rules: Mapping[str, Rule], classifier: InputClassifier) -> _LinkFacts:
    link = gn_link(target, graph, producers, rules, config.link_wrappers)
    inputs = classifier.classify_all(link.edge.inputs)
    analysis = _analysis(tuple(link.inner(())))  # inputs are paths, never flags: the same analysis for every link
    linkline.check_shell_free([i.path for i in inputs])  # with the same flags
    if analysis.lto is not LtoMode.THIN:
        raise Refused("the link command turns ThinLTO off again (-fno-lto or -flto=full after -flto=thin)")
    bitcode = tuple(_bitcode_objects(inputs))
    if not bitcode:
        raise Refused("no ThinLTO bitcode among the link inputs")
    null_index = target.testonly and config.testonly is TestonlyMode.SHARED_NULL_INDEX
    if null_index and analysis.split_lto_unit:
        raise Refused("testonly shared null-index backends cannot serve CFI/split LTO units (they need the thin link)")
    flags = linkline.apply_overrides(analysis.backend_flags, config.backend_flags_add, config.backend_flags_remove)
    out_dir = posixpath.join(graph.project.root_path, graph.project.build_dir.removeprefix("//"))
    return _LinkFacts(target, link, inputs, analysis, bitcode, flags, linkline.backend_compiler(link.before[0]),
                      target_directory(config, target), null_index, out_dir)


@functools.lru_cache(maxsize=256)
def _analysis(argv: tuple[str, ...]) -> linkline.LinkAnalysis:
    return linkline.analyze(argv)


def _backends(f: _LinkFacts, native_of: Mapping[str, str], shared: dict[str, Backend]) -> tuple[Backend, ...]:
    """F's backends; a null-index backend is taken from SHARED when another link made it (same native: same
    flags, same bitcode), else made and added there."""
    command = _backend_command(f)
    if f.null_index:
        made = []
        for b in f.bitcode:
            native = native_of[b]
            backend = shared.get(native)
            if backend is None:
                dwo = split_dwarf_file(command.flags, native) if f.analysis.split_dwarf else ""
                backend = shared[native] = Backend(b, "", native, command, dwo)
            made.append(backend)
        return tuple(made)
    index = f"{_index_dir(f.tdir)}/"  # index_paths' kept index, without a call per object
    if f.analysis.split_dwarf:
        return tuple(Backend(b, f"{index}{b}{INDEX_SUFFIX}", native_of[b], command,
                             split_dwarf_file(command.flags, native_of[b])) for b in f.bitcode)
    return tuple(Backend(b, f"{index}{b}{INDEX_SUFFIX}", native_of[b], command) for b in f.bitcode)


def _partition_count(f: _LinkFacts, config: Config) -> tuple[int, str]:
    """(partition edges, "auto" or "fixed") for F's regular-LTO module; (0, "") when the thin link compiles it.

    A link without split LTO units (no CFI, no whole-program devirtualization) has no regular-LTO module to
    speak of: it keeps today's path. The link's own --lto-partitions=N is what lld would do in-process; it
    wins over `auto`. lld --thinlto-index-only keeps only the first of N > 1 partitions, so such a link cannot
    stay with the thin link."""
    asked = f.analysis.lto_partitions
    if config.lto_partitions == "off":
        if asked > 1:
            raise Refused(f"the link asks for --lto-partitions={asked}, which needs partition edges "
                          "(lto_partitions: off in the config)")
        return 0, ""
    if not f.analysis.split_lto_unit:
        if asked > 1:
            raise Refused(f"--lto-partitions={asked} without split LTO units (-fsplit-lto-unit, CFI or "
                          "whole-program devirtualization): no regular-LTO module gn-thinlto can see at gen time")
        return 0, ""
    if asked:
        return asked, "fixed"
    if config.lto_partitions == "auto":
        return AUTO_PARTITIONS, "auto"
    return int(config.lto_partitions), "fixed"


def _partition_backends(f: _LinkFacts, count: int) -> tuple[Backend, ...]:
    """The edges compiling partitions 0…COUNT-1 of F's regular-LTO module, as lld's code generation does it
    (thinlto_base.two_step: the module is already optimized; checked byte for byte against lld's partitions)."""
    flags = ("-Wno-unused-command-line-argument", *codegen_only(f.flags, f.analysis.cg_opt_level))
    command = BackendCommand((f.compiler, "-c", "-x", "ir"), flags, _inputs(f, flags))
    out = []
    for k in range(count):
        bitcode, native = partition_paths(_partition_dir(f.tdir), k)
        dwo = split_dwarf_file(command.flags, native) if f.analysis.split_dwarf else ""
        out.append(Backend(bitcode, "", native, command, dwo))
    return tuple(out)


def _partition_dir(tdir: str) -> str:
    return f"{tdir}/{PARTITION_DIR}"


def _final_argv(f: _LinkFacts, final_rsp: str, lazy: bool) -> tuple[str, ...]:
    """GN's link command, wrapper and all, with our response file as its inputs (no groups around --start-lib)."""
    inner = f.link.inner([f"@{final_rsp}"])
    return (*f.link.wrapper, *(_without_groups(inner) if lazy else inner), *f.link.tail)


def plan_target(
    target: GnTarget, graph: GnGraph, config: Config, producers: Mapping[str, Producer], rules: Mapping[str, Rule],
    classifier: InputClassifier | None = None, shared: dict[str, Backend] | None = None,
) -> tuple[TargetPlan, tuple[Backend, ...]]:
    """Plan one link target; raises Refused when it must stay GN's in-process link. Returns shared backends too.

    CLASSIFIER, shared by the links of one plan, classifies each input once (default: a new one); SHARED, the
    null-index backends made so far (by native), gives the links of a plan one Backend per shared job."""
    classifier = classifier or InputClassifier(graph, producers, rules)
    shared = {} if shared is None else shared
    f = _analyze(target, graph, config, producers, rules, classifier)
    link, output = f.link, target.outputs[0]
    command = _backend_command(f)
    native_root = _shared_dir(command) if f.null_index else _native_dir(f.tdir)
    native_of = {b: f"{native_root}/{b}" for b in f.bitcode}
    final_items, final_lazy = _final_items(f.inputs, native_of, link.whole_archive, f.null_index)
    final_rsp = f"{f.tdir}/final.rsp"
    final_argv = _final_argv(f, final_rsp, final_lazy)
    non_bitcode = [i.path for i in f.inputs if i.kind is not InputKind.BITCODE and not i.is_archive]
    non_bitcode += itertools.chain.from_iterable(i.other_members for i in f.inputs)
    description = f"LINK {output} (ThinLTO final link)"
    backends = _backends(f, native_of, shared)

    def target_plan(thin_link: ThinLink | None, backends: tuple[Backend, ...], final_link: FinalLink) -> TargetPlan:
        return TargetPlan(label=target.label, output=output, directory=f.tdir, ninja_file=f"{f.tdir}/build.ninja",
                          gn_ninja_file=link.file, gn_edge_lines=(link.edge.first_line, link.edge.last_line),
                          thin_link=thin_link, backends=backends, final_link=final_link,
                          cache_policy=f.analysis.cache_policy)

    if f.null_index:
        final = FinalLink(link.edge.outputs, (*non_bitcode, *(native_of[b] for b in f.bitcode)),
                          link.edge.implicit, link.edge.order_only, final_argv, "", final_rsp, tuple(final_items),
                          description, link.restat, link.pool, ninja_writes_rsp=True, driver_at=len(link.wrapper))
        return target_plan(None, (), final), backends
    minimized = _minimized(f.bitcode, producers) if config.minimized_bitcode else {}
    dyndep = f"{f.tdir}/final.dd" if config.dyndep else ""
    partitions = _partition_count(f, config)
    partition_backends = _partition_backends(f, partitions[0])
    thin = _thin_link(target, link, f.inputs, f.analysis, f.tdir, f.bitcode, native_of, final_rsp, minimized,
                      dyndep, partitions)
    if dyndep:
        # Only the dyndep file links the final link to the thin link: ninja loads a dyndep file when the node
        # is finished, but would schedule the final link as soon as any other output of the same edge is.
        after_thin_link: tuple[str, ...] = (dyndep,)
    else:
        # No dyndep: wait for the response file the thin link writes, and for every backend (the natives of
        # unused lazy members are empty objects, compiled from lld's skip-flagged index files).
        after_thin_link = (final_rsp, *(native_of[b] for b in f.bitcode), *(p.native for p in partition_backends))
    final = FinalLink(link.edge.outputs, tuple(non_bitcode), (*link.edge.implicit, *after_thin_link),
                      link.edge.order_only, final_argv, dyndep, final_rsp, (), description, link.restat, link.pool,
                      driver_at=len(link.wrapper))
    return target_plan(thin, (*backends, *partition_backends), final), ()


MINIMIZED_SUFFIX = ".thinlink.o"


def minimized_path(bitcode: str) -> str:
    """Where a toolchain writes X.o's minimized thin-link bitcode (-Xclang -fthin-link-bitcode=X.thinlink.o).

    Not `.bc`: the clang driver would compile a `.bc` link input instead of passing it to the linker."""
    return bitcode.removesuffix(".o") + MINIMIZED_SUFFIX


def _minimized(bitcode: Sequence[str], producers: Mapping[str, Producer]) -> dict[str, str]:
    out = {}
    for b in bitcode:
        m = minimized_path(b)
        if not b.endswith(".o") or m not in producers or producers[m].edge.outputs[0] != b:
            raise Refused(f"minimized_bitcode is on, but the compile of {b} does not also write {m}")
        out[b] = m
    return out


def _thin_link(target: GnTarget, link: GnLink, inputs: Sequence[LinkInput], analysis: linkline.LinkAnalysis,
               tdir: str, bitcode: Sequence[str], native_of: Mapping[str, str],
               final_rsp: str, minimized: Mapping[str, str], dyndep: str,
               partitions: tuple[int, str] = (0, "")) -> ThinLink:
    stage = f"{tdir}/stage"
    items, lazy = _thin_link_items(inputs, link.whole_archive)
    if minimized:
        items = [minimized.get(i, i) for i in items]
    rsp = f"{tdir}/thinlink.rsp"
    argv = _replace_output(link.inner([f"@{rsp}"]), f"{tdir}/thinlink.out")
    if lazy:
        argv = _without_groups(argv)
    argv = [a for a in argv if a not in analysis.thin_link_drop]
    staged_used = f"{stage}/used.txt"
    argv += [f"-Wl,--thinlto-index-only={staged_used}", "-Wl,--thinlto-emit-imports-files",
             f"-Wl,--thinlto-prefix-replace=;{stage}/", f"-Wl,--why-extract={stage}/why-extract.txt"]
    if minimized:  # lld names index files and modules after the full objects (X.thinlink.o -> X.o)
        argv.append(f"-Wl,--thinlto-object-suffix-replace={MINIMIZED_SUFFIX};.o")
    # Always ask for the regular-LTO part (CFI / split LTO units put code there); lld writes an empty object
    # when there is none, and the step then leaves it out of the final link.
    split = (f"{stage}/lto.split.o", f"{tdir}/lto.split.o")
    argv.append(f"-Wl,--lto-obj-path={split[0]}")
    index_dir = _index_dir(tdir)
    objects = list(itertools.chain.from_iterable(i.objects for i in inputs))
    if minimized:
        objects = [minimized.get(p, p) for p in objects]
    files_read = (*objects, *(i for i in items if not i.startswith("-")), *link.edge.implicit)
    manifest = ThinLinkManifest(
        target=target.label, argv=tuple(argv), rsp_path=rsp,
        rsp_lines=tuple(items), stage_dir=stage, staged_used_list=staged_used,
        used_list=f"{tdir}/used.txt", bitcode=tuple(bitcode), index_dir=index_dir, split_object=split,
        final_output=link.edge.outputs[0],
        final_rsp=final_rsp, why_extract=f"{stage}/why-extract.txt",
        eager_inputs=tuple(itertools.chain.from_iterable(_eager(i, link.whole_archive) for i in inputs)),
        lazy_natives=() if link.whole_archive else tuple(itertools.chain.from_iterable(
            i.other_members for i in inputs)),
        native_dir=_native_dir(tdir),  # native_of[b] for every b (plan_target puts them there)
        dyndep=dyndep, minimized=tuple(sorted((v, k) for k, v in minimized.items())),
        inputs=tuple(dict.fromkeys(files_read)), state=f"{tdir}/thinlink.state.json",
        partition_dir=_partition_dir(tdir) if partitions[0] else "", partitions=partitions[0],
        partition_mode=partitions[1],
    )
    implicit_outputs = [f for b in bitcode for f in index_paths(stage, index_dir, b)[2:]] + [split[1]]
    implicit_outputs += [partition_paths(_partition_dir(tdir), k)[0] for k in range(partitions[0])]
    manifest_path = f"{tdir}/thinlink.json"
    return ThinLink(
        outputs=(manifest.used_list, final_rsp, *((dyndep,) if dyndep else ())),
        implicit_outputs=tuple(implicit_outputs),
        inputs=tuple(dict.fromkeys(objects)), implicit=(manifest_path, *link.edge.implicit),
        order_only=link.edge.order_only, manifest_path=manifest_path, manifest=manifest,
        description=f"THINLINK {link.edge.outputs[0]}",
    )


def link_targets(project: GnProject) -> list[GnTarget]:
    return [t for _, t in sorted(project.targets.items()) if t.type.is_link and t.outputs]


def selected_links(project: GnProject, config: Config) -> list[GnTarget]:
    return [t for t in link_targets(project) if config.selects(t.label_no_toolchain)]


def mentions_thin_lto(target: GnTarget, graph: GnGraph, producers: Mapping[str, Producer],
                      rules: Mapping[str, Rule]) -> bool:
    """Whether `-flto=thin` appears anywhere in TARGET's evaluated link: its ldflags, the tool's command (a
    build arg may put it there) or the response file. Such a link is ThinLTO: planned, or refused with a reason."""
    if "-flto=thin" in target.ldflags:
        return True
    producer = producers.get(target.outputs[0])
    rule = rules.get(producer.edge.rule) if producer is not None else None
    if producer is None or rule is None:
        return False
    file_vars = graph.ninja[producer.file].variables
    return any("-flto=thin" in evaluate_rule_binding(rule, key, producer.edge, file_vars)
               for key in ("command", "rspfile_content"))


def backend_cache_policy(config: Config, targets: Sequence[TargetSummary]) -> str:
    """The config's cache_policy, else the first planned link's (by label) --thinlto-cache-policy: a project
    that bounds lld's cache bounds ours alike. Raises GnThinltoError naming the flag when it does not parse."""
    if config.cache_policy:
        return config.cache_policy
    for t in sorted(targets, key=lambda t: t.label):
        if t.cache_policy:
            try:
                parse_policy(t.cache_policy)
            except PolicyError as e:
                raise GnThinltoError(f"{t.label}: -Wl,--thinlto-cache-policy={t.cache_policy}: {e}") from None
            return t.cache_policy
    return ""


def plan_link(target: GnTarget, graph: GnGraph, config: Config, producers: Mapping[str, Producer],
              rules: Mapping[str, Rule], classifier: InputClassifier, shared: dict[str, Backend]) -> LinkOutcome:
    """What becomes of one link target: not ThinLTO, excluded by the config, refused (GN keeps its link) or
    planned (CLASSIFIER and SHARED as for plan_target)."""
    if not mentions_thin_lto(target, graph, producers, rules):
        return LinkOutcome(target.label, LinkStatus.NOT_THINLTO)
    if not config.selects(target.label_no_toolchain):
        return LinkOutcome(target.label, LinkStatus.EXCLUDED)
    try:
        plan, backends = plan_target(target, graph, config, producers, rules, classifier, shared)
    except Refused as e:
        return LinkOutcome(target.label, LinkStatus.REFUSED, refusal=Refusal(target.label, target.outputs[0], e.reason))
    return LinkOutcome(target.label, LinkStatus.PLANNED, TargetSummary.of(plan), plan, backends)


def plan_graph(graph: GnGraph, config: Config, python: str) -> GraphPlan:
    """Plan every selected link target; refusals keep GN's edge and carry their reason."""
    producers = producers_of(graph)
    rules = rules_of(graph)
    classifier = InputClassifier(graph, producers, rules)
    shared: dict[str, Backend] = {}
    outcomes = [plan_link(t, graph, config, producers, rules, classifier, shared) for t in link_targets(graph.project)]
    return assemble(outcomes, config, python)


def assemble(outcomes: Sequence[LinkOutcome], config: Config, python: str) -> GraphPlan:
    """The GraphPlan of every link target's outcome (given in label order)."""
    by_status: dict[LinkStatus, list[LinkOutcome]] = {s: [] for s in LinkStatus}
    shared: dict[str, Backend] = {}
    for o in outcomes:
        by_status[o.status].append(o)
        for b in o.shared:
            shared.setdefault(b.native, b)
    links = [o.summary for o in by_status[LinkStatus.PLANNED] if o.summary is not None]
    dirs = [t.directory for t in links]
    if len(set(dirs)) != len(dirs):
        dup = sorted(d for d in set(dirs) if dirs.count(d) > 1)[0]
        raise GnThinltoError(f"target_dir {config.target_dir!r} gives two targets the directory {dup}")
    # ninja (1.11) starts ready edges in the order they were declared, so the links with the most backends
    # come first: their thin link, backends and final link are the longest chain of an incremental build.
    links.sort(key=lambda t: (-t.backend_count, t.label))
    order = {t.label: n for n, t in enumerate(links)}
    targets = sorted((o.plan for o in by_status[LinkStatus.PLANNED] if o.plan is not None),
                     key=lambda t: order[t.label])
    return GraphPlan(
        targets=tuple(targets), links=tuple(links),
        refusals=tuple(o.refusal for o in by_status[LinkStatus.REFUSED] if o.refusal is not None),
        cache_policy=backend_cache_policy(config, links),
        not_thinlto=tuple(o.label for o in by_status[LinkStatus.NOT_THINLTO]),
        excluded=tuple(o.label for o in by_status[LinkStatus.EXCLUDED]),
        shared_backends=tuple(shared[k] for k in sorted(shared)), python=python,
        cache_dir=config.cache_dir if config.backend_cache else "", thin_link_pool_depth=config.thin_link_pool_depth,
        cache_trusted_writers=config.cache_trusted_writers,
    )
