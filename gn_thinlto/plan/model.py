"""The plan: frozen records describing every edge gn-thinlto adds to the ninja graph (no behaviour here)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from gn_thinlto.steps.thinlink_paths import index_paths


class InputKind(enum.Enum):
    """How one link input is treated by the thin link and the final link."""

    BITCODE = "bitcode"  # ThinLTO bitcode object: indexed by the thin link, replaced by its native object
    NATIVE = "native"  # native object (assembly, non-LTO C/C++): passed unchanged
    OTHER = "other"  # shared library, prebuilt archive, linker script: passed unchanged


@dataclass(frozen=True)
class IndexFiles:
    """Where lld writes one bitcode object's index and imports files, and where gn-thinlto keeps them."""

    bitcode: str
    staged_index: str
    staged_imports: str
    index: str
    imports: str


@dataclass(frozen=True)
class ThinLinkManifest:
    """Everything the thin-link step needs at build time (written as JSON next to the target's ninja file)."""

    target: str
    argv: tuple[str, ...]
    rsp_path: str
    rsp_lines: tuple[str, ...]
    stage_dir: str
    staged_used_list: str
    used_list: str
    bitcode: tuple[str, ...]  # every bitcode object of the link, in order
    index_dir: str  # where lld's index and imports files for bitcode B are kept: INDEX_DIR/B.thinlto.bc, .imports
    split_object: tuple[str, str]  # (staged, kept) regular-LTO object (--lto-obj-path)
    final_output: str
    final_rsp: str
    why_extract: str
    eager_inputs: tuple[str, ...]  # inputs loaded unconditionally, in order (bitcode included)
    lazy_natives: tuple[str, ...]  # native members of lazily loaded archives, in order
    native_dir: str  # bitcode B's native object is NATIVE_DIR/B
    dyndep: str  # empty: no dyndep file (config dyndep: false)
    minimized: tuple[tuple[str, str], ...] = ()  # (minimized thin-link input, full bitcode)
    # Every file the thin link reads that ninja or the response file names (objects, archive members, archives,
    # GN's implicit inputs): their contents and the manifest decide whether lld must run again.
    inputs: tuple[str, ...] = ()
    state: str = ""  # the step's record of the last successful run (fingerprint and per-file digests)
    # The regular-LTO module's partition edges (0: none, the thin link compiles the module itself): the thin
    # link writes PARTITION_DIR/part<K>.bc for each (steps/partitions.py), "auto" choosing how many it fills.
    partition_dir: str = ""
    partitions: int = 0
    partition_mode: str = ""  # "auto" or "fixed" (as lld's --lto-partitions=N)

    # Each object is named once in the manifest (a 30,000-object link's manifest is as large as its ninja
    # file otherwise); its index, imports and native paths follow from it, as the thin-link step derives them.
    @property
    def index_files(self) -> tuple[IndexFiles, ...]:
        return tuple(IndexFiles(b, *index_paths(self.stage_dir, self.index_dir, b)) for b in self.bitcode)

    @property
    def natives(self) -> tuple[tuple[str, str], ...]:
        return tuple((b, f"{self.native_dir}/{b}") for b in self.bitcode)


@dataclass(frozen=True)
class ThinLink:
    outputs: tuple[str, ...]
    implicit_outputs: tuple[str, ...]
    inputs: tuple[str, ...]
    implicit: tuple[str, ...]
    order_only: tuple[str, ...]
    manifest_path: str
    manifest: ThinLinkManifest
    description: str


@dataclass(frozen=True)
class BackendCommand:
    """What the clang commands of a link's backends (or of one shared flag set) have in common: HEAD before
    each object's own arguments, FLAGS after them. A ninja file binds both once for all its backend edges."""

    head: tuple[str, ...]  # clang -c -x ir
    flags: tuple[str, ...]
    # files the flags name that every backend edge depends on: a sample profile, a basic-block sections list, and
    # any other flag value the link declares as an input (GN `inputs`): an edit of one runs the backends again
    inputs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Backend:
    """One backend compile: BITCODE + INDEX (empty: null index) → NATIVE, run as argv. A plan holds one per
    bitcode object of every link (a million for 1,000 tests of 1,000 objects): five fields, the rest derived."""

    bitcode: str
    index: str
    native: str
    command: BackendCommand  # shared by every backend of the link
    dwo: str = ""  # the split DWARF file the backend writes beside NATIVE (-gsplit-dwarf on the link line)

    def __reduce__(self) -> tuple[type[Backend], tuple[str, str, str, BackendCommand, str]]:
        # The hook's state pickles the null-index backends of every test (~40,000 for a Chromium-sized build):
        # a constructor call each, not dataclasses' slot-by-slot state.
        return (Backend, (self.bitcode, self.index, self.native, self.command, self.dwo))

    @property
    def object_args(self) -> tuple[str, ...]:
        """This backend's part of argv: bitcode, index and output."""
        if self.index:
            return (self.bitcode, f"-fthinlto-index={self.index}", "-o", self.native)
        return (self.bitcode, "-o", self.native)

    @property
    def description(self) -> str:
        return f"BACKEND {self.native}"

    @property
    def argv(self) -> tuple[str, ...]:
        return (*self.command.head, *self.object_args, *self.command.flags)


