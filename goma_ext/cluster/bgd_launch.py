"""BuildGrid's `bgd` command line with its config schema checked once, run by the server venv's Python:
`SERVER_VENV/bin/python bgd_launch.py ARGS…`, ARGS as for `bgd` (`command`).

BuildGrid 0.4.4 validates each tagged object of a config (`!sql-scheduler`, `!disk-storage`, …) with
`jsonschema.validate`, which first checks the schema it is given, BuildGrid's own and the same every time, against
the JSON Schema meta-schema. That check took two thirds of a server's start: `bgd server start` on a cluster's
config used 7.2 CPU s, 2.6 with the schema checked once (py-spy; every cluster start and restart pays it, and the
CAS cleanup again). Every object is still validated against the schema, so a bad config fails as it did.

Only the standard library at import: this file is part of goma_ext, whose venv has neither jsonschema nor
BuildGrid (they are in the server venv, which runs it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def command(bgd: Path, *args: str) -> list[str]:
    """The command line that runs `bgd ARGS` (BGD: the server venv's bgd) through this launcher (`-P`: this
    file's directory, goma_ext/cluster, is not put on the module path, where its modules would shadow others)."""
    return [str(bgd.with_name("python")), "-P", str(Path(__file__).resolve()), *args]


def _check_schema_once() -> None:
    import jsonschema
    from jsonschema import exceptions, validators

    checked: list[Any] = []  # the `definitions` dicts checked, held: an id() alone could be a freed dict's

    def validate(instance: Any, schema: dict[str, Any], cls: Any = None, *args: Any, **kwargs: Any) -> None:
        cls = cls or validators.validator_for(schema)
        # The schema without its definitions each time (a few keys), its definitions once per dict (BuildGrid
        # hands the same dict with every object's schema): together, all that jsonschema.validate checks.
        cls.check_schema({k: v for k, v in schema.items() if k != "definitions"})
        definitions = schema.get("definitions")
        if definitions is not None and not any(d is definitions for d in checked):
            cls.check_schema({k: v for k, v in schema.items() if k in ("$schema", "definitions")})
            checked.append(definitions)
        error = exceptions.best_match(cls(schema, *args, **kwargs).iter_errors(instance))
        if error is not None:
            raise error

    jsonschema.validate = validate


def _redis_over_unix_sockets() -> None:
    """BuildGrid 0.4.4's `!redis-connection` takes a host and a port only. The cluster's redis listens on a Unix
    socket alone (goma_ext.cluster.redis_server), named as the host: a host that is an absolute path is connected to
    as that socket (redis-py's unix_socket_path), with the same timeout, database and password."""
    import redis
    from buildgrid.server.redis import provider

    tcp = provider.RedisProvider._connect

    def connect(self: Any) -> Any:
        host = self._host_infos[0][0] if self._host_infos else ""
        if self._sentinel_master_name is None and host.startswith("/"):
            r = redis.Redis(unix_socket_path=host, socket_timeout=self._socket_timeout, db=self._db,
                            password=self._password)
            return r, r
        return tcp(self)

    provider.RedisProvider._connect = connect


def main() -> int:
    _check_schema_once()
    _redis_over_unix_sockets()
    from buildgrid.server.app import cli

    sys.argv[0] = "bgd"
    result: int = cli()
    return result


if __name__ == "__main__":
    sys.exit(main())
