"""`goma-ext dtlto [OPTIONS] JSON`: LLVM's DTLTO distributor interface (clang/lld 22 `-fthinlto-distributor=`).

    clang-22 -flto=thin -fuse-ld=lld -fthinlto-distributor=$(command -v goma-ext) \\
        -Xthinlto-distributor=dtlto[,--remote=grpc://HOST:PORT,--jobs=8,…] …

lld runs `goma-ext dtlto OPTIONS… JSON` in the link's working directory. Settings, later ones winning: the
`dtlto:` and `remote:` sections of a YAML file (--config, else $GOMA_EXT_DTLTO_CONFIG, else
~/.config/goma-ext/dtlto.yaml if present), the GOMA_EXT_REMOTE* variables (as for `goma-ext run`;
GOMA_EXT_REMOTE=off wins over everything), options in $GOMA_EXT_DTLTO (shell words), then the options lld
passes on.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import os
import shlex
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from goma_ext.dtlto import jobfile
from goma_ext.dtlto.distributor import Distributor, Settings
from goma_ext.dtlto.slots import Slots, default_dir
from goma_ext.errors import GomaExtError, file_error, is_file, read_yaml, shown
from goma_ext.remote.config import DTLTO_STATS_LOG, load_config
from thinlto_base.policy import PolicyError, parse_policy
from thinlto_base.settings import Setting
from thinlto_base.store import CacheStore
from thinlto_base.trust import Trust

ENV_OPTIONS = "GOMA_EXT_DTLTO"
ENV_CONFIG = "GOMA_EXT_DTLTO_CONFIG"
# (NAME, DEFAULT, MEANING) for docs/reference/environment.md.
ENVIRONMENT: tuple[tuple[str, str, str], ...] = (
    (ENV_OPTIONS, "", "options for `goma-ext dtlto` (shell words), put before the ones lld passes on"),
    (ENV_CONFIG, "`$XDG_CONFIG_HOME/goma-ext/dtlto.yaml` (`~/.config/…`), if present",
     "the YAML file with `dtlto:` and `remote:` sections (`--config` wins)"),
)
# The `dtlto:` section: what _section knows and checks, and docs/reference/config.md renders. An option of the
# same name (`--slots-dir` for slots_dir) wins over each.
SETTINGS: tuple[Setting, ...] = (
    Setting("jobs", "integer", None, "local compiles at once on this machine, over all links",
            default_text="the number of CPUs"),
    Setting("cache", "path", None, "the backend cache directory",
            default_text="`$XDG_CACHE_HOME/goma-ext/backend-cache` (`~/.cache/…` without XDG_CACHE_HOME)"),
    Setting("cache_policy", "string in lld's `--thinlto-cache-policy` syntax", "",
            "how the backend cache is pruned; empty: LLVM's defaults"),
    Setting("cache_trusted_writers", "list of user names or uids", [],
            "whose cache entries the links use, besides yours and root's"),
    Setting("slots_dir", "path", None, "where the machine-wide local job slots live",
            default_text="`$XDG_RUNTIME_DIR/goma-ext/dtlto-slots`, else under `$XDG_CACHE_HOME` (`~/.cache`)"),
    Setting("stats_log", "path", DTLTO_STATS_LOG, "per-job records; a relative path is in the link's directory"),
)
SECTION_KEYS = tuple(s.key for s in SETTINGS)
# The YAML type each key's value must have, and how a message names it.
_SECTION_TYPES: dict[str, tuple[type, str]] = {
    "jobs": (int, "an integer"), "cache_trusted_writers": (list, "a list"), "cache": (str, "a string"),
    "cache_policy": (str, "a string"), "slots_dir": (str, "a string"), "stats_log": (str, "a string"),
}
MAX_JOBS = 4096  # each is a slot file (slots.Slots), all tried in turn by every waiting compile
PATH_MAX = 4096  # Linux: a longer path is refused by every call (and os.makedirs recurses on it first)


def default_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "goma-ext" / "backend-cache"


def default_config() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "goma-ext" / "dtlto.yaml"


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("dtlto", help="run a clang/lld 22 DTLTO link's backend jobs (-fthinlto-distributor=)",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", type=Path, help=f"YAML with `dtlto:` and `remote:` sections (or ${ENV_CONFIG})")
    p.add_argument("--remote", help="grpc://HOST:PORT or grpcs://HOST:PORT; 'off' compiles locally")
    p.add_argument("--instance", help="REAPI instance name")
    p.add_argument("--jobs", type=int, help="local compiles at once on this machine, over all links (default: cores)")
    p.add_argument("--slots-dir", type=Path, help="where the machine-wide local job slots live")
    p.add_argument("--cache", type=Path,
                   help="backend cache directory (default $XDG_CACHE_HOME/goma-ext/backend-cache, ~/.cache/… without "
                        "XDG_CACHE_HOME)")
    p.add_argument("--no-cache", action="store_true", help="do not use the backend cache")
    p.add_argument("--cache-policy", help="pruning policy in lld's --thinlto-cache-policy syntax")
    p.add_argument("--stats-log", type=Path,
                   help=f"per-job records; a relative path is in the link's directory (default {DTLTO_STATS_LOG})")
    p.add_argument("job_file", type=Path, metavar="JSON", help="the job file lld wrote (always the last argument)")
    p.set_defaults(run=run)


def _section(path: Path | None, env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(dtlto section, remote section) of the config file, if there is one."""
    explicit = path or (Path(env[ENV_CONFIG]) if env.get(ENV_CONFIG) else None)
    chosen = explicit or default_config()
    if not is_file(chosen, "config"):
        if explicit:
            raise GomaExtError(f"{shown(chosen)}: no such config file")
        return {}, {}
    doc = read_yaml(chosen, "config") or {}
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k, {}), dict) for k in ("dtlto", "remote")):
        raise GomaExtError(f"{shown(chosen)}: expected a mapping with `dtlto:` and `remote:` mappings")
    dtlto = dict(doc.get("dtlto") or {})
    unknown = sorted(map(str, set(dtlto) - set(SECTION_KEYS)))  # YAML keys may be numbers
    if unknown:
        raise GomaExtError(f"{shown(chosen)}: dtlto.{unknown[0]}: unknown setting (known: {', '.join(SECTION_KEYS)})")
    for key, value in dtlto.items():
        kind, expected = _SECTION_TYPES[key]
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise GomaExtError(f"{shown(chosen)}: dtlto.{key}: expected {expected}, got {value!r}")
    return dtlto, dict(doc.get("remote") or {})


