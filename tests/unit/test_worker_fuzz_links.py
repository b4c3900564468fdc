"""A seeded fuzzer of input trees with symlinks against the real worker ([harden]): random trees (links with
relative and absolute targets, chains through other links, links to directories, `..` after links), random
outputs through them, and an action (dash in a real bubblewrap sandbox, as the runner uid when root) that plants
more links, FIFOs and directories at its outputs and their parents. Around each lease a sacrificial parent
directory (holding the sandboxes, a root-only decoy and an open decoy) and every directory up to / are
snapshotted; any change outside the sandbox fails, and so does any lease status but OK or INVALID_ARGUMENT (a
clear refusal), or a box left behind. GX_FUZZ_SEED and GX_FUZZ_COUNT choose the run; the seed is printed."""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.proto import code_pb2, re_pb2
from goma_ext.worker.filecache import FileCache
from goma_ext.worker.lease import execute_lease
from goma_ext.worker.policy import Allowlist
from tests import budget, input_trees
from tests.system_users import python_for, temporary_user
from tests.unit.test_worker_runner import _DictCas, _sandboxed

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap (Debian bubblewrap)")

SEED = int(os.environ.get("GX_FUZZ_SEED", "20261126"))
COUNT = int(os.environ.get("GX_FUZZ_COUNT", str(budget.cases(120))))
DASH = Path("/usr/bin/dash").read_bytes()
NAMES = ("a", "b", "d", "out", "obj", "decoy", "open", "gx")


@dataclass(frozen=True)
class Place:
    """The sacrificial parent: BASE/sandboxes holds the boxes (the input root is three levels below BASE), and
    BASE/file-cache the worker's file cache; BASE/decoy is root's (0700), BASE/open anybody's."""

    base: Path

    @property
    def scratch(self) -> Path:
        return self.base / "sandboxes"

    @property
    def cache(self) -> Path:
        return self.base / "file-cache"

    @property
    def outside(self) -> tuple[Path, ...]:  # watched: BASE's tree but the worker's own, and every directory above
        return (self.base, *self.base.parents)


def _snapshot(place: Place) -> dict[str, tuple[int, int, int, int, bytes]]:
    out: dict[str, tuple[int, int, int, int, bytes]] = {}
    for p in place.outside:  # owner and mode (their link counts move with anything else on the machine)
        st = os.lstat(p)
        out[str(p)] = (st.st_uid, st.st_gid, st.st_mode, 0, b"")
    for top, dirs, files in os.walk(place.base):  # what this uid cannot list is left out (an ordinary user's view)
        if Path(top) in (place.scratch, place.cache):
            dirs.clear()
            continue
        for name in dirs + files:
            p = Path(top) / name
            if p in (place.scratch, place.cache):  # the worker's own: its link count moves with its contents
                continue
            st = os.lstat(p)
            try:
                data = p.read_bytes() if stat.S_ISREG(st.st_mode) else os.readlink(p).encode() if stat.S_ISLNK(
                    st.st_mode) else b""
            except PermissionError:
                data = b"(unreadable)"
            out[str(p)] = (st.st_uid, st.st_gid, st.st_mode, st.st_nlink, data)
    return out


def make_place(owner: tuple[int, int] | None = None) -> Place:
    """A new sacrificial parent; OWNER (uid, gid) gets BASE, the sandboxes and the open decoy (a worker run as
    that user), root keeps the decoy."""
    place = Place(Path(tempfile.mkdtemp(prefix="gx-fuzz-")))
    os.chmod(place.base, 0o711)
    place.scratch.mkdir(mode=0o711)
    place.cache.mkdir(mode=0o700)
    (place.base / "decoy").mkdir(mode=0o700)
    (place.base / "decoy" / "keep").write_text("root only\n")
    (place.base / "open").mkdir(mode=0o777)
    (place.base / "open" / "keep").write_text("open\n")
    if owner is not None:
        for p in (place.base, place.scratch, place.cache, place.base / "open", place.base / "open" / "keep"):
            os.chown(p, *owner)
    return place


@pytest.fixture
def place() -> Iterator[Place]:
    made = make_place()
    try:
        yield made
    finally:
        shutil.rmtree(made.base, ignore_errors=True)


def _target(rng: random.Random, place: Place) -> str:
    """A link target: absolute (into the decoys or the system), or a relative walk of names, `.` and `..`."""
    if rng.random() < 0.04:
        return rng.choice([str(place.base / "decoy"), str(place.base / "open" / "keep"), "/etc", "/", "/tmp"])
    parts = [rng.choice(("..", ".", *NAMES, *NAMES)) for _ in range(rng.randint(1, 4))]
    return "/".join(parts)


def _path(rng: random.Random) -> str:
    return "/".join(rng.choice(NAMES) for _ in range(rng.randint(1, 3)))


