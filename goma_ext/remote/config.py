"""Remote settings: the `remote:` section of gn_thinlto.yaml, overridden by GOMA_EXT_* environment variables.

Standard library only at import time (the thin client `goma-ext run` imports it under `python -S`)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from goma_ext.errors import is_file, shown
from goma_ext.reapi.errors import RemoteConfigError
from goma_ext.reapi.secret_file import read_secret
from goma_ext.remote.names import DEFAULT_STATS_LOG, DTLTO_STATS_LOG, ENV_VARS, OFF_VALUES, TOKEN_ENV
from thinlto_base.fileerrors import FileErrors
from thinlto_base.settings import Setting

DEFAULT_BASE_SYSTEM = (  # what every glibc image has (Debian's libc6, libgcc-s1, libstdc++6; distroless/cc)
    "ld-linux*.so.*", "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1",
    "libresolv.so.2", "libmvec.so.1", "libgcc_s.so.1", "libstdc++.so.6",
)
TOOLCHAIN_MODES = ("inputs", "host")
DOWNLOAD_MODES = ("all", "minimal")
COMPRESSION_MODES = ("off", "gzip")
MODES = {"toolchain": TOOLCHAIN_MODES, "download": DOWNLOAD_MODES, "compression": COMPRESSION_MODES}  # settings' words

SCHEMES = {"grpc": False, "grpcs": True}
__all__ = ["DEFAULT_STATS_LOG", "DTLTO_STATS_LOG", "ENV_VARS", "OFF_VALUES", "TOKEN_ENV", "RemoteConfig", "load_config"]


@dataclass(frozen=True)
class RemoteConfig:
    """Everything the wrapper and worker need to reach a REAPI server."""

    endpoint: str
    instance: str = ""
    ca_file: Path | None = None
    client_cert: Path | None = None  # mTLS: PEM certificate chain the client presents (with client_key)
    client_key: Path | None = None  # mTLS: PEM private key of client_cert
    token_file: Path | None = None
    token: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = ()
    exec_root: Path = Path(".")
    jobs: int = 16
    rpc_timeout_s: float = 30.0
    execute_timeout_s: float = 600.0
    queue_timeout_s: float = 120.0  # give up (and fall back) if no worker starts the action by then
    max_attempts: int = 4
    backoff_base_s: float = 0.1
    backoff_cap_s: float = 2.0
    stats_log: str = DEFAULT_STATS_LOG
    cache_salt: str = ""  # mixed into every Action: a different salt never shares cache entries
    # A token or header may go over plaintext grpc:// to a non-loopback host only when this says so.
    allow_insecure_credentials: bool = False
    # How the compiler reaches the worker: `inputs` (the binary and its libraries travel in the input root; any
    # REAPI service can run the action) or `host` (the worker maps argv[0] to its own compiler of the same
    # version and SHA-256, carried as platform properties).
    toolchain: str = "inputs"
    base_system: tuple[str, ...] = DEFAULT_BASE_SYSTEM  # sonames (glob patterns) the worker's image provides
    platform: tuple[tuple[str, str], ...] = ()  # REAPI platform properties of every action (sorted; in its key)
    # `all`: every output comes down. `minimal`: native objects stay in the CAS (stand-ins here, see
    # thinlto_base.remote_stub) and the final links run remotely; only what a local step reads comes down.
    download: str = "all"
    # gRPC message compression of what this client sends (`gzip`); what comes down is compressed when the server
    # is set to (`goma-ext cluster start --compression gzip`, BuildGrid's `grpc-compression`). Transport only:
    # actions and their keys are the same either way.
    compression: str = "off"

    @property
    def secure(self) -> bool:
        return SCHEMES[self.endpoint.split("://", 1)[0]]

    @property
    def target(self) -> str:
        return self.endpoint.split("://", 1)[1]

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """gRPC call metadata: configured headers plus the bearer token, if any."""
        token = self.token
        if token is None and self.token_file is not None:
            try:
                token = read_secret("token_file", self.token_file).decode().strip()
            except UnicodeDecodeError:
                raise RemoteConfigError(f"remote token_file {self.token_file}: not text (UTF-8)") from None
        auth = (("authorization", f"Bearer {token}"),) if token else ()
        return tuple((k.lower(), v) for k, v in self.headers) + auth


def check_secrets(cfg: RemoteConfig, base: Path, missing_ok: bool = False) -> None:
    """Read the token file and the client key (relative paths from BASE, where the commands run) now, so that one
    refused (read_secret) is one line where the settings are given, not a warning and a local run per action later.
    MISSING_OK: a file not there yet is left to the commands that read it (one made after `gen`, before the
    build)."""
    for setting in ("token_file", "client_key"):
        path = getattr(cfg, setting)
        if path is None or (missing_ok and not (base / path).exists()):
            continue
        read_secret(setting, base / path)


def explain_failure(cfg: RemoteConfig, reason: str) -> str:
    """REASON, with a hint when a grpcs:// connection was closed while it was being set up. A server that requires a
    client certificate (mTLS) and gets none, or one it does not trust, ends the TLS 1.3 handshake after the client
    has finished its side: gRPC then reports only `Socket closed`, which names neither TLS nor the certificate."""
    if not cfg.secure or "failed to connect" not in reason or "Socket closed" not in reason:
        return reason
    if cfg.client_cert is None:
        return f"{reason} (TLS handshake failed: the server may require a client certificate: remote.client_cert)"
    return f"{reason} (TLS handshake failed: the server may not accept remote.client_cert {cfg.client_cert})"


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected true or false")


def is_loopback(target: str) -> bool:
    """Whether a gRPC target (HOST:PORT, [V6]:PORT, unix:PATH) stays on this machine, judged from its literal
    spelling: a DNS name other than localhost is not resolved (what it resolves to is not ours to trust)."""
    if target.startswith("unix:"):  # a socket file: its directory's permissions say who may serve it
        return True
    if target.startswith("unix-abstract:"):  # no file, no permissions: any local user may have bound the name
        return False
    host = target.rsplit(":", 1)[0] if target.count(":") == 1 or target.startswith("[") else target
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _pairs(value: Any) -> dict[str, str]:
    """A mapping, or its spelling in an environment variable or flag: `KEY=VALUE,KEY=VALUE`."""
    if isinstance(value, str):
        pairs = [item.partition("=") for item in value.split(",") if item.strip()]
        if any(not sep or not k.strip() for k, sep, _ in pairs):
            raise ValueError("expected KEY=VALUE[,KEY=VALUE…]")
        return {k.strip(): v.strip() for k, _, v in pairs}
    if not isinstance(value, Mapping):
        raise TypeError("expected a mapping of names to values")
    return {str(k): str(v) for k, v in value.items()}


def encode_pairs(pairs: tuple[tuple[str, str], ...]) -> str:
    """The `KEY=VALUE,…` spelling _pairs reads back (for flags)."""
    return ",".join(f"{k}={v}" for k, v in pairs)


def carried_settings(cfg: RemoteConfig) -> dict[str, str]:
    """Every setting a `goma-ext run` command line or a proxy request carries besides the endpoint and the exec root,
    where it is set (in `goma-ext run`'s option order): instance, credentials and the action-shaping settings."""
    values = {"instance": cfg.instance} if cfg.instance else {}
    for name in ("ca_file", "client_cert", "client_key", "token_file"):
        path = getattr(cfg, name)
        if path is not None:
            values[name] = str(path)
    if cfg.allow_insecure_credentials:
        values["allow_insecure_credentials"] = "true"
    if cfg.compression != "off":  # selects the proxy (its channel compresses), never the action
        values["compression"] = cfg.compression
    if cfg.download != "all":  # not in the action, but on the command line: switching it re-runs the backends
        values["download"] = cfg.download
    return values | action_settings(cfg)


def action_settings(cfg: RemoteConfig) -> dict[str, str]:
    """The settings that shape every action (toolchain, base system, platform) where they differ from the
    defaults, spelled as flags carry them (`goma-ext run --toolchain …`, a proxy request's `flags`)."""
    values = {}
    if cfg.toolchain != "inputs":
        values["toolchain"] = cfg.toolchain
    if cfg.base_system != DEFAULT_BASE_SYSTEM:
        values["base_system"] = ",".join(cfg.base_system)
    if cfg.platform:
        values["platform"] = encode_pairs(cfg.platform)
    return values


def download_from_flags(cfg: RemoteConfig, flags: Mapping[str, Any]) -> RemoteConfig:
    """CFG with `download` as a backend's command line gives it (else `all`). Whether native objects may stay in
    the CAS is gen's decision, which also gives the final links their remote lld: a variable or a YAML file seen
    by one ninja run must not leave stand-ins where a local link reads objects."""
    return replace(cfg, download=str(flags.get("download") or "all"))


def _path(value: Any) -> Path:
    return Path(str(value))


def _sorted_pairs(value: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in _pairs(value).items()))


