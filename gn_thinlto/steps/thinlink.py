"""The thin-link build step (`python -S …/gn_thinlto/thinlink.py MANIFEST`), run by the gn_thinlto_thin_link rule.

lld writes every index file on every run, so it writes into a staging directory; only files whose content
changed replace the kept copies (the edge has restat = 1, so unchanged backends do not rerun). The step then
writes the final link's response file and the dyndep file naming the natives of the bitcode lld used.

Before running lld the step fingerprints the manifest and the content of every file the thin link reads
(each file hashed again only when its size, mtime or inode moved). When the fingerprint equals that of the
last successful run and every output is in place, lld would write the same files again: the step stops
there, and restat lets ninja skip everything downstream. That is the common case of a recompile that did
not change the bitcode (a comment edit, a touched file).
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:  # run as a script (see render.step_command)
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

# The imports below come after the script-mode path set-up above.
import hashlib
import json
import stat
from collections.abc import Sequence
from typing import Any

from gn_thinlto.errors import GnThinltoError, decode_json, file_error, read_text
from gn_thinlto.steps.manifest import check_manifest
from gn_thinlto.steps.thinlink_paths import manifest_index_files, manifest_natives, partition_paths
from thinlto_base.bitcode_blocks import unhashed_modules
from thinlto_base.fsutil import (
    code_version,
    file_sha256,
    read_bytes,
    remove_if_exists,
    replace_if_changed,
    same_files,
    write_if_changed,
)
from thinlto_base.keys import compiler_identity


def _steps_version() -> bytes:
    """The thin-link steps' code (this directory's): an upgrade that changes how the thin link's outputs are made
    (final inputs, partitions) runs lld again once, instead of keeping what the old code wrote."""
    here = os.path.dirname(os.path.abspath(__file__))
    base = os.path.join(os.path.dirname(os.path.dirname(here)), "thinlto_base")
    files = [os.path.join(here, n) for n in sorted(os.listdir(here)) if n.endswith(".py")]
    return code_version(b"gn-thinlto-thinlink-v1",  # and what it reads indexes with
                        [*files, *(os.path.join(base, n) for n in ("bitcode_blocks.py", "fsutil.py"))])


FINGERPRINT_VERSION = _steps_version()
MANIFEST = "thin-link manifest"


def _lld_text(path: str) -> str:
    try:
        return read_bytes(path).decode()
    except UnicodeDecodeError as e:
        raise file_error(path, e, "lld's") from e


def used_bitcode(staged_used_list: str, stage_dir: str) -> list[str]:
    """lld's --thinlto-index-only list names each used object with the prefix replaced; map it back."""
    prefix = stage_dir.rstrip("/") + "/"
    used = []
    for line in _lld_text(staged_used_list).splitlines():
        if line:
            used.append(line[len(prefix):] if line.startswith(prefix) else line)
    return used


def read_why_extract(path: str) -> list[tuple[str, str]]:
    """lld --why-extract: (reference, extracted) pairs in extraction order (header line skipped)."""
    if not os.path.isfile(path):
        return []
    pairs = []
    for line in _lld_text(path).splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 2:
            pairs.append((parts[0], parts[1]))
    return pairs


def compose_final_inputs(
    m: dict[str, Any], used: Sequence[str], why: Sequence[tuple[str, str]], regular: Sequence[str] = ()
) -> list[str]:
    """The final link's inputs in the order lld's in-process ThinLTO link would have placed their sections.

    Native objects first, in command-line order, each followed by the lazy native members its parse
    extracted (per --why-extract, also through extracted bitcode); unextracted lazy members stay in a lazy
    group; then the REGULAR-LTO objects (the split object, or the partitions' in order) and the natives of the
    used bitcode in the thin link's order (lld appends its LTO outputs after every input file).
    """
    native_of = manifest_natives(m)
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
    return [*out, *regular, *(native_of[u] for u in used)]


def linker_of(argv: Sequence[str]) -> list[str]:
    """The lld that a clang link command ARGV runs (--ld-path, or -fuse-ld=lld: the ld.lld beside clang, else on
    PATH), as clang finds it; [] when ARGV runs lld itself, or when it cannot be found (then the driver alone is
    the identity, as before)."""
    driver = argv[0] if argv else ""
    if "lld" in os.path.basename(driver):
        return []
    path = ""
    for a in argv[1:]:
        if a.startswith("--ld-path="):
            path = a.split("=", 1)[1]
        elif a.startswith("-fuse-ld="):
            value = a.split("=", 1)[1]
            path = value if os.sep in value else ""
            if value == "lld":
                import shutil

                real = os.path.realpath(shutil.which(driver) or driver)
                beside = os.path.join(os.path.dirname(real), "ld.lld")
                path = beside if os.path.isfile(beside) else (shutil.which("ld.lld") or "")
    return [path] if path and os.path.exists(path) else []


