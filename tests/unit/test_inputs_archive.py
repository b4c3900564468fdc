"""Archive member references and thin-archive member lookup."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goma_ext.errors import GomaExtError
from goma_ext.inputs.archive import MemberRef, parse_member_ref, thin_member_path
from tests import budget

DATA = Path(__file__).parent / "index_data"


def test_parse_member_ref() -> None:
    assert parse_member_ref("lib/x.a(a b.o at 12)") == MemberRef("lib/x.a", "a b.o", 12)
    assert parse_member_ref("obj/a.o") is None


def test_thin_member_paths() -> None:
    data = (DATA / "thin-libt.a").read_bytes()
    assert thin_member_path("libt.a", data, 170) == "obj/c.o"
    assert thin_member_path("out/lib/libt.a", data, 230) == "out/lib/obj/d.o"
    assert thin_member_path("lib.a", (DATA / "regular-head.a").read_bytes(), 8) is None


def test_bad_offsets_are_user_errors() -> None:
    data = (DATA / "thin-libt.a").read_bytes()
    for offset in (171, 10_000):
        with pytest.raises(GomaExtError, match="libt.a"):
            thin_member_path("libt.a", data, offset)


@settings(max_examples=budget.cases(500), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=6), st.integers(0, 400))
def test_mutated_thin_archives(edits: list[tuple[int, int]], offset: int) -> None:
    data = bytearray((DATA / "thin-libt.a").read_bytes())
    for pos, value in edits:
        data[pos % len(data)] = value
    try:
        result = thin_member_path("libt.a", bytes(data), offset)
    except GomaExtError as e:
        assert "\n" not in str(e)
    else:
        assert result is None or isinstance(result, str)
