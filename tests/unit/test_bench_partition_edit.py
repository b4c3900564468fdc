"""[partition] The partition-edit benchmark's pure parts: the edit it makes, and how it reads the backend log."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import partition_edit_bench, variants
from bench.measure import BenchError


def test_each_edit_replaces_the_last_statement_in_the_test_body(tmp_path: Path) -> None:
    path = tmp_path / partition_edit_bench.SOURCE
    path.parent.mkdir(parents=True)
    path.write_text(f"int x;\n{partition_edit_bench.ANCHOR}\n  EXPECT_TRUE(true);\n}}\n")
    partition_edit_bench.edit(tmp_path)
    partition_edit_bench.edit(tmp_path)
    text = path.read_text()
    assert text.count("gn_thinlto_bench_edit =") == 1
    assert text.index(partition_edit_bench.ANCHOR) < text.index("gn_thinlto_bench_edit") < text.index("EXPECT_TRUE")
    path.write_text("int x;\n")
    with pytest.raises(BenchError, match="not found"):
        partition_edit_bench.edit(tmp_path)


def test_partition_edges_are_counted_apart_from_the_backends(tmp_path: Path) -> None:
    log = tmp_path / variants.GRAPH_BACKEND_LOG
    log.parent.mkdir(parents=True)
    old = "miss k0 gn-thinlto/t/lto/part0.o\n"
    log.write_text(old + "miss k1 gn-thinlto/t/lto/part1.o\nhit k2 gn-thinlto/t/lto/part2.o\n"
                   "hit k3 gn-thinlto/t/lto/part3.o\nmiss k4 gn-thinlto/t/native/obj/a.o\nhit k5 gn-thinlto/t/native/b.o\n")
    since = variants.Counters(0, len(old), 0)
    assert partition_edit_bench.partition_events(tmp_path, since) == (1, 2, 1)
