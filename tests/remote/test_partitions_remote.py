"""[partition] Partition edges run remotely like backends: the example's calc with its regular-LTO module in 3
partitions (CFI without whole-program devirtualization), built locally (the run's `example_partitions`), then
again with `--remote` from a copy without its backends: every partition object is compiled by a remote action
and equals the local one."""

from __future__ import annotations

from pathlib import Path

import pytest

from goma_ext.remote import stats
from tests.builds import Build, copy_without_backends
from tests.remote.conftest import Cluster
from tests.remote.test_example_remote import _gen, _ninja


@pytest.mark.slow
def test_partitions_compile_remotely_as_locally(cluster: Cluster, tmp_path: Path, salt: str,
                                                example_partitions: Build) -> None:
    local = example_partitions  # the run's local build, read only
    parts = [local.out / f"gn-thinlto/calc/lto/part{k}.o" for k in range(3)]
    want = [p.read_bytes() for p in parts]
    assert all(want)
    remote = copy_without_backends(local, tmp_path / "remote")
    _gen(remote, cluster.endpoint)
    _ninja(remote.out, salt, targets=("calc",))
    assert [(remote.out / p.relative_to(local.out)).read_bytes() for p in parts] == want
    summary = stats.report(remote.out)
    assert summary["remote_executions"] == summary["runs"] > 3, summary
    # the backend step ties each remote action to its output: one per partition
    log = (remote.out / "gn-thinlto/backend.log").read_text().split("\n")
    ran = {line.split(" ")[2] for line in log if line.startswith("remote ")}
    assert {f"gn-thinlto/calc/lto/part{k}.o" for k in range(3)} <= ran, sorted(ran)
    assert remote.run_binary("calc")
