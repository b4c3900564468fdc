"""write_text (thinlto_base.fileerrors), which writes the reports a user asks for (`report --html`, `trace -o`): the
path is opened before the text is made, so a bad one fails first; a failure while making it leaves an older report
as it was and no new empty file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gn_thinlto.errors import GnThinltoError, write_text


def _broken() -> str:
    raise RuntimeError("drawing failed")


def test_a_path_it_cannot_write_fails_before_the_text_is_made(tmp_path: Path) -> None:
    made: list[int] = []
    with pytest.raises(GnThinltoError, match="--html .*missing/r.html: No such file or directory"):
        write_text(tmp_path / "missing" / "r.html", lambda: str(made.append(1)), "--html")
    assert made == []


def test_the_text_replaces_an_older_report(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    page.write_text("an older, longer report\n")
    write_text(page, lambda: "new\n", "--html")
    assert page.read_text() == "new\n"


def test_a_failure_while_making_it_keeps_an_older_report_and_leaves_no_new_file(tmp_path: Path) -> None:
    old, new = tmp_path / "old.html", tmp_path / "new.html"
    old.write_text("the older report\n")
    for path in (old, new):
        with pytest.raises(RuntimeError, match="drawing failed"):
            write_text(path, _broken, "--html")
    assert old.read_text() == "the older report\n" and not new.exists()
