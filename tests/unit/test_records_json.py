"""records_json.dumps against json.dumps(asdict(…), indent=N, sort_keys=True), which it replaces."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gn_thinlto.plan.config import Config
from gn_thinlto.plan.config import TestonlyMode as Mode
from gn_thinlto.render.records_json import dumps

from .test_plan import basic_plan


@dataclass(frozen=True)
class _Leaf:
    name: str
    values: tuple[str, ...]
    extra: object = None


@dataclass(frozen=True)
class _Record:
    z_last: tuple[_Leaf, ...]
    a_first: object
    pairs: tuple[tuple[str, str], ...] = ()


_scalars = st.one_of(st.text(), st.integers(), st.floats(allow_nan=True), st.booleans(), st.none())
_json_like = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner), st.lists(inner).map(tuple), st.dictionaries(st.text(), inner),
                            st.builds(_Leaf, st.text(), st.lists(st.text()).map(tuple), inner)),
    max_leaves=30,
)
_records = st.builds(_Record, st.lists(st.builds(_Leaf, st.text(), st.lists(st.text()).map(tuple), _json_like)).map(tuple),
                     _json_like, st.lists(st.tuples(st.text(), st.text())).map(tuple))


@given(_records, st.integers(min_value=0, max_value=3))
def test_same_text_as_json_dumps_of_asdict(record: _Record, indent: int) -> None:
    assert dumps(record, indent) == json.dumps(asdict(record), indent=indent, sort_keys=True)


@pytest.mark.parametrize("mode", [Mode.THIN_LINK, Mode.SHARED_NULL_INDEX], ids=lambda m: m.value)
def test_thin_link_manifests(mode: Mode) -> None:
    manifests = [t.thin_link.manifest for t in basic_plan(Config(testonly=mode)).targets if t.thin_link]
    assert manifests
    for m in manifests:
        assert dumps(m, 1) == json.dumps(asdict(m), indent=1, sort_keys=True)


def test_non_str_keys_are_refused() -> None:
    with pytest.raises(TypeError):
        dumps({1: "a"}, 1)
    with pytest.raises(TypeError):
        dumps(["a", object()], 1)