def fingerprint(
    manifest: bytes, inputs: Sequence[str], known: dict[str, list[Any]], linker: str = ""
) -> tuple[str, dict[str, list[Any]]] | None:
    """The digest of MANIFEST, the LINKER's identity and the contents of INPUTS, and the per-file records to
    keep for the next run.

    KNOWN holds the previous run's records ([size, mtime_ns, inode, sha256] by path): a file whose first three
    are unchanged is not read again. None when an input is not a regular file (a phony name, or missing):
    such an edge always runs lld, as ninja alone would decide.
    """
    h = hashlib.sha256(FINGERPRINT_VERSION)
    h.update(hashlib.sha256(manifest).digest())
    h.update(linker.encode())
    files: dict[str, list[Any]] = {}
    for path in inputs:
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        signature = [st.st_size, st.st_mtime_ns, st.st_ino]
        previous = known.get(path)
        digest = previous[3] if previous is not None and previous[:3] == signature else file_sha256(path)
        files[path] = [*signature, digest]
        h.update(f"{path}\0{digest}\0".encode())
    return h.hexdigest(), files


def _outputs(m: dict[str, Any]) -> list[str]:
    kept = [f for x in manifest_index_files(m) for f in x[3:]]
    outputs = [*kept, m["split_object"][1], m["used_list"], m["final_rsp"], m["dyndep"], m["rsp_path"]]
    outputs += [partition_paths(m["partition_dir"], k)[0] for k in range(m.get("partitions", 0))]
    return [o for o in outputs if o]


def _read_state(path: str) -> dict[str, Any]:
    try:
        state = json.loads(read_bytes(path))
    except (OSError, ValueError, RecursionError):
        return {}
    return state if isinstance(state, dict) else {}


def run(manifest_path: str) -> int:
    text = read_text(manifest_path, MANIFEST)
    m = check_manifest(decode_json(text, manifest_path, MANIFEST), manifest_path)
    raw = text.encode()
    state_path = m.get("state", "")  # absent from manifests written before the fingerprint, until gn reruns the hook
    if not state_path:
        return thin_link(m)
    check_manifest(m, manifest_path, ("inputs",))
    state = _read_state(state_path)
    try:  # a new toolchain under the same path makes the next thin link run lld again: the driver's and lld's
        linker = "\0".join(compiler_identity(p) for p in (m["argv"][0], *linker_of(m["argv"])))
    except OSError:
        linker = ""
    current = fingerprint(raw, m["inputs"], state.get("files", {}), linker) if linker else None
    if current is not None and state.get("fingerprint") == current[0] and all(map(os.path.isfile, _outputs(m))):
        return 0  # same inputs as the last successful run: lld would write the same files
    remove_if_exists(state_path)  # a failed run below must not leave a record of success
    rc = thin_link(m, checked=state.get("checked") == FINGERPRINT_VERSION.hex())
    if rc == 0 and current is not None:
        write_if_changed(state_path, json.dumps({"fingerprint": current[0], "files": current[1],
                                                 "checked": FINGERPRINT_VERSION.hex()}))
    return rc


def check_module_hashes(m: dict[str, Any], every: bool = True) -> None:
    """Refuse a backend importing from a module without a module hash (thinlto_base.bitcode_blocks.unhashed_modules):
    its index, its cache key and ninja's restat would not change with that module, and the backend would keep
    the code it inlined before. Reads the indexes lld just staged, tens of microseconds each: all of them when
    EVERY, else those that differ from the ones kept (a kept index passed this check when it was kept)."""
    for bitcode, staged_index, staged_imports, index, imports in manifest_index_files(m):
        for staged in (staged_index, staged_imports):
            if not os.path.isfile(staged):
                raise GnThinltoError(f"thin link of {m['target']}: lld wrote no {staged}")
        if not every and same_files(staged_index, index) and same_files(staged_imports, imports):
            continue
        unhashed = unhashed_modules(staged_index)
        if unhashed is None:
            raise GnThinltoError(f"thin link of {m['target']}: cannot read the module table of {staged_index}")
        imported = set(read_text(staged_imports, "imports file").split("\n")) if unhashed else set()
        bad = sorted(set(unhashed) & imported)  # lld ends each path with "\n" alone (a path may hold \r or \f)
        if bad:
            raise GnThinltoError(
                f"thin link of {m['target']}: {bitcode} imports from {bad[0]}, which has no module hash (bitcode "
                "written without one, as by opt -module-summary): a change to it would not reach this backend; "
                "write it with clang -flto=thin (or opt -module-hash), or leave the target to GN (targets.exclude)")


