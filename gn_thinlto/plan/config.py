"""gn_thinlto.yaml: which links go through the graph and how, parsed and validated into a frozen Config.

Example (every key optional):

    targets:
      include: ["//*"]            # GN label patterns (`//dir/*`, `//dir:name`, `//*`)
      exclude: ["//tools/big:*"]
    target_dir: "gn-thinlto/{output}"   # per-target directory; {output}, {name}, {dir} are available
    testonly: thin_link           # or shared_null_index
    backend_flags:
      add: ["-mllvm", "-some-option"]
      remove: ["-fdata-sections"]
    thin_link_pool_depth: 2       # ninja pool depth for thin links (0: no pool)
    minimized_bitcode: false
    cache_dir: gn-thinlto/cache   # relative to the build dir, or absolute (several build dirs may share it)
    cache_policy: "cache_size=10%:cache_size_bytes=40g"   # lld's --thinlto-cache-policy syntax; default: the
                                  # links' own --thinlto-cache-policy, else LLVM's defaults
    cache_trusted_writers: [ci-bot]  # whose cache entries your builds use besides yours and root's
    backend_cache: true           # false: every backend edge ninja runs runs the compiler (no sharing)
    step_server: true             # false: each backend edge runs the Python step itself (no launcher, no server)
    step_servers: auto            # step servers per build directory: auto (one per 4 cores, 1-8) or 1-16
    remote:                       # run backends over REAPI (schema: goma_ext.remote.config; README "Remote")
      endpoint: grpc://127.0.0.1:8980
    lto_partitions: auto          # the regular-LTO module's code generation: auto, off, or a number of edges
    dyndep: true                  # false: no dyndep file (for builders without dyndep, e.g. Siso): the final
                                  # link waits for every backend; unused lazy members compile to empty objects
    link_wrappers:                # wrappers whose inner link command gn-thinlto cannot find by itself
      - match: "*/my_link_wrapper.sh"   # shell glob on a token of the link command
        inner_after: "--link"           # the inner command (clang++ …) starts after this token
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gn_thinlto.errors import GnThinltoError, is_file, read_yaml, shown
from gn_thinlto.steps.step_args import AUTO_SERVERS, CORES_PER_SERVER, MAX_SERVERS
from gn_thinlto.steps.thinlink_paths import AUTO_PARTITION_BYTES, MAX_PARTITIONS
from thinlto_base.policy import PolicyError, parse_policy
from thinlto_base.settings import REQUIRED, Setting, defaults, sub_keys, top_keys
from thinlto_base.trust import unknown_users

CONFIG_FILE_NAME = "gn_thinlto.yaml"
AUTO_PARTITIONS = 8  # partition edges `lto_partitions: auto` plans per link


@dataclass(frozen=True)
class LinkWrapper:
    """A wrapper named in the config: when a link command has a token matching MATCH (a shell glob), its inner
    link command starts right after the first INNER_AFTER token that follows it."""

    match: str
    inner_after: str


class TestonlyMode(enum.Enum):
    """How test-only link targets get their native code."""

    THIN_LINK = "thin_link"
    SHARED_NULL_INDEX = "shared_null_index"


@dataclass(frozen=True)
class Config:
    """Validated configuration; defaults select every ThinLTO link with a full thin link."""

    include: tuple[str, ...] = ("//*",)
    exclude: tuple[str, ...] = ()
    target_dir: str = "gn-thinlto/{output}"
    testonly: TestonlyMode = TestonlyMode.THIN_LINK
    backend_flags_add: tuple[str, ...] = ()
    backend_flags_remove: tuple[str, ...] = ()
    thin_link_pool_depth: int = 2
    minimized_bitcode: bool = False
    cache_dir: str = "gn-thinlto/cache"
    backend_cache: bool = True
    step_server: bool = True  # backend edges go through the step launcher to the build dir's step server
    step_servers: int | str = "auto"  # "auto" or N: step servers per build directory (step_args.default_servers)
    cache_policy: str = ""  # lld's policy syntax; "" takes the links' --thinlto-cache-policy
    cache_trusted_writers: tuple[str, ...] = ()  # users (names or uids) whose cache entries count, besides you
    remote: tuple[tuple[str, Any], ...] = ()  # the `remote:` section as sorted items, read by goma_ext
    dyndep: bool = True  # False: the final link depends on every backend output, no dyndep file
    lto_partitions: int | str = "auto"  # "auto", "off", or N >= 1 partition edges (docs/design/partitions.md)
    link_wrappers: tuple[LinkWrapper, ...] = ()
    source: str = field(default="(defaults)", compare=False)

    def selects(self, label: str) -> bool:
        """Whether a label (without toolchain) passes the include/exclude patterns."""
        return any(label_matches(p, label) for p in self.include) and not any(
            label_matches(p, label) for p in self.exclude
        )


def label_matches(pattern: str, label: str) -> bool:
    """GN-style label pattern: `//dir/*` (recursive), `//dir:*`, `//dir:name`; shell wildcards allowed."""
    if pattern.endswith("/*"):
        return label.startswith((pattern[:-1], pattern[:-2] + ":"))
    return fnmatch.fnmatchcase(label, pattern)


SETTINGS: tuple[Setting, ...] = (  # what parse_config knows and defaults to; docs/reference/config.md renders it
    Setting("targets.include", "list of GN label patterns", ["//*"],
            "links whose labels match go through the graph: `//dir/*` (recursive), `//dir:*`, `//dir:name`; "
            "shell wildcards allowed"),
    Setting("targets.exclude", "list of GN label patterns", [],
            "links left to the build as they are, even if included"),
    Setting("target_dir", "string containing `{output}` or `{name}`", Config.target_dir,
            "each link's directory in the build dir (indexes, native objects); `{output}`, `{name}`, `{dir}` are "
            "replaced"),
    Setting("testonly", f"one of {', '.join(m.value for m in TestonlyMode)}", Config.testonly.value,
            "test-only links: a thin link of their own, or one no-import codegen per object shared by all tests"),
    Setting("backend_flags.add", "list of strings", [], "flags added to every backend compile"),
    Setting("backend_flags.remove", "list of strings", [], "flags dropped from every backend compile"),
    Setting("thin_link_pool_depth", "integer >= 0", Config.thin_link_pool_depth,
            "ninja pool depth for thin links (0: no pool)"),
    Setting("minimized_bitcode", "boolean", Config.minimized_bitcode,
            "thin links read each object's minimized bitcode `X.thinlink.o` (the compile must also write it: "
            "`-Xclang -fthin-link-bitcode=`)"),
    Setting("cache_dir", "path", Config.cache_dir,
            "the backend cache: relative to the build dir, or absolute (several build dirs may share it)"),
    Setting("backend_cache", "boolean", Config.backend_cache,
            "false: every backend edge ninja runs runs the compiler (no sharing)"),
    Setting("cache_policy", "string in lld's `--thinlto-cache-policy` syntax", Config.cache_policy,
            "how the backend cache is pruned; empty: the links' own `--thinlto-cache-policy`, else LLVM's defaults"),
    Setting("cache_trusted_writers", "list of user names or uids", [],
            "whose cache entries your builds use, besides yours and root's"),
    Setting("remote", "mapping", {}, "run backends over REAPI: the keys of the `remote:` section below"),
    Setting("dyndep", "boolean", Config.dyndep,
            "false: no dyndep file (for builders without dyndep, e.g. Siso): the final link waits for every backend"),
    Setting("lto_partitions", f"`auto`, `off` or an integer 1–{MAX_PARTITIONS}", Config.lto_partitions,
            "the regular-LTO module (CFI, whole-program devirtualization) is compiled by partition edges after the "
            f"thin link, as lld's `--lto-partitions=N` would: `auto` plans {AUTO_PARTITIONS} edges and uses one "
            f"per {AUTO_PARTITION_BYTES >> 20} MiB of the bitcode its inputs give the regular-LTO module (below 2, "
            "the thin link compiles the module itself, as today), `N` always N (a link's own "
            "`--lto-partitions=N` wins over `auto`), `off` never"),
    Setting("step_server", "boolean", Config.step_server,
            "false: each backend edge runs the Python step itself (no launcher, no server)"),
    Setting("step_servers", f"`auto` or an integer 1–{MAX_SERVERS}", Config.step_servers,
            f"step servers per build directory: the launcher spreads backend edges over them (by a hash of the "
            f"edge's command); `auto` is one per {CORES_PER_SERVER} cores of the machine that runs `gn gen`, "
            f"1 to {AUTO_SERVERS}. One server's CPU per remote action bounds a build with ~1,000 remote cores"),
    Setting("link_wrappers", "list of mappings", [],
            "wrappers whose inner link command gn-thinlto cannot find by itself"),
    Setting("link_wrappers[].match", "shell glob", REQUIRED, "matched against each token of the link command"),
    Setting("link_wrappers[].inner_after", "string", REQUIRED,
            "the inner link command (`clang++ …`) starts after this token"),
)
_KEYS = top_keys(SETTINGS)
_DEFAULTS = defaults(SETTINGS)


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GnThinltoError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def _check_keys(value: Any, allowed: set[str] | None, where: str) -> Mapping[str, Any]:
    """VALUE as a mapping with only ALLOWED keys (None: any key; another module owns that schema)."""
    if not isinstance(value, dict):
        raise GnThinltoError(f"{where}: expected a mapping, got {type(value).__name__}")
    unknown = sorted(map(str, set(value) - allowed)) if allowed is not None else []  # YAML keys may be numbers
    if unknown:
        known = ", ".join(sorted(allowed or ()))
        raise GnThinltoError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {known})")
    return value


def _link_wrappers(value: Any, where: str) -> tuple[LinkWrapper, ...]:
    if not isinstance(value, list):
        raise GnThinltoError(f"{where}: expected a list of {{match, inner_after}} mappings, got {value!r}")
    out = []
    for n, item in enumerate(value):
        entry = _check_keys(item, sub_keys(SETTINGS, "link_wrappers[]"), f"{where}[{n}]")
        for key in ("match", "inner_after"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise GnThinltoError(f"{where}[{n}]: {key}: expected a non-empty string")
        out.append(LinkWrapper(entry["match"], entry["inner_after"]))
    return tuple(out)


def parse_config(data: Any, source: str) -> Config:
    """Validate decoded YAML into a Config; every problem is one GnThinltoError line naming SOURCE."""
    if data is None:
        return Config(source=source)
    top = _check_keys(data, _KEYS, source)
    targets = _check_keys(top.get("targets", {}), sub_keys(SETTINGS, "targets"), f"{source}: targets")
    flags = _check_keys(top.get("backend_flags", {}), sub_keys(SETTINGS, "backend_flags"), f"{source}: backend_flags")
    try:
        testonly = TestonlyMode(top.get("testonly", _DEFAULTS["testonly"]))
    except ValueError:
        choices = ", ".join(m.value for m in TestonlyMode)
        raise GnThinltoError(f"{source}: testonly: expected one of {choices}, got {top['testonly']!r}") from None
    depth = top.get("thin_link_pool_depth", _DEFAULTS["thin_link_pool_depth"])
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise GnThinltoError(f"{source}: thin_link_pool_depth: expected an integer >= 0, got {depth!r}")
    minimized = top.get("minimized_bitcode", _DEFAULTS["minimized_bitcode"])
    if not isinstance(minimized, bool):
        raise GnThinltoError(f"{source}: minimized_bitcode: expected true or false, got {minimized!r}")
    target_dir = top.get("target_dir", _DEFAULTS["target_dir"])
    if not isinstance(target_dir, str) or ("{output}" not in target_dir and "{name}" not in target_dir):
        raise GnThinltoError(f"{source}: target_dir: must be a string containing {{output}} or {{name}}")
    cache_dir = top.get("cache_dir", _DEFAULTS["cache_dir"])
    if not isinstance(cache_dir, str) or not cache_dir:
        raise GnThinltoError(f"{source}: cache_dir: expected a non-empty path")
    backend_cache = top.get("backend_cache", _DEFAULTS["backend_cache"])
    if not isinstance(backend_cache, bool):
        raise GnThinltoError(f"{source}: backend_cache: expected true or false, got {backend_cache!r}")
    remote = _check_keys(top.get("remote", _DEFAULTS["remote"]), None, f"{source}: remote")
    cache_policy = top.get("cache_policy", _DEFAULTS["cache_policy"])
    try:
        parse_policy(cache_policy if isinstance(cache_policy, str) else "")
    except PolicyError as e:
        raise GnThinltoError(f"{source}: cache_policy: {e}") from None
    if not isinstance(cache_policy, str):
        raise GnThinltoError(f"{source}: cache_policy: expected a string in lld's policy syntax, got {cache_policy!r}")
    writers = top.get("cache_trusted_writers", _DEFAULTS["cache_trusted_writers"])
    if isinstance(writers, list):
        writers = [str(w) if isinstance(w, int) and not isinstance(w, bool) and w >= 0 else w for w in writers]
    trusted = _str_list(writers, f"{source}: cache_trusted_writers")
    if any(not w or "," in w or "\0" in w or any(c.isspace() for c in w) for w in trusted):
        raise GnThinltoError(f"{source}: cache_trusted_writers: expected user names or uids, got {list(trusted)!r}")
    dyndep = top.get("dyndep", _DEFAULTS["dyndep"])
    if not isinstance(dyndep, bool):
        raise GnThinltoError(f"{source}: dyndep: expected true or false, got {dyndep!r}")
    partitions = top.get("lto_partitions", _DEFAULTS["lto_partitions"])
    if partitions is False:  # YAML reads a bare `off` as false
        partitions = "off"
    if partitions not in ("auto", "off") and not (
            isinstance(partitions, int) and not isinstance(partitions, bool) and 1 <= partitions <= MAX_PARTITIONS):
        raise GnThinltoError(f"{source}: lto_partitions: expected auto, off or an integer 1-{MAX_PARTITIONS}, "
                             f"got {partitions!r}")
    step_server = top.get("step_server", _DEFAULTS["step_server"])
    if not isinstance(step_server, bool):
        raise GnThinltoError(f"{source}: step_server: expected true or false, got {step_server!r}")
    servers = top.get("step_servers", _DEFAULTS["step_servers"])
    if servers != "auto" and not (isinstance(servers, int) and not isinstance(servers, bool)
                                  and 1 <= servers <= MAX_SERVERS):
        raise GnThinltoError(f"{source}: step_servers: expected auto or an integer 1-{MAX_SERVERS}, got {servers!r}")
    return Config(
        include=_str_list(targets.get("include", _DEFAULTS["targets.include"]), f"{source}: targets.include"),
        exclude=_str_list(targets.get("exclude", _DEFAULTS["targets.exclude"]), f"{source}: targets.exclude"),
        target_dir=target_dir,
        testonly=testonly,
        backend_flags_add=_str_list(flags.get("add", _DEFAULTS["backend_flags.add"]), f"{source}: backend_flags.add"),
        backend_flags_remove=_str_list(
            flags.get("remove", _DEFAULTS["backend_flags.remove"]), f"{source}: backend_flags.remove"
        ),
        thin_link_pool_depth=depth,
        minimized_bitcode=minimized,
        cache_dir=cache_dir,
        backend_cache=backend_cache,
        cache_policy=cache_policy,
        cache_trusted_writers=trusted,
        remote=tuple(sorted(remote.items())),
        dyndep=dyndep,
        lto_partitions=partitions,
        step_server=step_server,
        step_servers=servers,
        link_wrappers=_link_wrappers(top.get("link_wrappers", _DEFAULTS["link_wrappers"]), f"{source}: link_wrappers"),
        source=source,
    )


def load_config(explicit: Path | None, source_root: Path) -> Config:
    """Read --config, else SOURCE_ROOT/gn_thinlto.yaml, else defaults (I/O edge of configuration)."""
    path = explicit if explicit is not None else source_root / CONFIG_FILE_NAME
    if not is_file(path, "--config" if explicit is not None else ""):
        if explicit is not None:
            raise GnThinltoError(f"--config {shown(explicit)}: no such file")
        return Config()
    data = read_yaml(path)
    config = parse_config(data, shown(path))
    unknown = unknown_users(config.cache_trusted_writers)
    if unknown:
        raise GnThinltoError(f"{path}: cache_trusted_writers: no user {unknown[0]!r} on this machine")
    return config
