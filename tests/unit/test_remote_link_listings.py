"""[scale] A remote link's map and dependency files name its inputs as a local link's do.

The remote lld finds a search directory outside the exec root (an absolute -L, or a relative one that leaves the
root) under .gn-thinlto-abs/, so it names a library found there by that place. The shim puts back the spelling the
link's own arguments use. Checked with the real ld.lld-19: the link as the remote worker runs it (its arguments, in
an input root laid out as the CAS gives it) writes, once respelled, the same map and dependency file as a local
link.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from goma_ext.remote.remote_link import ABS_DIR, link_files, respell_listings

LLD, CLANG, AR = shutil.which("ld.lld-19"), shutil.which("clang-19"), shutil.which("llvm-ar-19")
pytestmark = pytest.mark.skipif(None in (LLD, CLANG, AR), reason="needs ld.lld-19, clang-19, llvm-ar-19 (Debian)")


def _compile(source: Path, text: str) -> Path:
    source.write_text(text)
    obj = source.with_suffix(".o")
    subprocess.run([str(CLANG), "-c", "-O1", str(source), "-o", str(obj)], check=True)
    return obj


@pytest.mark.parametrize("spelling", ["absolute", "relative"])
def test_a_remote_links_map_and_depfile_name_inputs_as_a_local_link(tmp_path: Path, spelling: str) -> None:
    root, ext = tmp_path / "src", tmp_path / "ext"  # ext: outside the exec root
    out = root / "out"
    out.mkdir(parents=True)
    ext.mkdir()
    _compile(out / "main.c", "int ext_value(void);\nint entry(void) { return ext_value(); }\n")
    subprocess.run([str(AR), "rcs", str(ext / "libext.a"), str(_compile(ext / "ext.c", "int ext_value(void) { "
                                                                         "return 7; }\n"))], check=True)
    search = str(ext) if spelling == "absolute" else "../../ext"
    args = ["main.o", f"-L{search}", "-lext", "-e", "entry", "-o", "app", "-Map", "app.map",
            "--dependency-file", "app.d"]
    subprocess.run([str(LLD), *args], cwd=out, check=True)
    local = {name: (out / name).read_bytes() for name in ("app", "app.map", "app.d")}
    assert f"{search}/libext.a".encode() in local["app.map"]

    files = link_files(args, out, root)
    assert files.listings == ["app.map", "app.d"]
    stage = tmp_path / "input-root"  # what the worker's input root holds
    for rel, path in files.reads.items():
        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, stage / rel)
    work = stage / files.work
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(LLD), *files.args], cwd=work, check=True)
    assert ABS_DIR.encode() in (work / "app.map").read_bytes()  # what lld writes remotely names the placed file

    respell_listings(files, work)
    assert {name: (work / name).read_bytes() for name in ("app", "app.map", "app.d")} == local
    assert files.respell(f"ld.lld: warning: {files.args[1][2:]}/libext.a: x".encode()) == \
        f"ld.lld: warning: {search}/libext.a: x".encode()
