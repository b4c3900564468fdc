"""What a root cluster gives its workers for sandboxing: the runner user (created when missing) and a sandbox
directory that user can reach."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from goma_ext.cluster import sandboxing
from tests.bounded import started

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the runner user and the 0711 fallback are for root clusters")


@as_root
def test_a_missing_runner_user_is_created_as_a_system_user(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def no_user(name: str) -> pwd.struct_passwd:
        raise KeyError(name)

    def fake_run(argv: list[str], **_kw: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(sandboxing.pwd, "getpwnam", no_user)
    monkeypatch.setattr(sandboxing.subprocess, "run", fake_run)
    assert sandboxing.ensure_runner(None) == "goma-ext-runner"
    assert calls == [["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "goma-ext-runner"]]
    assert sandboxing.ensure_runner("someone") == "someone" and len(calls) == 1  # a named user is never created


@as_root
def test_a_state_dir_the_runner_cannot_reach_gets_a_private_0711_sandbox_dir(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    os.chmod(hidden, 0o700)
    made, owned = sandboxing.choose_sandbox_dir(hidden / "state")
    try:
        assert owned and not made.is_relative_to(hidden) and stat.S_IMODE(made.stat().st_mode) == 0o711
        assert sandboxing.searchable_by_others(made)
    finally:
        shutil.rmtree(made)


NOBODY = 65534


def test_unsafe_dir_takes_only_a_directory_no_one_else_can_change(tmp_path: Path) -> None:
    from thinlto_base.safefs import unsafe_dir

    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    assert unsafe_dir(mine) is None
    (tmp_path / "link").symlink_to(mine)
    assert unsafe_dir(tmp_path / "link") == "a link, not a directory"
    (mine / "sub").mkdir(mode=0o700)
    assert unsafe_dir(tmp_path / "link" / "sub") is None  # a link above PATH is resolved, then checked
    os.chmod(mine, 0o702)
    assert "writable by others (mode 702)" in (unsafe_dir(mine) or "")
    os.chmod(mine, 0o700)
    (tmp_path / "file").write_text("")
    assert unsafe_dir(tmp_path / "file") == "not a directory"
    assert unsafe_dir(tmp_path / "missing") is not None
    open_parent = tmp_path / "open"
    (open_parent / "below").mkdir(parents=True, mode=0o700)
    os.chmod(open_parent, 0o777)
    assert "writable by others without the sticky bit" in (unsafe_dir(open_parent / "below") or "")
    os.chmod(open_parent, 0o1777)  # as /tmp is: no one else can rename what is ours in it
    assert unsafe_dir(open_parent / "below") is None


@as_root
def test_a_group_writable_directory_is_refused_unless_the_group_is_the_owners_alone(tmp_path: Path) -> None:
    """A umask of 002 with user private groups makes 0775 directories: safe when no one else is in the group."""
    from thinlto_base.safefs import unsafe_dir

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o770)
    os.chmod(shared, 0o770)
    os.chown(shared, 0, NOBODY)  # nogroup: nobody's primary group, not root's alone
    assert "writable by others (mode 770)" in (unsafe_dir(shared) or "")
    private = tmp_path / "private"
    private.mkdir()
    os.chmod(private, 0o770)
    lone = subprocess.run(["groupadd", "--system", f"gx-lone-{os.getpid()}"], capture_output=True, text=True)
    assert lone.returncode == 0, lone.stderr
    try:
        import grp

        os.chown(private, 0, grp.getgrnam(f"gx-lone-{os.getpid()}").gr_gid)  # a group no one is in
        assert unsafe_dir(private) is None
    finally:
        subprocess.run(["groupdel", f"gx-lone-{os.getpid()}"], check=True)


@as_root
def test_a_directory_under_another_users_directory_is_refused(tmp_path: Path) -> None:
    from thinlto_base.safefs import unsafe_dir

    theirs = tmp_path / "theirs"
    (theirs / "ours").mkdir(parents=True, mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    assert "owned by uid 65534, who could replace what lies below it" in (unsafe_dir(theirs / "ours") or "")
    assert "owned by uid 65534, not by uid 0" in (unsafe_dir(theirs) or "")


def _worker(*args: str) -> subprocess.CompletedProcess[str]:
    """`goma-ext worker` that is expected to refuse to start (should it start, the bug, it is killed with its
    children and the test fails)."""
    import sys

    from tests.bounded import ends_within

    return ends_within([sys.executable, "-m", "goma_ext.cli", "worker", "--remote", "grpc://127.0.0.1:9",
                        "--isolation", "none", "--bot-id", "bot", *args])


@as_root
def test_the_worker_refuses_a_sandbox_dir_another_user_planted_and_touches_nothing_behind_it(tmp_path: Path) -> None:
    """[harden] After a reboot empties /tmp, anyone can make a directory under the name a root cluster's sandbox
    directory had, with a link named after a bot in it: the worker's clean-up of stale boxes would chmod the link's
    target and remove everything in it, as root."""
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o755)
    (victim / "precious").write_text("keep me")
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o755)
    (planted / "bot-0").symlink_to(victim)
    os.lchown(planted / "bot-0", NOBODY, NOBODY)
    os.chown(planted, NOBODY, NOBODY)
    for extra in ((), ("--index", "0")):
        proc = _worker("--work-dir", str(tmp_path / "work"), "--sandbox-dir", str(planted), *extra)
        assert proc.returncode != 0
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "--sandbox-dir" in lines[0] and "owned by uid 65534" in lines[0], proc.stderr
        assert (victim / "precious").read_text() == "keep me" and stat.S_IMODE(victim.stat().st_mode) == 0o755
    # the work directory and the file cache likewise (session files, chmod, cached inputs handed out as root)
    proc = _worker("--work-dir", str(planted))
    assert proc.returncode != 0 and "--work-dir" in proc.stderr and "owned by uid 65534" in proc.stderr, proc.stderr
    proc = _worker("--work-dir", str(tmp_path / "work"), "--file-cache", str(planted))
    assert proc.returncode != 0 and "--file-cache" in proc.stderr and "owned by uid 65534" in proc.stderr, proc.stderr
    # a bot directory that is a link, in a base of root's own (only root could have made it; refused all the same)
    base = tmp_path / "base"
    base.mkdir(mode=0o711)
    (base / "bot-0").symlink_to(victim)
    proc = _worker("--work-dir", str(tmp_path / "work"), "--sandbox-dir", str(base), "--index", "0")
    assert proc.returncode != 0 and "a link, not a directory" in proc.stderr, proc.stderr
    assert (victim / "precious").read_text() == "keep me" and stat.S_IMODE(victim.stat().st_mode) == 0o755


@as_root
def test_a_restarted_cluster_never_takes_back_a_sandbox_dir_it_made_once_it_is_gone_or_not_its_own(
        tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    state = hidden / "state"
    made, owned = sandboxing.choose_sandbox_dir(state)
    again: list[str] = []
    try:
        assert sandboxing.reusable_sandbox_dir(state, str(made), owned) == (str(made), True)  # still ours: kept
        os.rmdir(made)  # a reboot emptied the temp dir ...
        made.mkdir(mode=0o755)
        os.chown(made, NOBODY, NOBODY)  # ... and someone made a directory under its name
        path, owned_again = sandboxing.reusable_sandbox_dir(state, str(made), owned)
        again.append(path)
        assert owned_again and path != str(made) and Path(path).stat().st_uid == 0
        os.rmdir(made)
        path, _ = sandboxing.reusable_sandbox_dir(state, str(made), owned)  # gone: a new one too
        again.append(path)
        assert path != str(made) and Path(path).is_dir()
        assert sandboxing.reusable_sandbox_dir(state, str(tmp_path / "given"), False) == (str(tmp_path / "given"),
                                                                                         False)
    finally:
        for p in (made, *map(Path, again)):
            shutil.rmtree(p, ignore_errors=True)


@as_root
def test_a_restarted_cluster_never_takes_back_a_temp_postgres_dir_that_is_gone_or_not_its_own(tmp_path: Path) -> None:
    """The PostgreSQL data directory's /tmp fallback has the same known name after a reboot emptied /tmp."""
    from goma_ext.cluster.postgres import choose_data_dir, reusable_data_dir

    try:
        pg = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user (Debian package postgresql)")
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    state = hidden / "state"
    made, user = choose_data_dir(state)
    again: list[str] = []
    try:
        assert user == "postgres" and not made.is_relative_to(hidden)
        os.chown(made, pg.pw_uid, pg.pw_gid)
        assert reusable_data_dir(state, str(made), user) == str(made)  # postgres's own, 0700: kept
        os.chown(made, NOBODY, NOBODY)  # someone else's directory under the old name
        again.append(reusable_data_dir(state, str(made), user))
        os.rmdir(made)  # gone
        again.append(reusable_data_dir(state, str(made), user))
        assert all(p != str(made) and Path(p).is_dir() and Path(p).stat().st_uid == 0 for p in again)
        assert reusable_data_dir(state, str(state / "postgres"), user) == str(state / "postgres")  # in STATE: as is
    finally:
        for p in (made, *map(Path, again)):
            shutil.rmtree(p, ignore_errors=True)


