"""`goma-ext inputs -- COMMAND…`: print the files a ThinLTO backend command reads, one per line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from goma_ext.errors import GomaExtError
from goma_ext.inputs.backend import backend_inputs


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("inputs", help="list the input files of a ThinLTO backend command")
    p.add_argument("--cwd", type=Path, default=Path("."), help="the command's working directory (default: .)")
    p.add_argument("--json", action="store_true", help="print the classified inputs as JSON")
    p.add_argument("backend", nargs=argparse.REMAINDER, help="the backend command, after --")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    command = args.backend[1:] if args.backend[:1] == ["--"] else args.backend
    if not command:
        raise GomaExtError("inputs: give the backend command after --, e.g. goma-ext inputs -- clang -c -x ir …")
    result = backend_inputs(command, args.cwd)
    if args.json:
        print(json.dumps({
            "bitcode": result.bitcode, "index": result.index, "imports": list(result.imports),
            "other_inputs": list(result.other_inputs), "output": result.output, "skip": result.skip,
            "paths": list(result.paths),
        }, indent=2))
    else:
        for path in result.paths:
            print(path)
    return 0
