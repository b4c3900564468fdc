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
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from goma_ext.dtlto import jobfile
from goma_ext.dtlto.distributor import Distributor, Settings
from goma_ext.dtlto.slots import Slots, default_dir
from goma_ext.errors import GomaExtError
from goma_ext.remote.config import DTLTO_STATS_LOG, load_config
from thinlto_cache.policy import PolicyError, parse_policy
from thinlto_cache.store import CacheStore
from thinlto_cache.trust import Trust

ENV_OPTIONS = "GOMA_EXT_DTLTO"
ENV_CONFIG = "GOMA_EXT_DTLTO_CONFIG"
SECTION_KEYS = ("jobs", "cache", "cache_policy", "cache_trusted_writers", "slots_dir", "stats_log")


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
    p.add_argument("--cache", type=Path, help=f"backend cache directory (default {default_cache()})")
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
    if not chosen.is_file():
        if explicit:
            raise GomaExtError(f"{chosen}: no such config file")
        return {}, {}
    try:
        doc = yaml.safe_load(chosen.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise GomaExtError(f"{chosen}: cannot read: {e}") from e
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k, {}), dict) for k in ("dtlto", "remote")):
        raise GomaExtError(f"{chosen}: expected a mapping with `dtlto:` and `remote:` mappings")
    dtlto = dict(doc.get("dtlto") or {})
    unknown = sorted(set(dtlto) - set(SECTION_KEYS))
    if unknown:
        raise GomaExtError(f"{chosen}: dtlto.{unknown[0]}: unknown setting (known: {', '.join(SECTION_KEYS)})")
    return dtlto, dict(doc.get("remote") or {})


def settings(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    dtlto, remote = _section(args.config, env)
    jobs = args.jobs or int(dtlto.get("jobs") or os.cpu_count() or 1)
    if jobs < 1:
        raise GomaExtError(f"--jobs={jobs}: must be at least 1")
    cache = "" if args.no_cache else str(args.cache or dtlto.get("cache") or default_cache())
    policy = args.cache_policy or str(dtlto.get("cache_policy") or "")
    if policy:
        try:
            parse_policy(policy)
        except PolicyError as e:
            raise GomaExtError(f"--cache-policy: {e}") from e
    writers = dtlto.get("cache_trusted_writers") or []
    if not isinstance(writers, list) or not all(isinstance(w, (str, int)) for w in writers):
        raise GomaExtError(f"dtlto.cache_trusted_writers: expected a list of user names or uids, got {writers!r}")
    stats_log = Path(args.stats_log or dtlto.get("stats_log") or DTLTO_STATS_LOG)
    cfg = load_config(remote, env, {"endpoint": args.remote, "instance": args.instance})
    return Settings(
        remote=cfg, cache=CacheStore(cache, Trust([str(w) for w in writers])), cache_policy=policy,
        slots=Slots(Path(args.slots_dir or dtlto.get("slots_dir") or default_dir()), jobs), stats_log=stats_log,
    )


def with_env_options(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """`dtlto` ARGV with $GOMA_EXT_DTLTO's options put first (so the ones lld passes on win)."""
    extra = shlex.split(env.get(ENV_OPTIONS, ""))
    if not extra or not argv or argv[0] != "dtlto":
        return list(argv)
    return [argv[0], *extra, *argv[1:]]


def run(args: argparse.Namespace) -> int:
    jobs = jobfile.load(args.job_file)
    code = Distributor(jobs, settings(args, os.environ)).run()
    if code != 0:
        print(f"goma-ext: dtlto: {jobs.linker_output}: a backend job failed; no outputs left", file=sys.stderr)
    return code
