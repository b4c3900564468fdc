"""gn_thinlto.yaml parsing and validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from gn_thinlto.plan.config import Config, LinkWrapper
from gn_thinlto.plan.config import TestonlyMode as Mode, label_matches, load_config, parse_config
from gn_thinlto.errors import GnThinltoError


def test_defaults() -> None:
    assert parse_config(None, "x") == Config()
    c = Config()
    assert c.selects("//any:thing") and c.testonly is Mode.THIN_LINK


def test_full_config(tmp_path: Path) -> None:
    (tmp_path / "gn_thinlto.yaml").write_text(
        "targets: {include: ['//apps/*'], exclude: ['//apps/big:*']}\n"
        "target_dir: 'lto/{name}'\ntestonly: shared_null_index\n"
        "backend_flags: {add: ['-g1'], remove: ['-fdata-sections']}\n"
        "thin_link_pool_depth: 1\nminimized_bitcode: true\ncache_dir: /tmp/cache\n"
        "backend_cache: false\ndyndep: false\n"
        "link_wrappers: [{match: '*/wrap.sh', inner_after: '--link'}]\n"
    )
    c = load_config(None, tmp_path)
    assert c.include == ("//apps/*",) and c.exclude == ("//apps/big:*",)
    assert c.selects("//apps/calc:calc") and not c.selects("//apps/big:big") and not c.selects("//base:base")
    assert c.testonly is Mode.SHARED_NULL_INDEX and c.minimized_bitcode and c.thin_link_pool_depth == 1
    assert c.backend_flags_add == ("-g1",) and c.cache_dir == "/tmp/cache" and c.target_dir == "lto/{name}"
    assert not c.backend_cache and Config().backend_cache
    assert not c.dyndep and Config().dyndep
    assert c.link_wrappers == (LinkWrapper("*/wrap.sh", "--link"),)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"bogus": 1}, "unknown key(s) bogus"),
        ({"testonly": "maybe"}, "testonly: expected one of thin_link, shared_null_index"),
        ({"thin_link_pool_depth": -1}, "thin_link_pool_depth: expected an integer >= 0"),
        ({"targets": {"include": "//x"}}, "targets.include: expected a list of strings"),
        ({"minimized_bitcode": "yes"}, "minimized_bitcode: expected true or false"),
        ({"backend_cache": "off"}, "backend_cache: expected true or false"),
        ({"target_dir": "fixed"}, "target_dir: must be a string containing"),
        ({"dyndep": "no"}, "dyndep: expected true or false"),
        ({"cache_policy": "cache_size=200%"}, "cache_policy: cache_size='200%': expected a percentage"),
        ({"cache_policy": "prune_after=1y"}, "cache_policy: prune_after='1y': expected a duration"),
        ({"link_wrappers": {"match": "x"}}, "link_wrappers: expected a list of"),
        ({"link_wrappers": [{"match": "x"}]}, "link_wrappers[0]: inner_after: expected a non-empty string"),
        ({"link_wrappers": [{"match": "x", "inner_after": "--", "y": 1}]}, "link_wrappers[0]: unknown key(s) y"),
        ([1, 2], "expected a mapping"),
    ],
)
def test_errors_are_one_clear_line(data: object, message: str) -> None:
    with pytest.raises(GnThinltoError, match="^cfg.yaml: .*") as e:
        parse_config(data, "cfg.yaml")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_bad_yaml_and_missing_explicit(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("targets: [\n")
    with pytest.raises(GnThinltoError, match="not valid YAML"):
        load_config(bad, tmp_path)
    with pytest.raises(GnThinltoError, match="no such file"):
        load_config(tmp_path / "missing.yaml", tmp_path)


def test_label_patterns() -> None:
    assert label_matches("//base/*", "//base:base") and label_matches("//base/*", "//base/x:y")
    assert not label_matches("//base/*", "//basex:y")
    assert label_matches("//a:*", "//a:b") and label_matches("//a:b", "//a:b")