def _strings(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(v).strip() for v in items if str(v).strip())


# A field's annotation -> how a YAML or environment value becomes it, what the docs call it, and how an
# environment variable spells it when that differs.
_TYPES: Mapping[str, tuple[Callable[[Any], Any], str, str]] = {
    "str": (str, "string", ""),
    "int": (int, "integer", ""),
    "float": (float, "number", ""),
    "bool": (_boolean, "boolean", "1/true/yes/on or 0/false/no/off"),
    "Path": (_path, "path", ""),
    "Path | None": (_path, "path", ""),
    "tuple[tuple[str, str], ...]": (_sorted_pairs, "mapping of names to strings", "`KEY=VALUE,KEY=VALUE`"),
    "tuple[str, ...]": (_strings, "list of strings", "comma-separated"),
}
_FIELD_TYPES = {f.name: str(f.type) for f in fields(RemoteConfig)}
# YAML spellings besides the field's own (and `-` for `_`, which every key may use).
ALIASES: Mapping[str, str] = {"rpc_timeout": "rpc_timeout_s", "execute_timeout": "execute_timeout_s",
                              "queue_timeout": "queue_timeout_s"}
# What each key of the `remote:` section means; its type and default come from RemoteConfig, its variable from
# ENV_VARS. A field without a line here is no setting (the token comes only from the environment).
_MEANINGS: Mapping[str, str] = {
    "endpoint": "the REAPI server, `grpc://HOST:PORT` or `grpcs://HOST:PORT`; `off` (or none) builds locally; "
                "`GOMA_EXT_REMOTE=off` wins over every other setting",
    "instance": "REAPI instance name",
    "ca_file": "PEM certificates that sign a `grpcs://` server's certificate (a private CA)",
    "client_cert": "mTLS: PEM certificate chain the client presents, with `client_key` (`grpcs://` only)",
    "client_key": "mTLS: PEM private key of `client_cert`",
    "token_file": "file holding a bearer token, sent as `authorization: Bearer …` (the token itself may come in "
                  f"`{TOKEN_ENV}`)",
    "headers": "gRPC metadata sent with every call",
    "exec_root": "the input root, relative to the build directory: every input and output of an action lies below it",
    "jobs": "ninja pool depth for remote backends",
    "rpc_timeout_s": "seconds each RPC may take",
    "execute_timeout_s": "seconds an action may take remotely before the backend runs locally",
    "queue_timeout_s": "seconds to wait for a worker to start the action before the backend runs locally",
    "max_attempts": "tries per RPC (only UNAVAILABLE-class errors are retried)",
    "backoff_base_s": "first retry delay in seconds (doubling, capped, full jitter)",
    "backoff_cap_s": "longest retry delay in seconds",
    "stats_log": "per-action records, relative to the build directory (summed by `goma-ext report`)",
    "cache_salt": "mixed into every action: a different salt never shares cache entries",
    "allow_insecure_credentials": "let a token or headers go over plaintext `grpc://` to a host that is not loopback",
    "toolchain": "how the compiler reaches the worker: `inputs` (the binary and its libraries travel in the input "
                 "root) or `host` (the worker runs its own compiler of the same version and SHA-256)",
    "base_system": "sonames (glob patterns) the worker's image provides; other libraries travel with the compiler",
    "platform": "REAPI platform properties of every action (part of its cache key)",
    "download": "`all`: every remote output comes down; `minimal`: native objects stay in the remote CAS (a "
                "stand-in file names each), final links run remotely and only the binaries come down",
    "compression": "`gzip`: compress every gRPC message this client sends (uploads above all); downloads are "
                   "compressed when the server is set to (`goma-ext cluster start --compression gzip`). For a slow "
                   "link: on loopback it only costs CPU",
}


