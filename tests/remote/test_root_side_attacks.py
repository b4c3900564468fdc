"""Attacks on what a root worker does itself around an action ([harden]): materialising the input root, handing it
over, creating outputs' parents, copying and reading outputs, removing the box; and on what an action or another
local user can see or cost. Played by an unprivileged local user with a client token (tests/remote/attacker.py)
and, for reading a running action, a second local user with no token. Each attack must fail with a clear status
and leave the host as it was: a root-only victim directory beside the sandboxes, and the owners and modes of every
directory above the input root, are compared before and after. Needs root (as CI runs)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.remote.attacker import Attacker
from tests.remote.conftest import Cluster
from tests.system_users import temporary_user

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the attack suite plays other local users: needs root")

SH = Path("/usr/bin/dash")
# Levels above the input root in the test cluster: box, bot directory, sandboxes, the reachable dir, /tmp, /.
ABOVE_ROOT = 4  # ../../../.. from the input root is the reachable dir that holds the victim


def _snapshot(paths: list[Path], listed: set[Path]) -> dict[str, tuple[int, int, int, tuple[str, ...]]]:
    """Owner, group and mode of each path, not following links, and the sorted entries of those `listed` (the
    others, /tmp and /, change with anything else on the machine)."""
    out = {}
    for p in paths:
        st = os.lstat(p)
        entries = tuple(sorted(os.listdir(p))) if p in listed and stat.S_ISDIR(st.st_mode) else ()
        out[str(p)] = (st.st_uid, st.st_gid, st.st_mode, entries)
    return out


class Host:
    """The victim: a root-only directory (0700) with a file, beside the workers' sandboxes, and every directory on
    the way up to /."""

    def __init__(self, cluster: Cluster) -> None:
        self.reachable = Path(cluster.st.sandbox_dir or "").parent
        self.victim = self.reachable / "gx-victim"
        self.victim.mkdir(mode=0o700, exist_ok=True)
        (self.victim / "keep").write_text("root's\n")
        ups = [self.reachable, *self.reachable.parents]
        self.watched = [self.victim, self.victim / "keep", *ups, Path("/etc"), Path("/etc/ld.so.preload")
                        if Path("/etc/ld.so.preload").exists() else Path("/etc/passwd")]
        self.listed = {self.victim, self.reachable}
        self.before = _snapshot(self.watched, self.listed)

    def unchanged(self) -> None:
        assert _snapshot(self.watched, self.listed) == self.before
        assert not Path("/etc/ld.so.preload").exists() or "gx" not in Path("/etc/ld.so.preload").read_text()


@pytest.fixture
def host(cluster: Cluster) -> Iterator[Host]:
    # The cluster, and so the victim's place, is shared by every pytest-xdist worker of the run: one test at a
    # time plants and watches it (another's victim, or its removal, would change what this one watches). The lock
    # file is created before the lock is taken, so every snapshot lists it.
    lock = os.open(Path(cluster.st.sandbox_dir or "").parent / ".gx-victim.lock",
                   os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        h = Host(cluster)
        try:
            yield h
            h.unchanged()
        finally:
            shutil.rmtree(h.victim, ignore_errors=True)
    finally:
        os.close(lock)


@pytest.fixture
def sh(attacker: Attacker) -> Path:
    return attacker.put("sh", SH.read_bytes())


def _refused(out: dict[str, Any], code: str, text: str) -> None:
    assert out.get("error_code") == code and text in out.get("error", ""), out


def _chain(inside: int, out: int) -> tuple[str, dict[str, str]]:
    """Links in a directory INSIDE levels below the input root, each of which stays inside the root as text:
    `d -> .`, `u0 -> d/..`, `u1 -> u0/..`, …; on disk u{INSIDE-1} is the root and the next OUT links climb out of it.
    Returns the directory and the links (by path from the root)."""
    where = "/".join(["p"] * inside)
    links = {f"{where}/d".lstrip("/"): "."}
    prev = "d"
    for i in range(inside + out):
        links[f"{where}/u{i}".lstrip("/")] = f"{prev}/.."
        prev = f"u{i}"
    return where, links


@pytest.mark.parametrize("inside, out", [(0, 1), (0, ABOVE_ROOT), (3, 1), (3, ABOVE_ROOT), (8, ABOVE_ROOT + 2)])
def test_a_chain_of_links_that_climbs_out_is_refused_before_anything_is_made(
    attacker: Attacker, host: Host, sh: Path, inside: int, out: int
) -> None:
    """Text inside, disk outside. The output's parents would be made (and handed over) through the chain."""
    where, links = _chain(inside, out)
    last = f"{where}/u{inside + out - 1}".lstrip("/")
    res = attacker.send(["./sh", "-c", "echo owned > a.o"], {"sh": sh}, outputs=(f"{last}/gx-victim/owned.o",),
                        executable=["sh"], links=links)
    _refused(res, "INVALID_ARGUMENT", "leaves the input root as the kernel resolves it")
    named = re.search(r"input symlink (\S+) -> ", res["error"])
    assert named is not None and int(named.group(1).rsplit("/u", 1)[-1].lstrip("u")) >= inside, res  # one that leaves
    print(f"attack: {len(links)} links {inside} levels down, climbing {out} above the root -> refused before "
          f"materialising, at {named.group(1)}")


