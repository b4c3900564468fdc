"""Names the remote settings use (environment variables, files, 'off' words), importable by the thin client."""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_STATS_LOG = "gn_thinlto_remote.jsonl"
LINK_STATS_LOG = "goma_ext_links.jsonl"  # remote final links' (download: minimal), in the build directory
DTLTO_STATS_LOG = "goma_ext_dtlto.jsonl"  # the DTLTO distributor's, in the link's working directory
COMPILER_CACHE = ".goma_ext_compilers.json"  # compiler identities, in the build directory
TOOLCHAIN_CACHE = ".goma_ext_toolchains.json"  # toolchain trees' digests, in the build directory

# Environment variable -> config field; values are strings, converted by the field's type.
ENV_VARS: Mapping[str, str] = {
    "GOMA_EXT_REMOTE": "endpoint",
    "GOMA_EXT_REMOTE_INSTANCE": "instance",
    "GOMA_EXT_REMOTE_CA_FILE": "ca_file",
    "GOMA_EXT_REMOTE_CLIENT_CERT": "client_cert",
    "GOMA_EXT_REMOTE_CLIENT_KEY": "client_key",
    "GOMA_EXT_REMOTE_TOKEN_FILE": "token_file",
    "GOMA_EXT_EXEC_ROOT": "exec_root",
    "GOMA_EXT_REMOTE_JOBS": "jobs",
    "GOMA_EXT_RPC_TIMEOUT": "rpc_timeout_s",
    "GOMA_EXT_EXECUTE_TIMEOUT": "execute_timeout_s",
    "GOMA_EXT_CACHE_SALT": "cache_salt",
    "GOMA_EXT_QUEUE_TIMEOUT": "queue_timeout_s",
    "GOMA_EXT_ALLOW_INSECURE_CREDENTIALS": "allow_insecure_credentials",
    "GOMA_EXT_REMOTE_TOOLCHAIN": "toolchain",
    "GOMA_EXT_REMOTE_BASE_SYSTEM": "base_system",
    "GOMA_EXT_REMOTE_PLATFORM": "platform",
    "GOMA_EXT_REMOTE_DOWNLOAD": "download",
    "GOMA_EXT_REMOTE_COMPRESSION": "compression",
}
TOKEN_ENV = "GOMA_EXT_REMOTE_TOKEN"
REAL_LD_ENV = "GOMA_EXT_REAL_LD"  # the lld the final links' shim stands for (remote_link.py)
PROXY_ENV = "GOMA_EXT_PROXY"  # off/0/false: no proxy, every action in-process
OFF_VALUES = frozenset({"", "off", "none", "local", "0", "false"})
# Variables besides the ENV_VARS overrides, as (NAME, DEFAULT, MEANING) for docs/reference/environment.md.
ENVIRONMENT: tuple[tuple[str, str, str], ...] = (
    (TOKEN_ENV, "", "the bearer token itself (instead of `remote.token_file`); never written to a command line, "
                    "a proxy request or a log"),
    (PROXY_ENV, "`on`", "`off` (or 0, false, none, local): `goma-ext run` and DTLTO run each action in their own "
                      "process instead of through the user's `goma-ext proxy`"),
    (REAL_LD_ENV, "", "the lld a final link's shim runs (locally) or ships (remotely) under `remote.download: "
                      "minimal`; default: `ld.lld` beside the clang that started the shim"),
)


def is_off(value: str) -> bool:
    return value.strip().lower() in OFF_VALUES
