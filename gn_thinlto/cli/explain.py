"""`gn-thinlto explain OUT TARGET`: a link's bitcode objects, which ones its thin link used, and per used
object the modules it imports from (decoded from the index by goma_ext.bitcode.index)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gn_thinlto.errors import GnThinltoError, is_file, read_text
from gn_thinlto.steps.manifest import read_manifest
from gn_thinlto.steps.thinlink_paths import manifest_index_files


@dataclass(frozen=True)
class ObjectReport:
    bitcode: str
    used: bool
    imports: tuple[str, ...]
    skip: bool


@dataclass(frozen=True)
class Explanation:
    label: str
    output: str
    objects: tuple[ObjectReport, ...]


# What explain reads of a manifest.
EXPLAIN_KEYS = ("target", "final_output", "used_list", "bitcode", "stage_dir", "index_dir")


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("explain", help="show a ThinLTO link's objects, which were used, and their imports")
    p.add_argument("out", type=Path, help="build directory (built at least once)")
    p.add_argument("target", help="GN label (//apps/calc:calc) or output path (./calc)")
    p.set_defaults(run=run)


def find_manifest(out_dir: Path, target: str) -> dict[str, Any]:
    wanted = {target, target.split("(")[0], f"./{target.removeprefix('./')}"}
    for path in sorted((out_dir / "gn-thinlto").glob("**/thinlink.json")):
        m = read_manifest(path, EXPLAIN_KEYS)
        label = m["target"]
        if wanted & {label, label.split("(")[0], m["final_output"]}:
            return m
    raise GnThinltoError(
        f"{target}: no ThinLTO link with that label or output in {out_dir} (see gn-thinlto/refused.txt)"
    )


def explain(out_dir: Path, target: str) -> Explanation:
    from gn_thinlto.hook import check_graph_in_place
    from goma_ext.bitcode.index import read_index
    from goma_ext.errors import GomaExtError

    check_graph_in_place(out_dir)
    m = find_manifest(out_dir, target)
    used_file = out_dir / m["used_list"]
    if not is_file(used_file):
        raise GnThinltoError(f"{target}: the thin link has not run yet; build {m['final_output']} first")
    used = set(read_text(used_file, "the thin link's list").split())
    reports = []
    for bitcode, _, _, index_path, _ in manifest_index_files(m):
        try:
            index = read_index(out_dir / index_path)
        except GomaExtError as e:
            raise GnThinltoError(f"{target}: cannot decode {index_path}: {e}") from e
        imports = index.imported_paths(bitcode) if not index.skip else ()
        reports.append(ObjectReport(bitcode, bitcode in used, tuple(sorted(imports)), index.skip))
    return Explanation(m["target"], m["final_output"], tuple(reports))


def format_explanation(e: Explanation) -> str:
    used = [o for o in e.objects if o.used]
    lines = [f"{e.label} ({e.output}): {len(e.objects)} bitcode objects, {len(used)} used by the thin link"]
    for o in e.objects:
        if o.used:
            lines.append(f"  used    {o.bitcode}")
            lines.extend(f"            imports from {i}" for i in o.imports)
        else:
            lines.append(f"  unused  {o.bitcode}  (not loaded by the link: no backend, not linked)")
    return "\n".join(lines)


def own_backend_jobs(out_dir: Path, e: Explanation) -> int:
    """Backend edges of this link in ninja's view of its dependency tree (dyndep files loaded)."""
    from gn_thinlto.analysis.graph_query import backend_outputs

    m = find_manifest(out_dir, e.label)
    own_dir = m["used_list"].rsplit("/", 1)[0] + "/native/"
    return sum(1 for o in backend_outputs(out_dir, e.output.removeprefix("./")) if o.startswith(own_dir))


def run(args: argparse.Namespace) -> int:
    e = explain(args.out, args.target)
    print(format_explanation(e))
    print(
        f"  backend jobs in ninja's graph for {e.output}: {own_backend_jobs(args.out, e)} "
        f"(`ninja -t query`; `-t commands` does not follow dyndep inputs)"
    )
    return 0