@pytest.mark.parametrize("links, output", [
    ({"abs": "/etc"}, "abs/gx-owned"),  # absolute
    ({"sub/up": "../..", "v": "sub/up/tmp"}, "v/gx-owned"),  # a link to a directory, through another link
    ({"w": "x/../..", "x": "y", "y": "."}, "w/gx-owned"),  # three hops, `..` physical after each
])
def test_links_to_directories_outside_are_refused(attacker: Attacker, host: Host, sh: Path, links: dict[str, str],
                                                  output: str) -> None:
    out = attacker.send(["./sh", "-c", "true"], {"sh": sh}, outputs=(output,), executable=["sh"], links=links)
    assert out.get("error_code") == "INVALID_ARGUMENT" and "input symlink" in out["error"], out
    print(f"attack: input link {links} -> refused: {out['error'][-80:]}")


@pytest.mark.parametrize("plant, output", [
    ("ln -s /etc/shadow a.o", "a.o"),  # the output itself
    ("rm -rf out && ln -s /etc out", "out/shadow"),  # the output's parent, made by the worker, replaced
    ("rm -rf out && ln -s ../../../../gx-victim out", "out/keep"),  # relative, into the root-only victim
    ("mkfifo a.o", "a.o"),  # a FIFO: reading it as root would wait forever
])
def test_links_the_action_plants_at_outputs_are_not_followed(attacker: Attacker, host: Host, sh: Path, plant: str,
                                                             output: str) -> None:
    out = attacker.send(["./sh", "-c", plant], {"sh": sh}, outputs=(output,), executable=["sh"])
    assert out.get("error_code") == "INVALID_ARGUMENT", out
    assert "symlink" in out["error"] or "not a regular file" in out["error"], out
    assert "root:" not in json.dumps(out) and "root's" not in json.dumps(out)
    print(f"attack: action plants `{plant}` for output {output} -> refused: {out['error'][-70:]}")


def test_names_the_worker_uses_do_not_redirect_its_private_copy(attacker: Attacker, host: Host, sh: Path) -> None:
    """An input at a declared output is copied for the runner: links at every name the copy could use."""
    obj = attacker.put("a.o", b"input object\n")
    links = {f".a.o.{suffix}": str(host.victim / "keep") for suffix in ("gx-own", "tmp", "own")}
    out = attacker.send(["./sh", "-c", "echo appended >> a.o"], {"sh": sh, "a.o": obj}, outputs=("a.o",),
                        executable=["sh"], links=links | {"victim": "../../../../gx-victim"})
    assert out.get("error_code") == "INVALID_ARGUMENT" and "victim" in out["error"], out  # the last link leaves
    out = attacker.send(["./sh", "-c", "echo appended >> a.o"], {"sh": sh, "a.o": obj}, outputs=("a.o",),
                        executable=["sh"], links={".a.o.gx-own": "a.o"})
    assert out.get("exit_code") == 0 and out["output_data"]["a.o"] == "input object\nappended\n", out
    print("attack: links at the private copy's names -> ignored (random name, O_EXCL), output correct")


