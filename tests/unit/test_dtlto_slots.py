"""Machine-wide local job slots: LIMIT holders at most, across processes; a dead holder's slot comes back."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from goma_ext.dtlto.slots import Slots

HOLD = """
import sys, time
from pathlib import Path
from goma_ext.dtlto.slots import Slots
with Slots(Path(sys.argv[1]), 2).take():
    print("held", flush=True)
    time.sleep(60)
"""


def test_limit_holds_across_processes(tmp_path: Path) -> None:
    holders = [subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    try:
        for p in holders:
            assert p.stdout is not None and p.stdout.readline().strip() == "held"
        got = threading.Event()

        def take() -> None:
            with Slots(tmp_path, 2).take():
                got.set()

        t = threading.Thread(target=take, daemon=True)
        t.start()
        assert not got.wait(0.5), "a third holder got a slot while two of two were held"
        holders[0].kill()  # the kernel releases its flock
        assert got.wait(10), "the killed holder's slot never came back"
    finally:
        for p in holders:
            p.kill()
            p.wait()


def test_slots_are_reused_in_one_process(tmp_path: Path) -> None:
    slots = Slots(tmp_path, 1)
    for _ in range(20):
        with slots.take():
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slot.0"]


def test_a_slots_directory_of_another_user_or_a_link_is_refused(tmp_path: Path) -> None:
    """A slots directory in a shared place (an attacker's audit, 2026-11-29): one another user made first would let
    them hold every slot, or point slot files at files of ours through links."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(OSError, match="not a directory of this user's"):
        Slots(tmp_path / "link", 1).take()
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        with pytest.raises(OSError, match="not a directory of this user's"):
            Slots(theirs, 1).take()
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o777)
    os.chmod(ours, 0o777)
    (ours / "slot.0").symlink_to(target / "planted")
    with pytest.raises(OSError):  # a link at a slot's name is not followed
        Slots(ours, 1).take()
    assert not (target / "planted").exists() and (ours.stat().st_mode & 0o777) == 0o700