def _yaml_value(value: Any, annotation: str) -> Any:
    """A field's default as YAML would spell it."""
    if annotation == "tuple[tuple[str, str], ...]":
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return str(value) if isinstance(value, Path) else value


def _setting(f: Any) -> Setting:
    env = {name: var for var, name in ENV_VARS.items()}.get(f.name, "")
    aliases = sorted(alias for alias, name in ALIASES.items() if name == f.name)
    also = f" (also spelled `{'`, `'.join(aliases)}`)" if aliases else ""
    _, kind, spelling = _TYPES[_FIELD_TYPES[f.name]]
    modes = MODES.get(f.name)
    kind = kind if modes is None else f"one of {', '.join(modes)}"
    meaning = _MEANINGS[f.name] + also + (f"; as a variable: {spelling}" if env and spelling else "")
    if f.name == "endpoint":
        return Setting(f.name, "URL", "", meaning, default_text="none: backends run locally", env=env)
    return Setting(f.name, kind, _yaml_value(f.default, _FIELD_TYPES[f.name]), meaning, env=env)


SETTINGS: tuple[Setting, ...] = tuple(_setting(f) for f in fields(RemoteConfig) if f.name in _MEANINGS)


def _convert(name: str, value: Any) -> Any:
    convert = _TYPES.get(_FIELD_TYPES[name], _TYPES["str"])[0]
    try:
        return convert(value)
    except (TypeError, ValueError, OverflowError) as e:  # OverflowError: `jobs: .inf`
        raise RemoteConfigError(f"remote.{name}: cannot use {value!r}: {e}") from e