def test_the_worker_environment_is_not_seen_from_an_action(attacker: Attacker, sh: Path) -> None:
    script = "tr '\\0' '\\n' < /proc/1/environ; echo ---; env; echo ---; cat /proc/1/cmdline"
    out = attacker.send(["./sh", "-c", script], {"sh": sh}, outputs=(), executable=["sh"], env={"MINE": "1"})
    assert out.get("exit_code") == 0, out
    seen = out["stdout"]
    assert "MINE=1" in seen and "GOMA_EXT" not in seen and "HOME=/root" not in seen and "TOKEN" not in seen, seen
    print(f"attack: /proc/1/environ and env in the sandbox -> only the action's own: {seen.split('---')[0]!r}")


SPY = r"""
import json, os, sys, time
secret, root, until = sys.stdin.read().strip(), sys.argv[1], time.time() + float(sys.argv[2])  # not on argv
found, cmdlines = [], 0
while time.time() < until:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for what in ("cmdline", "environ", "mountinfo"):
            try:
                data = open(f"/proc/{pid}/{what}", "rb").read().decode(errors="replace")
            except OSError:
                continue
            cmdlines += 1
            if secret in data or (what != "mountinfo" and "/sb-" in data):
                found.append(f"/proc/{pid}/{what}: {data[:200]}")
    for top, dirs, files in os.walk(root):
        for name in files:
            try:
                if secret in open(os.path.join(top, name), errors="replace").read():
                    found.append(os.path.join(top, name))
            except OSError:
                pass
    time.sleep(0.05)
print(json.dumps({"found": found, "read": cmdlines}))
"""


def test_another_local_user_reads_nothing_of_a_running_action(attacker: Attacker, cluster: Cluster, sh: Path) -> None:
    secret = f"gx-secret-{time.time_ns()}"
    data = attacker.put("secret.h", f"#define S {secret}\n".encode())
    sandboxes = Path(cluster.st.sandbox_dir or "")
    result: dict[str, Any] = {}
    action = threading.Thread(target=lambda: result.update(attacker.send(
        ["./sh", "-c", "sleep 4; cat secret.h"], {"sh": sh, "secret.h": data}, outputs=(), executable=["sh"],
        env={"GX_SECRET": secret})))
    with temporary_user("gxspy") as spy:
        script = Path(tempfile.mkdtemp(prefix="gx-spy-")) / "spy.py"
        try:
            script.write_text(SPY)
            script.parent.chmod(0o755)
            action.start()
            seen = spy.run(["/usr/bin/python3", str(script), str(sandboxes), "5"], input=secret)
        finally:
            action.join()
            shutil.rmtree(script.parent, ignore_errors=True)
    assert seen.returncode == 0, seen.stderr
    report = json.loads(seen.stdout)
    assert result.get("exit_code") == 0 and secret in result["stdout"], result  # the action did run meanwhile
    assert report["found"] == [] and report["read"] > 0, report
    print(f"attack: a local user without a token scans /proc and the sandboxes while an action runs -> nothing "
          f"({report['read']} cmdline/environ/mountinfo files read)")


def test_an_input_tree_bomb_is_refused_before_it_costs_anything(attacker: Attacker, sh: Path) -> None:
    t = time.monotonic()
    out = attacker.send(["./sh", "-c", "true"], {"sh": sh}, outputs=(), executable=["sh"], bomb=[4, 12])
    took = time.monotonic() - t
    _refused(out, "RESOURCE_EXHAUSTED", "entries once expanded")
    print(f"attack: input tree bomb (13 Directory blobs, 16.7 M directories) -> refused in {took:.1f} s: "
          f"{out['error'][-70:]}")


def test_a_file_digest_that_names_a_path_is_refused(attacker: Attacker, host: Host, cluster: Cluster,
                                                    sh: Path) -> None:
    """The worker's file cache names its files, and the lock files that claim a fetch, after digests: an input
    whose digest climbs out of the cache ('../…') must not make the root worker touch, link or create anything
    there (here: a lock file in the victim's directory, for a digest of a claimed size)."""
    locks = Path(cluster.st.state) / "workers" / "file-cache" / "locks"
    size = 2 << 20
    climb = os.path.relpath(host.victim / "planted", locks)
    res = attacker.send(["./sh", "-c", "cat big > a.o"], {"sh": sh}, executable=["sh"],
                        named={"big": [climb, size]})
    _refused(res, "INVALID_ARGUMENT", "input 'big' has a malformed digest")
    assert not (host.victim / f"planted-{size}").exists()
    print(f"attack: a file digest {climb!r} -> refused: {res['error'][-80:]}")


