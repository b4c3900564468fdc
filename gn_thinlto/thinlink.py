"""The thin-link build step (`python -m gn_thinlto.thinlink MANIFEST`), run by the gn_thinlto_thin_link rule.

lld writes every index file on every run, so it writes into a staging directory; only files whose content
changed replace the kept copies (the edge has restat = 1, so unchanged backends do not rerun). The step then
writes the final link's response file and the dyndep file naming the natives of the bitcode lld used.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gn_thinlto.elf_probe import has_real_symbols
from gn_thinlto.errors import GnThinltoError
from gn_thinlto.fsutil import replace_if_changed, write_if_changed


def used_bitcode(staged_used_list: str, stage_dir: str) -> list[str]:
    """lld's --thinlto-index-only list names each used object with the prefix replaced; map it back."""
    prefix = stage_dir.rstrip("/") + "/"
    used = []
    for line in Path(staged_used_list).read_text().splitlines():
        if line:
            used.append(line[len(prefix):] if line.startswith(prefix) else line)
    return used


def read_why_extract(path: Path) -> list[tuple[str, str]]:
    """lld --why-extract: (reference, extracted) pairs in extraction order (header line skipped)."""
    if not path.is_file():
        return []
    pairs = []
    for line in path.read_text().splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 2:
            pairs.append((parts[0], parts[1]))
    return pairs


def compose_final_inputs(
    m: dict[str, Any], used: Sequence[str], why: Sequence[tuple[str, str]], with_split: bool = False
) -> list[str]:
    """The final link's inputs in the order lld's in-process ThinLTO link would have placed their sections.

    Native objects first, in command-line order, each followed by the lazy native members its parse
    extracted (per --why-extract, also through extracted bitcode); unextracted lazy members stay in a lazy
    group; then the split regular-LTO object and the natives of the used bitcode in the thin link's order
    (lld appends its LTO outputs after every input file).
    """
    native_of = dict(m["natives"])
    lazy = set(m["lazy_natives"])
    parent: dict[str, str] = {}
    for ref, extracted in why:
        parent.setdefault(extracted, ref)

    def root(x: str) -> str:
        seen = {x}
        while x in parent and parent[x] not in seen:
            x = parent[x]
            seen.add(x)
        return x

    by_root: dict[str, list[str]] = {}
    for extracted in dict.fromkeys(e for _, e in why):
        if extracted in lazy:
            by_root.setdefault(root(extracted), []).append(extracted)
    out: list[str] = []
    placed: set[str] = set()
    for e in m["eager_inputs"]:
        if e not in native_of:
            out.append(e)
        for x in by_root.pop(e, []):
            out.append(x)
            placed.add(x)
    for rest in by_root.values():
        out.extend(rest)
        placed.update(rest)
    remaining = [x for x in m["lazy_natives"] if x not in placed]
    if remaining:
        out.extend(("-Wl,--start-lib", *remaining, "-Wl,--end-lib"))
    split = [m["split_object"][1]] if with_split else []
    return [*out, *split, *(native_of[u] for u in used)]


def final_rsp_lines(m: dict[str, Any], used: Sequence[str], why: Sequence[tuple[str, str]], with_split: bool) -> list[str]:
    return [*m["final_rsp_prefix"], *compose_final_inputs(m, used, why, with_split), *m["final_rsp_suffix"]]


def run(manifest_path: Path) -> int:
    m = json.loads(manifest_path.read_text())
    write_if_changed(Path(m["rsp_path"]), "\n".join(shlex.quote(x) for x in m["rsp_lines"]) + "\n")
    stage = Path(m["stage_dir"])
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    proc = subprocess.run(m["argv"], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        print(f"gn-thinlto: thin link of {m['target']} failed (exit {proc.returncode})", file=sys.stderr)
        return proc.returncode
    if proc.stderr:
        sys.stderr.write(proc.stderr)
    for f in m["index_files"]:
        for staged, kept in ((f["staged_index"], f["index"]), (f["staged_imports"], f["imports"])):
            if not Path(staged).is_file():
                raise GnThinltoError(f"thin link of {m['target']}: lld wrote no {staged}")
            replace_if_changed(Path(staged), Path(kept))
    staged, kept = m["split_object"]
    if not Path(staged).is_file():
        raise GnThinltoError(f"thin link of {m['target']}: lld wrote no regular-LTO object {staged}")
    replace_if_changed(Path(staged), Path(kept))
    with_split = has_real_symbols(Path(kept))
    used = used_bitcode(m["staged_used_list"], m["stage_dir"])
    write_if_changed(Path(m["used_list"]), "".join(f"{u}\n" for u in used))
    unknown = sorted(set(used) - {b for b, _ in m["natives"]})
    if unknown:
        raise GnThinltoError(f"thin link of {m['target']}: lld used {unknown[0]}, which gn-thinlto did not plan")
    full = dict(m["minimized"])
    why = [(full.get(r, r), full.get(x, x)) for r, x in read_why_extract(Path(m["why_extract"]))]
    rsp = "\n".join(shlex.quote(x) for x in final_rsp_lines(m, used, why, with_split)) + "\n"
    write_if_changed(Path(m["final_rsp"]), rsp)
    from gn_thinlto.render import render_dyndep  # jinja2 only when needed

    natives = [m["split_object"][1], *(dict(m["natives"])[u] for u in used)]
    # The rsp digest makes the dyndep file (the final link's only input from this edge) change with the rsp.
    digest = hashlib.sha256(rsp.encode()).hexdigest()
    write_if_changed(Path(m["dyndep"]), render_dyndep(m["final_output"], natives, digest))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m gn_thinlto.thinlink MANIFEST.json", file=sys.stderr)
        return 2
    try:
        return run(Path(args[0]))
    except (GnThinltoError, OSError, KeyError, TypeError, ValueError) as e:
        print(f"gn-thinlto: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