@dataclass(frozen=True)
class FinalLink:
    outputs: tuple[str, ...]
    inputs: tuple[str, ...]
    implicit: tuple[str, ...]
    order_only: tuple[str, ...]
    argv: tuple[str, ...]  # GN's command (a wrapper's too); shell operators in it are shell syntax
    dyndep: str  # empty: every input is static (null-index mode, or config dyndep: false)
    rsp_path: str
    rsp_lines: tuple[str, ...]  # the response file when ninja writes it (ninja_writes_rsp)
    description: str
    restat: bool = False  # GN's link rule has restat (solink: the .TOC is rewritten only when exports change)
    pool: str = ""  # GN's link pool
    ninja_writes_rsp: bool = False  # else the thin-link step writes it
    driver_at: int = -1  # argv[driver_at] is the clang driver (-1: unknown)


@dataclass(frozen=True)
class TargetPlan:
    label: str
    output: str
    directory: str
    ninja_file: str
    gn_ninja_file: str
    gn_edge_lines: tuple[int, int]
    thin_link: ThinLink | None
    backends: tuple[Backend, ...]
    final_link: FinalLink
    cache_policy: str = ""  # the link's own --thinlto-cache-policy, if any


@dataclass(frozen=True)
class TargetSummary:
    """What the build-wide files need of one planned link: the hook keeps it between regenerations, so that
    links whose GN data did not change are neither planned nor rendered again."""

    label: str
    output: str
    ninja_file: str
    gn_ninja_file: str
    gn_edge_lines: tuple[int, int]
    directory: str
    backend_count: int
    cache_policy: str = ""

    @classmethod
    def of(cls, t: TargetPlan) -> TargetSummary:
        return cls(t.label, t.output, t.ninja_file, t.gn_ninja_file, t.gn_edge_lines, t.directory, len(t.backends),
                   t.cache_policy)


@dataclass(frozen=True)
class Refusal:
    """A link target left to GN, with the one-line reason shown to the user."""

    label: str
    output: str
    reason: str


class LinkStatus(enum.Enum):
    PLANNED = "graph"  # in the ninja graph: thin link, backends, final link
    REFUSED = "left to GN"  # GN's in-process ThinLTO link stays, with a reason
    EXCLUDED = "excluded"  # by the targets: patterns of gn_thinlto.yaml
    NOT_THINLTO = "not ThinLTO"  # no -flto=thin in its link


@dataclass(frozen=True)
class LinkOutcome:
    """What became of one link target. A planned link has its summary, the null-index backends it shares, and
    its full plan when it was planned in this run (not when an incremental regeneration kept it)."""

    label: str
    status: LinkStatus
    summary: TargetSummary | None = None
    plan: TargetPlan | None = None
    shared: tuple[Backend, ...] = ()
    refusal: Refusal | None = None


@dataclass(frozen=True)
class RemoteBackends:
    """Backends run through the REAPI wrapper: LAUNCHER + `--naive-inputs RSP --` + the backend command."""

    launcher: tuple[str, ...]  # e.g. (python, -S, …/thin_client.py, --remote, URL, …), without the final `--`
    jobs: int  # depth of the ninja pool for remote backends
    # `download: minimal`: lld as the final links' clang finds it (`-B` dir) runs this with lld's arguments:
    # (python, -S, …/remote_link.py, --remote, URL, …, --), the link then runs remotely. Empty: links run here.
    link_launcher: tuple[str, ...] = ()


@dataclass(frozen=True)
class GraphPlan:
    """The plan of a build dir. `links` are every planned link in build order (largest first); `targets` are
    their full plans, in the same order, from plan_graph. The hook's regeneration (gn_thinlto.regen) renders
    and drops each link's full plan as it goes, and leaves `targets` empty."""

    targets: tuple[TargetPlan, ...]
    refusals: tuple[Refusal, ...]
    links: tuple[TargetSummary, ...] = ()
    not_thinlto: tuple[str, ...] = ()  # link targets whose evaluated link never mentions -flto=thin
    excluded: tuple[str, ...] = ()  # ThinLTO link targets the config's targets: patterns leave out
    shared_backends: tuple[Backend, ...] = field(default=())
    python: str = "python3"
    cache_dir: str = "gn-thinlto/cache"  # empty: no backend cache (config backend_cache: false)
    cache_policy: str = ""  # the backend cache's limits, lld's policy syntax ("": LLVM's defaults)
    cache_trusted_writers: tuple[str, ...] = ()  # whose entries count besides the building user's and root's
    backend_log: str = "gn-thinlto/backend.log"
    thin_link_pool_depth: int = 2
    rules_file: str = "gn-thinlto/rules.ninja"
    targets_file: str = "gn-thinlto/targets.ninja"
    remote: RemoteBackends | None = None
    step_launcher: str = ""  # the step launcher's path in the build dir ("": backend edges run the Python step)
    step_servers: int = 1  # step servers per build directory the launcher spreads backend edges over