@pytest.mark.parametrize(("env", "why"), [
    ({"X": "a\0--share-net\0--bind\0/\0/host"}, "holds a NUL byte"),
    ({"A=B": "x"}, "is not a name"),
], ids=["nul-adds-bwrap-options", "equals-in-name"])
def test_an_environment_that_would_add_sandbox_options_is_refused(attacker: Attacker, sh: Path, env: dict[str, str],
                                                                  why: str) -> None:
    """bwrap reads its options NUL-separated: a NUL in a variable's value would give the action the host's network
    and its / at /host (the audit's exploit, which printed the host's /etc/hostname from the sandbox)."""
    out = attacker.send(["./sh", "-c", "cat /host/etc/hostname; echo ran"], {"sh": sh}, outputs=(),
                        executable=["sh"], env=env)
    _refused(out, "INVALID_ARGUMENT", why)
    print(f"attack: environment {env!r} -> refused: {out['error'][-60:]}")


def test_deep_trees_from_the_client_or_the_action_leave_the_workers_serving(attacker: Attacker, sh: Path) -> None:
    """A declared output 1,500 directories deep is refused; an action that makes 1,500 nested directories (a
    shell's paths stop near 4,096 bytes) completes, and its box is removed. Python's rmtree recursed past its limit
    on both, and the lease never completed: its worker was lost, again after each restart."""
    out = attacker.send(["./sh", "-c", "true"], {"sh": sh}, outputs=("a/" * 1500 + "o",), executable=["sh"])
    _refused(out, "INVALID_ARGUMENT", "deeper than")
    deep = "i=0; while [ $i -lt 1500 ]; do mkdir d && cd d || exit 1; i=$((i+1)); done; echo deep"
    out = attacker.send(["./sh", "-c", deep], {"sh": sh}, outputs=(), executable=["sh"])
    assert out.get("exit_code") == 0 and out["stdout"].strip() == "deep", out
    print("attack: an output 1,500 levels deep -> refused; 1,500 nested directories made by the action -> removed")


def _worker_peak_rss_kib(cluster: Cluster) -> dict[int, int]:
    pids = subprocess.run(["pgrep", "-f", "goma_ext.cli worker .*--index"], capture_output=True, text=True).stdout
    peaks = {}
    for pid in map(int, pids.split()):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peaks[pid] = int(line.split()[1])
    return peaks


def test_a_stdout_flood_fails_the_action_not_the_worker(attacker: Attacker, cluster: Cluster, sh: Path) -> None:
    before = _worker_peak_rss_kib(cluster)
    out = attacker.send(["./sh", "-c", "head -c 400000000 /dev/zero"], {"sh": sh}, outputs=(), executable=["sh"])
    _refused(out, "RESOURCE_EXHAUSTED", "more than 8388608 bytes to its stdout")
    after = _worker_peak_rss_kib(cluster)
    grown = max((after[p] - before.get(p, after[p])) for p in after) // 1024
    assert grown < 64, (before, after)  # 400 MB written; the worker reads at most the 8 MiB cap
    print(f"attack: 400 MB on stdout -> RESOURCE_EXHAUSTED, worker peak memory grew {grown} MiB")


def test_filling_tmp_fails_the_action_at_its_own_cap(attacker: Attacker, sh: Path) -> None:
    out = attacker.send(["./sh", "-c", "head -c 400000000 /dev/zero > /tmp/fill; echo rc=$?; df -k /tmp"],
                        {"sh": sh}, outputs=(), executable=["sh"])
    assert out.get("exit_code") == 0 and "rc=0" not in out["stdout"] and "No space left" in out["stderr"], out
    print(f"attack: 400 MB into /tmp -> the action's own ENOSPC at the 64 MiB tmpfs: {out['stderr'].strip()[:60]}")


def test_the_workers_still_serve_after_the_attacks(attacker: Attacker, sh: Path) -> None:
    out = attacker.send(["./sh", "-c", "echo ok > a.o"], {"sh": sh}, outputs=("a.o",), executable=["sh"])
    assert out.get("exit_code") == 0 and out["output_data"] == {"a.o": "ok\n"}, out
