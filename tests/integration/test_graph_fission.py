"""[chromium] Debug fission (-gsplit-dwarf on the link line, the example's use_debug_fission): each backend
writes the .dwo file of its object, as lld's in-process ThinLTO writes one per module (OUTPUT_dwo/N.dwo),
and the skeleton units in the binaries point at files that exist and hold the same compile units."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.builds import copy_example_tree
from tests.conftest import FISSION_ARGS as ARGS
from tests.conftest import FISSION_TARGETS as BUILT

from .test_graph_support import Build, relinked_in_process, unstripped

pytestmark = pytest.mark.slow
DWARFDUMP = "/usr/lib/llvm-19/bin/llvm-dwarfdump"
BINARIES = BUILT  # an executable, one that loads a shared library, and the library


@pytest.fixture(scope="module")
def built(example_fission: Build, tmp_path_factory: pytest.TempPathFactory) -> Build:
    """A copy of the run's build with debug fission (`example_fission`), for this module to change: its compile
    units' DW_AT_comp_dir is still the directory they were compiled in, example_fission's (`skeleton_dwo_files`
    with COMPILED_IN)."""
    return copy_example_tree(example_fission, tmp_path_factory.mktemp("fission"))


@pytest.fixture(scope="module")
def reference(built: Build) -> Build:
    """BUILT's compiles linked by lld in-process, in a copy of its build directory beside it (GN's own graph)."""
    return relinked_in_process(built, built.out.parent / "ref", ARGS, BUILT)


def _attr(text: str, name: str) -> list[str]:
    return re.findall(rf'{name}\s+\("([^"]*)"\)', text)


def skeleton_dwo_files(out: Path, binary: str, compiled_in: Path | None = None) -> list[Path]:
    """The .dwo file each skeleton unit of BINARY names (DW_AT_dwo_name, relative to DW_AT_comp_dir). A binary
    linked in a copy of the build directory COMPILED_IN has that directory as every unit's DW_AT_comp_dir (the
    compile's, in the bitcode) and its .dwo files where its link wrote them, in OUT."""
    text = subprocess.run([DWARFDUMP, "--debug-info", str(unstripped(out, binary))],
                          capture_output=True, text=True, check=True).stdout
    files = []
    for unit in text.split("Compile Unit:")[1:]:  # units without a dwo name (the .S object's) are not split
        names = _attr(unit, "DW_AT_dwo_name")
        if names:
            comp_dir = Path(_attr(unit, "DW_AT_comp_dir")[0])
            if compiled_in is not None:
                assert comp_dir == compiled_in.resolve(), (binary, comp_dir)
                comp_dir = out.resolve()
            files.append(comp_dir / names[0])
    assert files, binary
    return files


def dwo_unit_names(files: list[Path]) -> list[str]:
    """The source file of the compile unit in each .dwo file (one llvm-dwarfdump for all, the units' own entries)."""
    text = subprocess.run([DWARFDUMP, "--debug-info", "--recurse-depth=0", *map(str, files)],
                          capture_output=True, text=True, check=True).stdout
    dumps = re.split(r"^\S.*:\s+file format ", text, flags=re.MULTILINE)[1:]  # one per file, in order
    assert len(dumps) == len(files), (len(dumps), files)
    return sorted(_attr(dump, "DW_AT_name")[0] for dump in dumps)


def test_binaries_pass_their_checks(built: Build, reference: Build) -> None:
    for b in (built, reference):
        for name in ("calc", "archiver"):
            assert b.run_binary(name) == f"OK {name}"


def test_skeletons_point_at_backend_dwo_files(built: Build, example_fission: Build) -> None:
    for binary in BINARIES:
        files = skeleton_dwo_files(built.out, binary, example_fission.out)
        for f in files:
            assert f.is_file(), (binary, f)
            assert "/native/" in f.as_posix() and f.suffix == ".dwo", f
        # ninja knows them: every one is an output of a backend edge
        rel = [f.relative_to(built.out.resolve()).as_posix() for f in files]
        query = subprocess.run(["ninja", "-C", str(built.out), "-t", "query", *rel], capture_output=True, text=True)
        assert query.returncode == 0 and query.stdout.count("input: gn_thinlto_backend") == len(rel), query.stdout


def test_same_compile_units_as_in_process(built: Build, reference: Build, example_fission: Build) -> None:
    for binary in BINARIES:
        ours = dwo_unit_names(skeleton_dwo_files(built.out, binary, example_fission.out))
        theirs = dwo_unit_names(skeleton_dwo_files(reference.out, binary, example_fission.out))
        assert ours == theirs, binary


def test_a_cache_hit_restores_the_dwo_file(built: Build, example_fission: Build) -> None:
    dwo = next(f for f in skeleton_dwo_files(built.out, "calc", example_fission.out) if f.name == "calc.main.dwo")
    native = dwo.with_suffix(".o")
    log = built.out / "gn-thinlto/backend.log"
    before = log.read_text().splitlines()
    dwo.unlink()
    native.unlink()
    built.ninja(*BUILT)
    new = log.read_text().splitlines()[len(before):]
    assert len(new) == 1 and new[0].startswith("hit "), new
    assert dwo.is_file() and native.is_file()
    assert built.run_binary("calc") == "OK calc"
