"""[trust] The forged-entry attack on a shared backend cache, by a real second local user, ends in a miss and
a correct binary.

A team cache that everyone can write (the worst case: a shared umask 000). The attacker (a user this test
creates and removes) takes the cache key of the backend that compiles `app`'s main (every input of a key is
readable in such a setup), puts an object of its own in cas/ and rewrites ac/KEY with the right digest, in the
entry format. The victim's next build: one warning naming the attacker's uid, a miss for that key, and `app`
prints what it should. `gn-thinlto cache verify` reports the entry as untrusted. The control shows the attack
is real: a build that trusts the attacker (cache_trusted_writers) links the forged object.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.system_users import User, temporary_user

from .test_graph_support import Build, gen_and_build, gn_thinlto

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="creates a Unix user: needs root (CI runs as root)")]
WORKSPACE = REPO / "tests" / "workspaces" / "basic"
FORGED = '#include <stdio.h>\nint main(void) { puts("PWNED by the attacker"); return 0; }\n'
# Run by the attacker with the system python: plant a blob and an entry naming it under the victim's key.
PLANT = """
import hashlib, os, sys
cache, key, obj = sys.argv[1:4]
data = open(obj, "rb").read()
digest = hashlib.sha256(data).hexdigest()
os.makedirs(f"{cache}/cas/{digest[:2]}", exist_ok=True)
with open(f"{cache}/cas/{digest[:2]}/{digest}-{len(data)}", "wb") as f:
    f.write(data)
entry = f"{cache}/ac/{key[:2]}/{key}"
tmp = entry + ".forged"
with open(tmp, "w") as f:
    f.write(f"gn-thinlto-cache-entry-v2 {key}\\no {digest} {len(data)}\\n")
os.chmod(tmp, 0o644)
os.replace(tmp, entry)
print(os.stat(entry).st_uid)
"""


@pytest.fixture
def shared_cache() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gnt-shared-cache-", dir="/var/tmp"))
    os.chmod(path, 0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def attacker() -> Iterator[User]:
    with temporary_user("gntatk") as user:
        yield user


def _config(tmp_path: Path, cache: Path, trusted: str = "") -> Path:
    path = tmp_path / f"gn_thinlto{'-trusting' if trusted else ''}.yaml"
    path.write_text(f"cache_dir: {cache}\n" + (f"cache_trusted_writers: [{trusted}]\n" if trusted else ""))
    return path


def _main_backend(b: Build) -> tuple[str, Path]:
    """(cache key, native output) of the backend that compiles app's main.cc, from the backend log."""
    for line in (b.out / "gn-thinlto" / "backend.log").read_text().splitlines():
        event, key, output = line.split(" ", 2)
        if event in ("hit", "miss") and "app" in output and "main" in Path(output).name:
            return key, b.out / output
    raise AssertionError("no backend of app's main.cc in the log")


def _plant(attacker: User, cache: Path, key: str, forged: Path) -> None:
    proc = attacker.run(["/usr/bin/python3", "-S", "-c", PLANT, str(cache), key, str(forged)])
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == attacker.uid


def _ninja(b: Build) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ninja", "-C", str(b.out), "app"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_a_forged_entry_from_another_user_is_a_miss_and_the_binary_is_right(
    tmp_path: Path, shared_cache: Path, attacker: User
) -> None:
    root = tmp_path / "src"
    shutil.copytree(WORKSPACE, root)
    b = gen_and_build(root, tmp_path / "out", "--config", str(_config(tmp_path, shared_cache)))
    assert b.run_binary("app") == "OK app"
    # Everyone may add and replace files (a shared umask 000): the worst case. Entries stay 0644, as written.
    subprocess.run(["find", str(shared_cache), "-type", "d", "-exec", "chmod", "a+rwx", "{}", "+"], check=True)
    key, native = _main_backend(b)

    forged = shared_cache / "forged.o"
    (shared_cache / "forged.c").write_text(FORGED)
    subprocess.run(["clang-19", "-c", "-O2", "-fPIC", str(shared_cache / "forged.c"), "-o", str(forged)], check=True)
    os.chmod(forged, 0o644)
    _plant(attacker, shared_cache, key, forged)

    verify = gn_thinlto("cache", "verify", str(b.out))
    assert verify.returncode == 0, verify.stderr
    assert f"1 entries from writers your builds do not trust (1 of uid {attacker.uid})" in verify.stdout

    native.unlink()
    log_size = (b.out / "gn-thinlto" / "backend.log").stat().st_size
    proc = _ninja(b)
    warnings = [line for line in (proc.stdout + proc.stderr).splitlines() if "warning: backend cache" in line]
    assert len(warnings) == 1 and f"entries of uid {attacker.uid} are not used" in warnings[0], warnings
    assert f"miss {key} " in (b.out / "gn-thinlto" / "backend.log").read_bytes()[log_size:].decode()
    assert b.run_binary("app") == "OK app"

    # The control: trusting the attacker serves the forged object. This is what the trust check prevents.
    _plant(attacker, shared_cache, key, forged)
    trusting = gn_thinlto("gen", str(b.out), "--root", str(root), "--config",
                          str(_config(tmp_path, shared_cache, attacker.name)))
    assert trusting.returncode == 0, trusting.stderr
    native.unlink()
    _ninja(b)
    assert b.run_binary("app") == "PWNED by the attacker"
