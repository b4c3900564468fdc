"""Renaming modules in a backend index: the module table changes, nothing else (checked by decoding)."""

from __future__ import annotations

from pathlib import Path

import pytest

from goma_ext.bitcode.canonical import canonical_index_digest
from goma_ext.bitcode.index import parse_index
from goma_ext.bitcode.rename import rename_modules

DATA = Path(__file__).parent / "index_data"


@pytest.mark.parametrize("name", ["llvm19-a.o.thinlto.bc", "llvm22-a.o.thinlto.bc"])
def test_rename_changes_the_paths_and_nothing_else(name: str, tmp_path: Path) -> None:
    data = (DATA / name).read_bytes()
    before = parse_index(data, name=name, summaries=False).modules
    old = before[-1].path
    new = "stage/m/" + "x" * 70 + ".o"  # longer than any original: the table grows by words
    renamed = rename_modules(data, {old: new, "not-in-the-index.o": "y.o"})
    after = parse_index(renamed, name="renamed", summaries=False).modules
    assert [m.path for m in after] == [new if m.path == old else m.path for m in before]
    assert [(m.modid, m.hash) for m in after] == [(m.modid, m.hash) for m in before]
    (tmp_path / "a").write_bytes(data)
    (tmp_path / "b").write_bytes(renamed)
    own = before[0].path
    assert canonical_index_digest(tmp_path / "a", own) == canonical_index_digest(tmp_path / "b", own)
    assert len(renamed) % 4 == 0 and len(renamed) > len(data)


def test_no_renames_is_an_equivalent_index(tmp_path: Path) -> None:
    data = (DATA / "llvm22-a.o.thinlto.bc").read_bytes()
    (tmp_path / "a").write_bytes(data)
    (tmp_path / "b").write_bytes(rename_modules(data, {}))
    assert canonical_index_digest(tmp_path / "a", "a.o") == canonical_index_digest(tmp_path / "b", "a.o")


def test_a_staged_member_already_there_is_used_only_if_it_holds_the_members_bytes(tmp_path: Path) -> None:
    """DTLTO stages archive members by content: a file left at a member's staged name (a killed run's, or one
    someone put there) used to be kept as it was, and the remote backend imported it."""
    from goma_ext.dtlto.inputs import stage_members

    data = (DATA / "llvm22-a.o.thinlto.bc").read_bytes()
    old = parse_index(data, name="a", summaries=False).modules[-1].path
    member = "libx.a(y.o at 1234).1.0a1b2c.o"
    (tmp_path / "index.bc").write_bytes(rename_modules(data, {old: member}))
    (tmp_path / member).write_bytes(b"the member's bitcode")
    renames = stage_members(tmp_path, "index.bc", "staged.bc", "stage")
    staged = tmp_path / renames[member]
    assert staged.read_bytes() == b"the member's bitcode"
    staged.unlink()
    staged.write_bytes(b"a leftover of the same name")
    stage_members(tmp_path, "index.bc", "staged.bc", "stage")
    assert staged.read_bytes() == b"the member's bitcode"
    staged.unlink()
    staged.symlink_to(tmp_path / member)  # even one with the right bytes, if through a link
    stage_members(tmp_path, "index.bc", "staged.bc", "stage")
    assert not staged.is_symlink() and staged.read_bytes() == b"the member's bitcode"