def _validate(cfg: RemoteConfig) -> RemoteConfig:
    scheme, sep, rest = cfg.endpoint.partition("://")
    if not sep or scheme not in SCHEMES or not rest:
        raise RemoteConfigError(f"remote endpoint {cfg.endpoint!r}: expected grpc://HOST:PORT or grpcs://HOST:PORT")
    if cfg.ca_file is not None and not cfg.secure:
        raise RemoteConfigError(f"remote ca_file is set but endpoint {cfg.endpoint} is not grpcs://")
    if (cfg.client_cert is None) != (cfg.client_key is None):
        raise RemoteConfigError("remote client_cert and client_key go together: set both or neither")
    if cfg.client_cert is not None and not cfg.secure:
        raise RemoteConfigError(f"remote client_cert and client_key are set but endpoint {cfg.endpoint} is not grpcs://")
    sends = [what for what, present in (("token", cfg.token), ("token_file", cfg.token_file), ("headers", cfg.headers))
             if present]
    if sends and not cfg.secure and not cfg.allow_insecure_credentials and not is_loopback(cfg.target):
        raise RemoteConfigError(
            f"remote {' and '.join(sends)} would go in clear over {cfg.endpoint} to a host that is not loopback: "
            "use grpcs://, or set remote.allow_insecure_credentials: true (GOMA_EXT_ALLOW_INSECURE_CREDENTIALS=1)"
        )
    for name, modes in MODES.items():
        if getattr(cfg, name) not in modes:
            raise RemoteConfigError(f"remote.{name} {getattr(cfg, name)!r}: expected one of {', '.join(modes)}")
    for k, v in cfg.platform:
        if not k or not v or any(c in k + v for c in ",=\n\0"):
            raise RemoteConfigError(f"remote.platform {k}={v!r}: names and values must be non-empty, without , = or "
                                    "newlines")
    if cfg.jobs < 1 or cfg.max_attempts < 1:
        raise RemoteConfigError("remote jobs and max_attempts must be at least 1")
    return cfg


def section_from_yaml(path: Path) -> dict[str, Any]:
    """The `remote:` mapping of a gn_thinlto.yaml file (empty if the file or section is absent)."""
    if not is_file(path, "--config"):
        return {}
    doc = FileErrors(RemoteConfigError).read_yaml(path, "--config") or {}
    section = doc.get("remote") if isinstance(doc, dict) else None
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise RemoteConfigError(f"{shown(path)}: `remote:` must be a mapping")
    return dict(section)


def load_config(
    section: Mapping[str, Any], env: Mapping[str, str], overrides: Mapping[str, Any] | None = None
) -> RemoteConfig | None:
    """Merge YAML section < environment < explicit overrides; None when no endpoint is configured or it is 'off'.

    GOMA_EXT_REMOTE=off wins over everything, so `GOMA_EXT_REMOTE=off ninja` builds locally whatever ninja says.
    """
    if env.get("GOMA_EXT_REMOTE", "x").strip().lower() in OFF_VALUES:
        return None
    known = {s.key for s in SETTINGS}
    values: dict[str, Any] = {}
    for key, value in section.items():
        if value is None:
            continue
        if not isinstance(key, str):
            raise RemoteConfigError(f"remote: {key!r}: not a setting name (a YAML key that is not a string)")
        name = key.replace("-", "_")
        name = ALIASES.get(name, name)
        if name not in known:
            raise RemoteConfigError(f"remote.{key}: unknown setting (known: {', '.join(sorted(known))})")
        values[name] = value
    for var, name in ENV_VARS.items():
        if var in env:
            values[name] = env[var]
    for name, value in (overrides or {}).items():
        if value is not None:
            values[name] = value
    endpoint = str(values.get("endpoint", "")).strip()
    if endpoint.lower() in OFF_VALUES:
        return None
    converted = {k: _convert(k, v) for k, v in values.items() if k != "endpoint"}
    cfg = RemoteConfig(endpoint=endpoint, **converted)
    if env.get(TOKEN_ENV):
        cfg = replace(cfg, token=env[TOKEN_ENV])
    return _validate(cfg)
