"""A private PostgreSQL cluster for BuildGrid: initdb, start, stop, run as a non-root user.

No `trust` anywhere: TCP connections (127.0.0.1 only) need the superuser's password (scram-sha-256), kept in a
0600 libpq password file; local socket connections, had it one, would be peer-authenticated."""

from __future__ import annotations

import glob
import os
import pwd
import stat
import subprocess
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from goma_ext.cluster import procs
from goma_ext.errors import GomaExtError
from thinlto_base import safefs

DB_NAME = "bgd"
DB_USER = "bgd"
RUN_AS_WHEN_ROOT = "postgres"


class ClusterError(GomaExtError):
    """The local cluster could not be started, stopped or inspected."""


def pg_bin() -> Path:
    """Debian's newest /usr/lib/postgresql/N/bin (needs `apt-get install postgresql`)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise ClusterError(
            "PostgreSQL not found (/usr/lib/postgresql/*/bin/initdb); install the Debian package postgresql"
        )
    return Path(found[-1]).parent


@dataclass(frozen=True)
class Postgres:
    """One PostgreSQL cluster: its data directory, port, the OS user that owns it (None = current user) and the
    libpq password file (pgpass, 0600) holding the superuser's password."""

    data_dir: Path
    port: int
    user: str | None
    passfile: Path | None  # None: a cluster an older goma-ext made (trust authentication; stop it, nothing else)

    @property
    def url(self) -> str:
        """SQLAlchemy URL: psycopg2 hands `passfile` to libpq, so the password is on no command line.

        `require_auth=scram-sha-256` (libpq 16 or later: the server venv's psycopg2-binary): while PostgreSQL is
        down, any local user may take its loopback port, and a BuildGrid reconnecting to it would send the
        password in clear if asked to. Under SCRAM libpq sends only a proof the taker cannot reuse, and refuses a
        server that cannot prove it knows the password too."""
        if self.passfile is None:
            raise ClusterError(f"{self.data_dir}: no PostgreSQL password file")
        passfile = urllib.parse.quote(str(self.passfile), safe="/")  # a state path may hold ?, & or #
        return (f"postgresql+psycopg2://{DB_USER}@127.0.0.1:{self.port}/{DB_NAME}?passfile={passfile}"
                "&require_auth=scram-sha-256")

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(pg_bin() / argv[0]), *argv[1:]]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        env = None
        if argv[0] in ("psql", "createdb"):  # run as `postgres`, which cannot read our 0600 pgpass: the environment
            self._check_listener()
            env = {**os.environ, "PGPASSWORD": self._password()}
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd="/", env=env)
        if check and proc.returncode != 0:
            raise ClusterError(f"{argv[0]} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-400:]}")
        return proc

    def _check_listener(self) -> None:
        """Before Debian's psql (libpq 15: no require_auth) is given the password: the port must be held by this
        data directory's postmaster. A stale postmaster.pid whose pid another process has taken since makes
        `pg_ctl status` say "running" while anyone may hold the port, and would answer a request for the password in
        clear."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            pid = 0
        if not procs.listens(pid, self.port, "127.0.0.1"):
            raise ClusterError(f"PostgreSQL's port {self.port} is not held by the postmaster of {self.data_dir} "
                               "(another process took it, or PostgreSQL is down): no password is sent to it")

    def initialised(self) -> bool:
        return (self.data_dir / "PG_VERSION").is_file()

    def init(self, password: str) -> None:
        fd = fresh_dir(self.data_dir)
        try:  # through the fd: the directory just checked, not whatever the path names a moment later
            if self.user:
                pw = pwd.getpwnam(self.user)
                os.fchown(fd, pw.pw_uid, pw.pw_gid)
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
        with tempfile.TemporaryDirectory(prefix="goma-ext-pwfile-") as tmp:  # 0700; initdb's user reads the 0600 file
            pwfile = Path(tmp) / "pw"
            fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(password + "\n")
            if self.user:
                pw = pwd.getpwnam(self.user)
                os.chown(tmp, pw.pw_uid, pw.pw_gid)
                os.chown(pwfile, pw.pw_uid, pw.pw_gid)
            self._run(
                "initdb", "-D", str(self.data_dir), "-U", DB_USER, f"--pwfile={pwfile}", "--auth-local=peer",
                "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync",
            )

    def _password(self) -> str:
        if self.passfile is None:
            raise ClusterError(f"{self.data_dir}: no PostgreSQL password file")
        try:  # the pgpass line written with the cluster: 127.0.0.1:PORT:*:bgd:PASSWORD
            return self.passfile.read_text().splitlines()[0].rsplit(":", 1)[1]
        except (OSError, IndexError) as e:
            raise ClusterError(f"{self.passfile}: no PostgreSQL password ({getattr(e, 'strerror', None) or e})") from e

    def trust_lines(self) -> list[str]:
        """pg_hba.conf's `trust` lines: none in a cluster we made (an older goma-ext's had them)."""
        hba = self.data_dir / "pg_hba.conf"
        try:
            return [line for line in hba.read_text().splitlines() if _trusts(line)]
        except OSError as e:
            raise ClusterError(f"{hba}: {e.strerror}") from e

    def start(self) -> None:
        opts = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.data_dir / "server.log"),
            "-o",
            opts,
            "-w",
            "-t",
            "60",
            "start",
        )
        exists = self._run(
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            DB_USER,
            "-d",
            "postgres",
            "-tAc",
            f"SELECT 1 FROM pg_database WHERE datname='{DB_NAME}'",
        )
        if exists.stdout.strip() != "1":
            self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", DB_USER, DB_NAME)

    def schema_version(self) -> str | None:
        """The revision BuildGrid's migrations brought the database to (alembic's version table), None when it has
        none (a new, dropped or recreated database) or cannot be asked."""
        proc = self._run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", DB_USER, "-d", DB_NAME, "-tAc",
                         "SELECT version_num FROM alembic_version", check=False)
        return (proc.stdout.strip() or None) if proc.returncode == 0 else None

    def running(self) -> bool:
        return (
            self.initialised() and self._run("pg_ctl", "-D", str(self.data_dir), "status", check=False).returncode == 0
        )

    def stop(self) -> None:
        if self.running():
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60", "stop")


def _trusts(line: str) -> bool:
    words = line.split("#", 1)[0].split()
    return "trust" in words


def fresh_dir(path: Path) -> int:
    """An fd of PATH as a new, empty directory of ours: made here (mkdir refuses anything already there), or
    the empty one mkdtemp made for it. Anything else at PATH (a planted link, another user's directory, old
    data) is refused: initdb, chown and chmod would act on whatever it is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        raise ClusterError(f"{path}: not a directory (a link or a file); refusing to put PostgreSQL's data there")\
            from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077 or os.listdir(fd):
        os.close(fd)
        raise ClusterError(f"{path}: exists and is not a new empty directory of ours (owner uid {st.st_uid}, mode "
                           f"{st.st_mode & 0o777:o}); refusing to put PostgreSQL's data there")
    return fd


