"""[harden] The proxy's state directory: the proxy and the full client write its pid, log, lock and `.hung` files
there by path, so no other user may be able to swap it, or a link on the way to it, for theirs (an attacker's
review, 2026-12-07: with GOMA_EXT_PROXY_DIR=/tmp/goma-ext/$USER and someone else's /tmp/goma-ext, the pid went into
a file of the victim's that the attacker chose)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from goma_ext.remote import proxy_protocol as wire

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="another user's directory needs root to make")


def test_a_new_state_directory_is_the_users_alone(tmp_path: Path) -> None:
    state = tmp_path / "a" / "state"
    wire.make_state_dir(str(state))
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    state.chmod(0o755)
    wire.make_state_dir(str(state))
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_a_link_of_the_users_own_where_no_one_else_can_change_it_leads_to_the_state_directory(tmp_path: Path) -> None:
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o755)
    (tmp_path / "link").symlink_to(ours)
    wire.make_state_dir(str(tmp_path / "link"))
    assert stat.S_IMODE(ours.stat().st_mode) == 0o700


def test_directories_made_on_the_way_are_not_group_writable_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        wire.make_state_dir(str(tmp_path / "a" / "b" / "state"))
    finally:
        os.umask(old)
    for d in (tmp_path / "a", tmp_path / "a" / "b"):
        assert not d.stat().st_mode & 0o022


@as_root
def test_a_state_directory_in_another_users_directory_or_through_their_link_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    theirs.chmod(0o1777)  # as someone's /tmp/goma-ext: anyone may add an entry, its owner may rename any
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(OSError, match="owned by uid 65534, who could replace what lies below it"):
        wire.make_state_dir(str(theirs / "victim"))
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    sticky = tmp_path / "sticky"  # root's, open to all with the sticky bit, as /tmp: a link's owner may replace it
    sticky.mkdir()
    sticky.chmod(0o1777)
    link = sticky / "their-link"
    link.symlink_to(ours)
    os.lchown(link, NOBODY, NOBODY)
    with pytest.raises(OSError, match="link of uid 65534, who could turn it elsewhere"):
        wire.make_state_dir(str(link / "state"))
    kept = tmp_path / "their-link-in-ours"  # in a directory only root may change: no one can re-point it
    kept.symlink_to(ours)
    os.lchown(kept, NOBODY, NOBODY)
    wire.make_state_dir(str(kept / "state"))
    hop = tmp_path / "hop"  # ours, pointing at their link: the chain is followed
    hop.symlink_to(link)
    with pytest.raises(OSError, match="link of uid 65534, who could turn it elsewhere"):
        wire.make_state_dir(str(hop / "state"))
    own_link = theirs / "our-link"  # ours, but in their directory: they could rename it and put theirs there
    own_link.symlink_to(ours)
    with pytest.raises(OSError, match="owned by uid 65534, who could replace what lies below it"):
        wire.make_state_dir(str(own_link / "state"))


def test_marking_a_proxy_hung_follows_no_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim-file"
    hung = tmp_path / "proxy-0.hung"
    hung.symlink_to(victim)
    wire.mark_hung(str(hung))
    assert not victim.exists()
    hung.unlink()
    wire.mark_hung(str(hung))
    assert wire.hung_recently(str(hung))