@as_root
def test_stop_signals_no_process_through_a_temp_postgres_dir_someone_else_made(tmp_path: Path) -> None:
    """After a reboot emptied /tmp, anyone may make the old data directory again, with a postmaster.pid naming any
    postgres process (the host's own PostgreSQL): `cluster stop` must not hand it to `pg_ctl stop`, which would
    signal that pid, nor `destroy` remove it; `status` does not ask pg_ctl about it either."""
    from goma_ext.cluster import manager

    try:
        pg = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user (Debian package postgresql)")
    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True, mode=0o700)
    made = Path(tempfile.mkdtemp(prefix="goma-ext-pg-", dir="/tmp"))  # the fallback's old name, someone else's now
    victim = subprocess.Popen(["setpriv", "--reuid", str(pg.pw_uid), "--regid", str(pg.pw_gid), "--clear-groups",
                               "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while os.stat(f"/proc/{victim.pid}").st_uid != pg.pw_uid:  # setpriv has made it postgres's
            assert time.monotonic() < deadline
            time.sleep(0.01)
        (made / "PG_VERSION").write_text("15\n")
        (made / "postmaster.pid").write_text(f"{victim.pid}\n{made}\n")
        os.chown(made, NOBODY, NOBODY)
        made.chmod(0o755)  # readable to pg_ctl, which runs as postgres
        manager.ClusterState(state=str(state), port=1000, instance="", pg_port=5, pg_data=str(made), pg_user="postgres",
                             server_venv="/v", workers=0, role="all").save()
        assert not manager.load(state).pg_data_ours  # type: ignore[union-attr]
        manager.stop(state)
        manager.destroy(state)
        assert victim.poll() is None, "pg_ctl stop signalled the pid in someone else's postmaster.pid"
        assert (made / "postmaster.pid").exists()
    finally:
        victim.kill()
        victim.wait()
        shutil.rmtree(made, ignore_errors=True)

@as_root
def test_a_root_cluster_refuses_a_state_or_server_venv_another_user_can_change(tmp_path: Path) -> None:
    """[harden] As root, `cluster` reads which program to run (the server venv's python) and as which user from
    STATE/cluster.json: a STATE another user owns, or can replace, would make root run their program."""
    import sys

    from goma_ext.cluster.postgres import ClusterError
    from goma_ext.cluster.server import ensure_venv

    theirs = tmp_path / "theirs"
    (theirs / "cluster").mkdir(parents=True)
    (theirs / "cluster" / "cluster.json").write_text('{"server_venv": "/home/them/venv", "run_as": "root"}')
    for d in (theirs, theirs / "cluster"):
        os.chown(d, NOBODY, NOBODY)
    for command in ("status", "start", "stop"):
        proc = subprocess.run([sys.executable, "-m", "goma_ext.cli", "cluster", command, "--state",
                               str(theirs / "cluster")], capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0 and proc.stderr.count("\n") == 1, (command, proc.stderr)
        assert "--state" in proc.stderr and "owned by uid 65534" in proc.stderr, (command, proc.stderr)
    venv = theirs / "venv"
    venv.mkdir()
    os.chown(venv, NOBODY, NOBODY)
    with pytest.raises(ClusterError, match="--server-venv .*owned by uid 65534"):
        ensure_venv(venv)
    with pytest.raises(ClusterError, match="--server-venv .*who could replace what lies below it"):
        ensure_venv(theirs / "cluster" / "new-venv")


@as_root
def test_a_root_cluster_makes_no_state_inside_another_users_directory(tmp_path: Path) -> None:
    """A STATE not made yet under another user's directory: they could rename root's new directory away and put
    theirs, or a link, in its place, and root would follow their files (a planted JWT secret, a settings file).
    Refused before anything is made there; a new STATE where only root can change what lies above it is made."""
    from goma_ext.cluster import manager
    from goma_ext.cluster.postgres import ClusterError

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    for state in (theirs / "state", theirs / "deeper" / "state"):
        with pytest.raises(ClusterError, match="--state .*owned by uid 65534"):
            manager.check_state(state)
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp is: others may add entries, not rename root's
    manager.check_state(tmp_path / "ours" / "state")
    manager.check_state(sticky / "new" / "state")
    with pytest.raises(ClusterError, match="--state .*owned by uid 65534"):
        manager.start(manager.ClusterSpec(state=theirs / "state"))
    assert list(theirs.iterdir()) == []  # nothing made there

@as_root
def test_a_recorded_pid_another_users_process_took_is_not_ours_to_trust_or_signal() -> None:
    """[harden] After a reboot pids are handed out again: a local user could hold the pid recorded for the
    cluster's workers or CAS cleanup, so that `cluster start` never restarted them and `cluster stop` signalled
    their process group."""
    import sys

    from goma_ext.cluster import procs

    theirs = subprocess.Popen(["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups",
                               sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        for _ in range(50):  # until setpriv has changed users
            if Path(f"/proc/{theirs.pid}").stat().st_uid == NOBODY:
                break
            time.sleep(0.1)
        assert not procs.alive(theirs.pid)
        procs.stop(theirs.pid, grace_s=0.5)
        assert theirs.poll() is None  # not signalled
        ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        assert procs.alive(ours.pid)
        procs.stop(ours.pid, grace_s=2)
        assert ours.wait(5) is not None
    finally:
        theirs.kill()
        theirs.wait()


@pytest.mark.parametrize("name", ["plain", "with#hash", "with?query", "with%41", "x" * 120])
def test_the_workers_socket_is_in_a_private_directory_grpc_can_name(tmp_path: Path, name: str) -> None:
    """gRPC reads a Unix socket's address as a URI, and a socket's path has 108 bytes: a STATE that gRPC would take
    apart (?, #, %) or that is too long gets a fresh private directory in /tmp instead of STATE/run."""
    from goma_ext.cluster import manager

    state = tmp_path / name
    state.mkdir()
    st = manager.ClusterState(state=str(state), port=1, instance="", pg_port=2, pg_data="", pg_user=None,
                              server_venv="", workers=1)
    got = manager._own_worker_socket(st)
    assert got.worker_socket is not None
    sock = Path(got.worker_socket)
    try:
        assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700 and len(os.fsencode(sock)) <= 100
        assert (sock.parent == state / "run") == (name == "plain")
        assert manager._own_worker_socket(got) == got  # kept while it is still a private directory of ours
    finally:
        if sock.parent != state / "run":
            shutil.rmtree(sock.parent)


def test_a_new_worker_socket_stops_only_this_states_workers(tmp_path: Path) -> None:
    """A pid recorded before a reboot may be any process of ours now: only one whose command line has
    `--work-dir STATE/workers` is taken for this cluster's workers and stopped."""
    import sys

    from goma_ext.cluster import manager

    state = tmp_path / "s"
    state.mkdir()
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    other = started([*sleep, "--work-dir", f"{state}X/workers"])
    ours = started([*sleep, "--work-dir", str(state / "workers")])
    try:
        for pid, stopped in ((other.pid, False), (ours.pid, True)):
            st = manager.ClusterState(state=str(state), port=1, instance="", pg_port=2, pg_data="", pg_user=None,
                                      server_venv="", workers=1, worker_pid=pid)
            got = manager._own_worker_socket(st)
            assert got.worker_pid is None and got.worker_socket is not None
            shutil.rmtree(state / "run")
            proc = other if pid == other.pid else ours
            assert (proc.wait(15) is not None) if stopped else proc.poll() is None
    finally:
        for proc in (other, ours):
            proc.kill()
            proc.wait()


def test_pids_recorded_before_a_reboot_are_forgotten(tmp_path: Path) -> None:
    """After a reboot the recorded pids name other processes, if any: `cluster start` must start its daemons
    again and `cluster stop` must signal none of them. The state records the boot its pids belong to."""
    import json
    import sys

    from goma_ext.cluster import manager, procs

    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    server = started([*sleep, "server", "start", str(tmp_path / manager.SERVER_CONFIG)])
    workers = started([*sleep, "--work-dir", str(tmp_path / "workers")])
    try:
        st = manager.ClusterState(state=str(tmp_path), port=1, instance="", pg_port=2, pg_data="", pg_user=None,
                                  server_venv="", workers=1, server_pid=server.pid, worker_pid=workers.pid)
        st.save()
        loaded = manager.load(tmp_path)
        assert loaded is not None and loaded.boot_id == procs.boot_id() and loaded.server_pid == server.pid
        data = json.loads((tmp_path / manager.STATE_FILE).read_text())
        (tmp_path / manager.STATE_FILE).write_text(json.dumps({**data, "boot_id": "an-earlier-boot"}))
        loaded = manager.load(tmp_path)
        assert loaded is not None and (loaded.server_pid, loaded.worker_pid) == (None, None)
        del data["boot_id"]  # written before boot ids were recorded: its cluster may still run
        (tmp_path / manager.STATE_FILE).write_text(json.dumps(data))
        loaded = manager.load(tmp_path)
        assert loaded is not None and loaded.server_pid == server.pid
    finally:
        for proc in (server, workers):
            proc.kill()
            proc.wait()


def test_a_recorded_pid_another_process_of_ours_took_in_the_same_boot_is_neither_trusted_nor_signalled(
        tmp_path: Path) -> None:
    """A daemon that died leaves its pid to be handed out again in the same boot; as root, any root process passes
    procs.alive. Only a process whose command line names this state's own files (BuildGrid's and the cleanup's
    config, the workers' directory) is taken for the cluster's: `stop` leaves the others alone, `start` would start
    the daemon again."""
    import sys

    from goma_ext.cluster import manager

    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    others = [started(sleep) for _ in range(3)]
    ours = started([*sleep, "cleanup", "start", str(tmp_path / manager.CLEANUP_CONFIG)])
    try:
        manager.ClusterState(state=str(tmp_path), port=1, instance="", pg_port=2, pg_data="", pg_user=None,
                             server_venv="", workers=1, role="all", server_pid=others[0].pid,
                             worker_pid=others[1].pid, cleanup_pid=ours.pid).save()
        loaded = manager.load(tmp_path)
        assert loaded is not None and (loaded.server_pid, loaded.worker_pid) == (None, None)
        assert loaded.cleanup_pid == ours.pid
        manager.stop(tmp_path)
        assert all(p.poll() is None for p in others)
        assert ours.wait(15) is not None  # the cluster's own cleanup was stopped
    finally:
        for proc in (*others, ours):
            proc.kill()
            proc.wait()
