"""[graph] Incremental behaviour, counted from .ninja_log: restat keeps unchanged index files, so only the
backends whose bitcode or index changed run; identical jobs are cache hits; a second ninja does nothing."""

from __future__ import annotations


import pytest

from .test_graph_support import Build, copy_workspace, edit_and_rebuild, gen_and_build, native_of

SQUARE_OBJ = "obj/lib/lib.square.o"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Build:
    root = copy_workspace("basic", tmp_path_factory.mktemp("inc"))
    return gen_and_build(root, root.parent / "out")


def _own_natives(b: Build, obj: str) -> set[str]:
    """The native of OBJ in every target whose thin link used it."""
    out = set()
    for used in (b.out / "gn-thinlto").glob("*/used.txt"):
        if obj in used.read_text().split():
            out.add(f"gn-thinlto/{used.parent.name}/native/{obj}")
    return out


def test_comment_only_edit_reruns_only_that_objects_backends_as_cache_hits(built: Build) -> None:
    r = edit_and_rebuild(built, "lib/square.cc", "namespace lib {", "// a comment\nnamespace lib {")
    own = _own_natives(built, SQUARE_OBJ)
    assert len(own) == 5  # app, tool, app_unittests, lib_unittests, libcomp.so
    assert r.changed_index == set()
    assert r.backends == own
    assert len(r.cache_lines) == 5 and all(line.startswith("hit ") for line in r.cache_lines)
    assert not any(o in r.ran for o in ("app", "tool", "app_unittests", "lib_unittests", "libcomp.so")), r.ran  # natives unchanged


def test_body_change_reruns_that_object_and_changed_indexes_only(built: Build) -> None:
    r = edit_and_rebuild(built, "lib/square.cc", "return x * x;", "return x > 100000 ? x * x + 1 : x * x;")
    own = _own_natives(built, SQUARE_OBJ)
    importers = {native_of(p) for p in r.changed_index}
    assert r.changed_index, "a function other modules import changed: their indexes must change"
    assert own <= r.backends
    assert r.backends <= own | importers, sorted(r.backends - own - importers)
    # Objects that neither changed nor import from lib/square.cc kept their native objects.
    assert not any("reg.reg.o" in o or "ss.ss.o" in o for o in r.backends)


def test_second_ninja_is_a_no_op(built: Build) -> None:
    assert "no work to do" in built.ninja("-n")