def _case(rng: random.Random, place: Place) -> tuple[_DictCas, Digest]:
    """A random input tree with links, outputs through them, and a script that plants more at run time."""
    tree: dict[str, object] = {}
    for _ in range(rng.randint(1, 8)):
        *parents, name = _path(rng).split("/")
        d = tree
        for p in parents:
            nxt = d.setdefault(p, {})
            if not isinstance(nxt, dict):
                break
            d = nxt
        else:
            if name not in d:
                link = rng.random() < 0.4
                d[name] = ("link", _target(rng, place)) if link else ("file", b"data %d\n" % len(d), False)
    if rng.random() < 0.3:  # a chain whose every link stays inside as text: `c0 -> .`, `c1 -> c0/..`, …
        at = tree.setdefault("gx", {}) if rng.random() < 0.5 else tree
        if isinstance(at, dict) and "c0" not in at:
            at["c0"] = ("link", ".")
            for k in range(1, rng.randint(2, 6)):
                at[f"c{k}"] = ("link", f"c{k - 1}/..")
    tree["sh"] = ("file", DASH, True)
    cas = _DictCas({})
    root = input_trees.build(tree, cas.blobs.__setitem__)
    picked = sorted({_path(rng) for _ in range(rng.randint(1, 4))})
    outputs = [o for o in picked if not any(other.startswith(o + "/") for other in picked)]  # no output a parent
    plants = []
    for out in outputs:
        parent = os.path.dirname(out) or "."
        kind = rng.choice(("write",) * 6 + ("link", "parent-link", "fifo", "dir"))
        if kind == "write":
            plants.append(f"echo x > {out}")
        elif kind == "link":
            plants.append(f"rm -rf {out}; ln -s {_target(rng, place)} {out}")
        elif kind == "parent-link" and parent != ".":
            plants.append(f"rm -rf {parent}; ln -s {_target(rng, place)} {parent}")
        elif kind == "fifo":
            plants.append(f"rm -rf {out}; mkfifo {out}")
        else:
            plants.append(f"rm -rf {out}; mkdir -p {out}")
    command = re_pb2.Command(arguments=["./sh", "-c", "; ".join(plants) + "; true"], output_paths=outputs)
    action = re_pb2.Action(command_digest=Digest.of_message(command).to_proto(), input_root_digest=root.to_proto())
    cas.blobs[Digest.of_message(command)] = serialize(command)
    cas.blobs[Digest.of_message(action)] = serialize(action)
    return cas, Digest.of_message(action)


def fuzz(place: Place, seed: int, count: int) -> Counter[str]:
    """COUNT random cases from SEED through the real worker (as the runner uid `nobody` when root, else as this
    user in a user namespace); after each, the outside as this uid sees it must be unchanged, the box gone and the
    status OK or a clear INVALID_ARGUMENT. Returns the statuses counted."""
    rng = random.Random(seed)
    iso = _sandboxed()
    cache = FileCache(place.cache)
    codes: Counter[str] = Counter()
    before = _snapshot(place)
    for i in range(count):
        cas, digest = _case(rng, place)
        out = execute_lease(cas, digest, Allowlist({}), place.scratch, iso, file_cache=cache)  # type: ignore[arg-type]
        code = code_pb2.Code.Name(out.status.code)  # type: ignore[arg-type]
        codes[code] += 1
        assert out.status.code in (code_pb2.OK, code_pb2.INVALID_ARGUMENT), f"case {i} (seed {seed}): {out.status}"
        assert out.status.code != code_pb2.INVALID_ARGUMENT or out.status.message.startswith("goma-ext worker")
        assert list(place.scratch.iterdir()) == [], f"case {i} (seed {seed}) left its box"
        assert _snapshot(place) == before, f"case {i} (seed {seed}) changed something outside the sandbox"
    return codes


def test_random_link_trees_never_change_anything_outside_the_sandbox(place: Place) -> None:
    codes = fuzz(place, SEED, COUNT)
    print(f"fuzz: seed {SEED}, {COUNT} input trees with links (root worker, runner uid): outside unchanged after "
          f"each; statuses {dict(sorted(codes.items()))}")
    assert codes["OK"] > 0 and codes["INVALID_ARGUMENT"] > 0  # the generator reaches both sides


@pytest.mark.skipif(os.geteuid() != 0, reason="plays an ordinary user: needs root to create one")
def test_a_worker_run_by_an_ordinary_user_is_held_to_the_same() -> None:
    """The same cases through a worker started by an ordinary user (its actions run as itself, in a user
    namespace): nothing of that user's own outside the sandbox changes either, nor root's decoy."""
    with temporary_user("gxfuzz") as user:
        place = make_place((user.uid, user.gid))
        try:
            before = _snapshot(place)  # root's view, the decoy's contents included
            run = user.run([*python_for(user), "-c", CHILD, str(place.base), str(SEED), str(COUNT)])
            assert run.returncode == 0, run.stderr[-3000:]
            codes = json.loads(run.stdout.strip().splitlines()[-1])
            assert _snapshot(place) == before
        finally:
            shutil.rmtree(place.base, ignore_errors=True)
    print(f"fuzz: seed {SEED}, {COUNT} input trees with links (worker run by an ordinary user): outside unchanged; "
          f"statuses {codes}")
    assert codes.get("OK", 0) > 0 and codes.get("INVALID_ARGUMENT", 0) > 0


CHILD = """
import json, sys
from pathlib import Path
from tests.unit.test_worker_fuzz_links import Place, fuzz
codes = fuzz(Place(Path(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3]))
print(json.dumps(dict(sorted(codes.items()))))
"""