def choose_data_dir(state: Path) -> tuple[Path, str | None]:
    """STATE/postgres, owned by `postgres` when we are root; a new private /tmp directory (mkdtemp: never a
    predictable name someone could have planted) if that user cannot reach STATE."""
    if os.geteuid() != 0:
        return state / "postgres", None
    try:
        pwd.getpwnam(RUN_AS_WHEN_ROOT)
    except KeyError as e:
        raise ClusterError("running as root needs the `postgres` user (Debian package postgresql)") from e
    probe = subprocess.run(["runuser", "-u", RUN_AS_WHEN_ROOT, "--", "test", "-x", str(state)], check=False)
    if probe.returncode == 0:
        return state / "postgres", RUN_AS_WHEN_ROOT
    return Path(tempfile.mkdtemp(prefix="goma-ext-pg-")), RUN_AS_WHEN_ROOT


def reusable_data_dir(state: Path, path: str, user: str | None) -> str:
    """The data directory a restarted cluster uses: PATH as it was, unless it is the temp-dir fallback and is now
    gone or not a private directory of ours (root's or USER's). After a reboot emptied the temp dir, anyone could
    make a directory under the old, known name: a new one is made instead (the data was gone anyway)."""
    return path if our_data_dir(state, path, user) else str(choose_data_dir(state)[0])


def our_data_dir(state: Path, path: str, user: str | None) -> bool:
    """Whether PATH is still the cluster's data directory: inside STATE, or (the temp-dir fallback) a private
    directory of ours (root's or USER's) that no one else can replace. Anything else is not handed to pg_ctl, whose
    `stop` signals the pid that directory's postmaster.pid names, nor removed: someone may have made a directory
    under the old name after a reboot."""
    where = Path(os.path.abspath(path))
    if not path or where.is_relative_to(os.path.abspath(state)):  # lexically: a planted link is not followed
        return True
    owners = {os.geteuid()}
    try:
        owners |= {pwd.getpwnam(user).pw_uid} if user else set()
    except KeyError:  # the user is gone: only a directory of ours is
        pass
    try:
        st = os.lstat(where)
        ours = stat.S_ISDIR(st.st_mode) and st.st_uid in owners and not st.st_mode & 0o077
    except OSError:
        ours = False
    return ours and safefs.unsafe_above(where) is None