def thin_link(m: dict[str, Any], checked: bool = False) -> int:
    """Run lld's thin link and keep its outputs (only changed files move), then the final rsp and dyndep. CHECKED:
    the kept indexes passed this code's checks (the last success was this code's)."""
    import shlex
    import shutil
    import subprocess

    write_if_changed(m["rsp_path"], "\n".join(shlex.quote(x) for x in m["rsp_lines"]) + "\n")
    stage = m["stage_dir"]
    shutil.rmtree(stage, ignore_errors=True)
    os.makedirs(stage)
    partitions, reason = 0, ""
    if m.get("partitions"):
        from gn_thinlto.steps import partitions as parts

        partitions, reason = parts.count(m)
    # With 2 or more partitions lld writes the optimized regular-LTO module to its -o, for the partition edges
    argv = [*m["argv"], parts.EMIT_MODULE] if partitions >= 2 else m["argv"]
    from thinlto_base.compile_env import compile_environment  # as the backends run: the same clang, the same flags

    proc = subprocess.run(argv, capture_output=True, text=True, env=compile_environment())
    if proc.returncode != 0:
        from thinlto_base.compile_env import explain_failure

        sys.stderr.write(proc.stdout + proc.stderr)
        if note := explain_failure(proc.returncode):
            print(note, file=sys.stderr)
        print(f"gn-thinlto: thin link of {m['target']} failed (exit {proc.returncode})", file=sys.stderr)
        return proc.returncode
    if proc.stderr:
        sys.stderr.write(proc.stderr)
    check_module_hashes(m, every=not checked)  # before any index moves: a refused one must not look kept
    for _, staged_index, staged_imports, index, imports in manifest_index_files(m):
        replace_if_changed(staged_index, index)
        replace_if_changed(staged_imports, imports)
    staged, kept = m["split_object"]
    if not os.path.isfile(staged):
        raise GnThinltoError(f"thin link of {m['target']}: lld wrote no regular-LTO object {staged}")
    replace_if_changed(staged, kept)
    from gn_thinlto.steps.dyndep import dyndep_text

    if partitions >= 2:  # the partition edges compile the module lld wrote
        regular = parts.split(m, argv[argv.index("-o") + 1], partitions, reason)
    else:
        from gn_thinlto.steps.elf_probe import has_real_symbols

        regular = [kept] if has_real_symbols(kept) else []
        if m.get("partitions"):
            parts.leave(m, [], partitions, f"{reason}: the thin link compiled the module")
    used = used_bitcode(m["staged_used_list"], m["stage_dir"])
    unknown = sorted(set(used) - set(m["bitcode"]))
    if unknown:
        raise GnThinltoError(f"thin link of {m['target']}: lld used {unknown[0]}, which gn-thinlto did not plan")
    write_if_changed(m["used_list"], "".join(f"{u}\n" for u in used))
    full = dict(m["minimized"])
    why = [(full.get(r, r), full.get(x, x)) for r, x in read_why_extract(m["why_extract"])]
    rsp = "\n".join(shlex.quote(x) for x in compose_final_inputs(m, used, why, regular)) + "\n"
    write_if_changed(m["final_rsp"], rsp)
    if not m["dyndep"]:  # config dyndep: false; the final link depends on every native statically
        return 0
    native_of = manifest_natives(m)
    natives = [*(regular if m.get("partitions") else [m["split_object"][1]]), *(native_of[u] for u in used)]
    # The rsp digest makes the dyndep file (the final link's only input from this edge) change with the rsp.
    digest = hashlib.sha256(rsp.encode()).hexdigest()
    write_if_changed(m["dyndep"], dyndep_text(m["final_output"], natives, digest))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("gn-thinlto: error: usage: thinlink.py MANIFEST.json", file=sys.stderr)
        return 2
    try:
        return run(args[0])
    except (GnThinltoError, OSError) as e:
        print(f"gn-thinlto: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