def _path(value: str | Path, what: str, directory: bool) -> Path:
    """VALUE (given by option WHAT) as the path of a DIRECTORY, or of a file; refused at once when it cannot be
    one (too long, or a file where a directory belongs or the reverse), rather than by each job in turn."""
    if len(str(value).encode(errors="surrogatepass")) >= PATH_MAX:
        raise GomaExtError(f"{what} {shown(value)}: {os.strerror(errno.ENAMETOOLONG)}")
    try:
        is_dir = stat.S_ISDIR(os.stat(value).st_mode)
    except FileNotFoundError:
        return Path(value)
    except (OSError, ValueError) as e:
        raise file_error(value, e, what) from e
    if is_dir != directory:
        raise GomaExtError(f"{what} {shown(value)}: {'not a directory' if directory else 'a directory'}")
    return Path(value)


def settings(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    dtlto, remote = _section(args.config, env)
    jobs = args.jobs or int(dtlto.get("jobs") or os.cpu_count() or 1)
    if not 1 <= jobs <= MAX_JOBS:
        raise GomaExtError(f"--jobs={jobs}: must be from 1 to {MAX_JOBS}")
    cache = "" if args.no_cache else str(_path(args.cache or dtlto.get("cache") or default_cache(), "--cache", True))
    policy = args.cache_policy or str(dtlto.get("cache_policy") or "")
    if policy:
        try:
            parse_policy(policy)
        except PolicyError as e:
            raise GomaExtError(f"--cache-policy: {e}") from e
    writers = dtlto.get("cache_trusted_writers") or []
    if not isinstance(writers, list) or not all(isinstance(w, (str, int)) for w in writers):
        raise GomaExtError(f"dtlto.cache_trusted_writers: expected a list of user names or uids, got {writers!r}")
    stats_log = _path(args.stats_log or dtlto.get("stats_log") or DTLTO_STATS_LOG, "--stats-log", False)
    cfg = load_config(remote, env, {"endpoint": args.remote, "instance": args.instance})
    if cfg is not None:  # lld links the objects in its own process: they must come down (never stand-ins)
        cfg = dataclasses.replace(cfg, download="all")
    return Settings(
        remote=cfg, cache=CacheStore(cache, Trust([str(w) for w in writers])), cache_policy=policy,
        slots=Slots(_path(args.slots_dir or dtlto.get("slots_dir") or default_dir(), "--slots-dir", True), jobs),
        stats_log=stats_log,
    )


def with_env_options(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """`dtlto` ARGV with $GOMA_EXT_DTLTO's options put first (so the ones lld passes on win)."""
    try:
        extra = shlex.split(env.get(ENV_OPTIONS, ""))
    except ValueError as e:
        raise GomaExtError(f"${ENV_OPTIONS}: cannot split into options: {e}") from e
    if not extra or not argv or argv[0] != "dtlto":
        return list(argv)
    return [argv[0], *extra, *argv[1:]]


def run(args: argparse.Namespace) -> int:
    jobs = jobfile.load(args.job_file)
    code = Distributor(jobs, settings(args, os.environ)).run()
    if code != 0:
        print(f"goma-ext: dtlto: {jobs.linker_output}: a backend job failed; no outputs left", file=sys.stderr)
    return code
