"""The bundled example built with `gn-thinlto gen --remote`: every backend the local content cache does not
already hold runs remotely through `goma-ext run`; thin links and final links stay local. Checks: every
native object equals a local build's, every binary self-checks, and a second build in a fresh directory is
served entirely from the action cache.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gn_thinlto import tools
from gn_thinlto.cli.example import run_self_checks
from goma_ext.remote import stats
from goma_ext.remote.config import DEFAULT_STATS_LOG
from tests.builds import Build, copy_without_backends
from tests.conftest import FISSION_ARGS
from tests.remote.conftest import INSTANCE, Cluster
from thinlto_base import remote_stub

JOBS = "6"


def _gen(b: Build, endpoint: str | None, *args: str) -> None:
    remote = ["--remote", endpoint] if endpoint else []
    subprocess.run([sys.executable, "-m", "gn_thinlto.cli", "gen", str(b.out), "--root", str(b.root), *args, *remote],
                   check=True, capture_output=True, env={**os.environ, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE})


# What the tests that need not build everything build: three links (archiver links libcodec.so), 54 remote
# backends, 40 % of the whole example's 134.
SOME = ("crc_tool", "archiver")


def _ninja(out: Path, salt: str, accounting: Path | None = None, targets: tuple[str, ...] = ()) -> None:
    env = {**os.environ, "GOMA_EXT_CACHE_SALT": salt}
    if accounting is not None:
        env["GN_THINLTO_STEP_ACCOUNTING"] = str(accounting)
    proc = subprocess.run(["ninja", "-C", str(out), "-j", JOBS, *targets], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "goma-ext: warning" not in proc.stdout, proc.stdout[-3000:]


def _natives(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "gn-thinlto").glob("*/native/**/*.o"))}


@pytest.fixture(scope="module")
def local_natives(example_tree: Build) -> dict[str, bytes]:
    """What every remote build must reproduce: the natives of the session's local build of the example (which
    the remote builds start from copies of, `copy_without_backends`, so the example's compiles run once per
    session)."""
    return _natives(example_tree.out)


def _self_checks(b: Build) -> None:
    binaries = tools.gn_ls(b.out, b.root, "--type=executable", "--as=output")
    assert binaries and [c for c in run_self_checks(b.out, binaries) if not c.ok] == []


@pytest.mark.slow
def test_example_builds_remotely_byte_identical_then_from_the_cache(cluster: Cluster, tmp_path: Path, salt: str,
                                                                    example_tree: Build,
                                                                    local_natives: dict[str, bytes]) -> None:
    remote_b, fresh_b = (copy_without_backends(example_tree, tmp_path / name) for name in ("remote", "fresh"))
    remote, fresh = remote_b.out, fresh_b.out
    _gen(remote_b, cluster.endpoint)
    _ninja(remote, salt)

    summary = stats.report(remote)
    assert summary["runs"] > 100 and summary["remote_executions"] == summary["runs"], summary
    # What is uploaded is at most the inputs, apart from the compiler itself (`toolchain: inputs`), which a
    # cluster whose CAS has not seen it yet (this test run alone) takes with the build's first action.
    uploads = sorted(r.bytes_uploaded for r in stats.read(remote / DEFAULT_STATS_LOG))
    assert summary["naive_upload_bytes"] > summary["input_bytes"] >= sum(uploads[:-1])
    want, got = local_natives, _natives(remote)
    # Backends the local content cache already held (identical jobs of other binaries) never reach the wrapper;
    # a two-step backend (matrix_tool_lto_o0's, --lto-O0) is two wrapper runs: its module, then its object.
    two_step = sum(1 for r in stats.read(remote / DEFAULT_STATS_LOG) if r.output.endswith("/optimized.bc"))
    assert two_step > 0 and len(got) > summary["runs"] - two_step and sorted(got) == sorted(want)
    assert [name for name in want if got[name] != want[name]] == []

    _self_checks(remote_b)

    _gen(fresh_b, cluster.endpoint)
    accounting = tmp_path / "steps.txt"
    _ninja(fresh, salt, accounting)
    again = stats.report(fresh)
    assert again["remote_executions"] == 0 and again["cache_hits"] == again["runs"] == summary["runs"], again
    # [lean] the step server runs the thin client in its own process: once it is up (the first edges run the
    # Python step, which starts it), a backend edge starts no command, remote or not. The exception: the edges
    # that run before the build directory knows the compiler's identity (a fresh directory: the full client
    # identifies it once), which the server hands back to the launcher, at most one per job slot.
    steps = [line.split() for line in accounting.read_text().splitlines()]
    launched, python = [s for s in steps if s[0] == "launcher"], [s for s in steps if s[0] == "python"]
    forwarded = [s for s in launched if s[2] != "0"]
    assert len(python) < len(launched) // 4 and len(forwarded) <= int(JOBS), steps
    assert again["bytes_uploaded"] == 0
    assert _natives(fresh) == got
    print(f"remote build: {summary}\nfresh build: {again}")
    # [trace] the backend slices of each build say how their misses ran and what they uploaded
    for out, how in ((remote, "remote"), (fresh, "cache_hit")):
        proc = subprocess.run([sys.executable, "-m", "gn_thinlto.cli", "trace", str(out), "-o", str(out / "t.json")],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        backends = [e["args"] for e in json.loads((out / "t.json").read_text())["traceEvents"]
                    if e.get("cat") == "backend"]
        misses = [a for a in backends if a["cache"] == "miss"]
        assert len(misses) == summary["runs"] - two_step, (len(misses), two_step)
        assert {a["execution"] for a in misses} == {how}, misses[:3]
        assert sum(a["bytes_uploaded"] for a in misses) == stats.report(out)["bytes_uploaded"]


@pytest.mark.slow
@pytest.mark.parametrize("download", ["all", "minimal"])
def test_split_dwarf_backends_bring_their_dwo_files_back(cluster: Cluster, tmp_path: Path, salt: str,
                                                         example_fission: Build, download: str) -> None:
    """[chromium] -gsplit-dwarf on the link line with remote backends: each remote action declares its .dwo as
    an output, so the object and its .dwo come back, equal to a local build's, and the binary's skeleton
    units name files that exist. Under `download: minimal` too, where the objects stay in the CAS: a link
    command's local post-link steps (Chromium's llvm-dwp) read the .dwo files. (calc alone: every backend is the
    same kind of action.) The local build is the run's (`example_fission`), whose compiles the remote build's
    copy starts from."""
    local = example_fission.out
    remote_b = copy_without_backends(example_fission, tmp_path / "remote")
    config = tmp_path / "gn_thinlto.yaml"
    config.write_text(f"remote:\n  download: {download}\n")
    _gen(remote_b, cluster.endpoint, "--args", FISSION_ARGS, "--config", str(config))
    _ninja(remote_b.out, salt + "-fission", targets=("calc",))
    natives = [p.read_bytes() for p in (remote_b.out / "gn-thinlto").glob("calc/native/**/*.o")]
    assert natives and all(remote_stub.is_stub_bytes(n) == (download == "minimal") for n in natives)
    remote = remote_b.out
    summary = stats.report(remote)
    assert summary["runs"] > 10 and summary["remote_executions"] == summary["runs"], summary
    dwo = {str(p.relative_to(remote)): p.read_bytes() for p in (remote / "gn-thinlto").glob("*/native/**/*.dwo")}
    # the local build built more links than calc (FISSION_TARGETS): calc's own .dwo files, each named once
    want = {str(p.relative_to(local)): p.read_bytes() for p in (local / "gn-thinlto").glob("calc/native/**/*.dwo")}
    assert len(dwo) > 10 and sorted(dwo) == sorted(want)
    assert [name for name in want if dwo[name] != want[name]] == []
    text = subprocess.run(["/usr/lib/llvm-19/bin/llvm-dwarfdump", "--debug-info", str(remote / "exe.unstripped/calc")],
                          capture_output=True, text=True, check=True).stdout
    names = [line.split('("')[1].rstrip('")') for line in text.splitlines() if "DW_AT_dwo_name" in line]
    assert names and all((remote / n).is_file() for n in names)
    proc = subprocess.run([str(remote / "calc")], cwd=remote, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK calc")


def _start_ninja(out: Path, env: dict[str, str], targets: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    return subprocess.Popen(["ninja", "-C", str(out), "-j", JOBS, *targets], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, **env})


def _proxies(state: str) -> list[dict[str, Any]]:
    out = subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "status", "--json"], capture_output=True,
                         text=True, check=True, env={**os.environ, "GOMA_EXT_PROXY_DIR": state}).stdout
    return list(json.loads(out))


SHARDS = "3"


@pytest.mark.slow
def test_a_proxy_shard_killed_mid_build_and_the_build_still_finishes_right(
    cluster: Cluster, tmp_path: Path, salt: str, example_tree: Build, local_natives: dict[str, bytes],
    own_proxy_dir: str
) -> None:
    """[proxy][scale] Three proxy shards behind three step servers; SIGKILL the busiest shard while ninja runs remote
    backends through them (of three links, SOME): the build finishes, every native object equals the local build's
    (clients whose connection dropped start a new proxy for that shard, or go to the next shard, or run locally),
    the binaries pass their self-checks, every step server served, and the other shards served on untouched."""
    remote_b = copy_without_backends(example_tree, tmp_path / "remote")
    remote = remote_b.out
    config = tmp_path / "gn_thinlto.yaml"
    config.write_text(f"step_servers: {SHARDS}\n")  # and three step servers in front of them
    _gen(remote_b, cluster.endpoint, "--config", str(config))
    env = {"GOMA_EXT_CACHE_SALT": salt + "-kill", "GOMA_EXT_PROXY_DIR": own_proxy_dir, "GOMA_EXT_PROXY_SHARDS": SHARDS}
    build = _start_ninja(remote, env, SOME)
    log = remote / stats.DEFAULT_STATS_LOG
    deadline = time.monotonic() + 120
    while not (log.is_file() and len(log.read_text().splitlines()) >= 20):
        assert build.poll() is None and time.monotonic() < deadline, "the build ended before the proxy was killed"
        time.sleep(0.1)
    before = _proxies(own_proxy_dir)
    victim = max(before, key=lambda p: (p["active"], p["runs"]))
    os.kill(victim["pid"], signal.SIGKILL)
    output, _ = build.communicate(timeout=600)
    assert build.returncode == 0, output[-3000:]
    got = _natives(remote)
    assert got and got == {name: local_natives.get(name) for name in got}
    assert [remote_b.run_binary(name) for name in SOME] == [f"OK {name}" for name in SOME]
    summary = stats.report(remote)
    after = {p["shard"]: p for p in _proxies(own_proxy_dir)}
    assert after[victim["shard"]]["pid"] != victim["pid"] and summary["failed"] == 0, summary
    assert len(list((remote / "gn-thinlto").glob("step-*.sock"))) == int(SHARDS)  # every step server served
    untouched = [p for p in before if p["shard"] != victim["shard"]]
    assert untouched and all(after[p["shard"]]["pid"] == p["pid"] for p in untouched), (before, after)
    print(f"shard {victim['shard']} (pid {victim['pid']}) killed after {victim['runs']} actions; shards served "
          f"{ {k: p['runs'] for k, p in sorted(after.items())} } in all; {summary['local_fallbacks']} local fallbacks")


@pytest.mark.slow
def test_two_builds_share_the_proxy_shards_and_each_action_runs_once(
    cluster: Cluster, tmp_path: Path, salt: str, example_tree: Build, local_natives: dict[str, bytes],
    own_proxy_dir: str
) -> None:
    """[proxy][scale] Two build directories of the same code built at the same time through three proxy shards: each
    distinct backend executes once (the other build joins it in flight or finds it in the action cache), because
    both builds send an action to the same shard: on every shard, half the requests executed. They build three of
    the links (SOME): what is shared is per action, not per binary."""
    trees = [copy_without_backends(example_tree, tmp_path / name) for name in ("a", "b")]
    for tree in trees:
        _gen(tree, cluster.endpoint)
    outs = [tree.out for tree in trees]
    env = {"GOMA_EXT_CACHE_SALT": salt + "-two", "GOMA_EXT_PROXY_DIR": own_proxy_dir, "GOMA_EXT_PROXY_SHARDS": SHARDS}
    builds = [_start_ninja(out, env, SOME) for out in outs]
    for build in builds:
        output, _ = build.communicate(timeout=600)
        assert build.returncode == 0 and "goma-ext: warning" not in output, output[-3000:]
    a, b = (stats.report(out) for out in outs)
    assert a["runs"] == b["runs"] > 30 and a["local_fallbacks"] == b["local_fallbacks"] == 0
    assert a["remote_executions"] + b["remote_executions"] == a["runs"], (a, b)
    proxies = _proxies(own_proxy_dir)
    assert sorted(p["shard"] for p in proxies) == list(range(int(SHARDS))), proxies
    assert sum(p["runs"] for p in proxies) == a["runs"] + b["runs"]
    # identical actions on one shard: each shard executed exactly half of what it was asked
    assert all(p["runs"] > 0 and p["runs"] == 2 * p.get("actions_remote", 0) for p in proxies), proxies
    assert all(p["children_cpu_s"] == 0 for p in proxies), proxies
    for out in outs:
        got = _natives(out)
        assert got and got == {name: local_natives.get(name) for name in got}
    print(f"two builds, {a['runs']} actions each, over {SHARDS} shards: "
          + "; ".join(f"shard {p['shard']}: {p['runs']} requests, {p.get('actions_remote', 0)} executed, "
                      f"{p.get('joined_in_flight', 0)} joined in flight"
                      for p in sorted(proxies, key=lambda p: p["shard"])))
