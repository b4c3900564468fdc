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
    """The command line that runs `bgd ARGS` (BGD: the server venv's bgd) through this launcher."""
    return [str(bgd.with_name("python")), str(Path(__file__).resolve()), *args]


def _check_schema_once() -> None:
    import jsonschema
    from jsonschema import exceptions, validators

    checked: set[int] = set()

    def validate(instance: Any, schema: dict[str, Any], cls: Any = None, *args: Any, **kwargs: Any) -> None:
        cls = cls or validators.validator_for(schema)
        definitions = id(schema.get("definitions", schema))  # one dict, shared by every object's schema
        if definitions not in checked:
            cls.check_schema(schema)
            checked.add(definitions)
        error = exceptions.best_match(cls(schema, *args, **kwargs).iter_errors(instance))
        if error is not None:
            raise error

    jsonschema.validate = validate


def main() -> int:
    _check_schema_once()
    from buildgrid.server.app import cli

    sys.argv[0] = "bgd"
    result: int = cli()
    return result


if __name__ == "__main__":
    sys.exit(main())
