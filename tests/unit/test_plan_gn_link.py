"""Reading GN's link edges: command splitting and input classification shared by the links of one plan."""

from __future__ import annotations

import shlex
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gn_thinlto.plan.config import Config
from gn_thinlto.plan.links import GnGraph, shell_split
from gn_thinlto.gn.project import parse_project
from gn_thinlto.gn.ninja_text import parse
from gn_thinlto.plan.planner import plan_graph
from gn_thinlto.plan.model import GraphPlan

from .test_plan_refusals import TOOLCHAIN

# Shell syntax, shlex's whitespace and whitespace shlex does not split on (str.split would).
_COMMAND_CHARS = st.sampled_from(list("ab-=/.$ \t\r\n'\"\\#;\x0b\x0c\x1c\xa0\u2003"))


def _split_or_error(split: Callable[[str], list[str]], text: str) -> list[str] | str:
    try:
        return split(text)
    except ValueError as e:
        return f"ValueError: {e}"


@given(st.lists(_COMMAND_CHARS, max_size=40).map("".join))
def test_shell_split_is_shlex_split(text: str) -> None:
    assert _split_or_error(shell_split, text) == _split_or_error(shlex.split, text)


@pytest.mark.parametrize("text", ["", "  ", "clang -c a.cc -o a.o", " x\ty\r\nz ", "a\xa0b", "-DX='a b'", "a\\ b"])
def test_shell_split_examples(text: str) -> None:
    assert shell_split(text) == shlex.split(text)


SHARED = """\
cflags = -O2 -flto=thin
build obj/x/a.o: cxx ../src/a.cc
build obj/x/b.o: cxx ../src/b.cc
  cflags = CFLAGS_B
build ./x: link obj/x/a.o obj/x/b.o
  ldflags = -fuse-ld=lld -flto=thin
build ./y: link obj/x/a.o obj/x/b.o
  ldflags = -fuse-ld=lld -flto=thin
"""


def _plan_two_links(cflags_b: str) -> GraphPlan:
    project = parse_project({
        "build_settings": {"build_dir": "/OUT/", "root_path": "/SRC", "default_toolchain": "//tc:tc"},
        "targets": {f"//x:{n}": {"type": "executable", "toolchain": "//tc:tc", "outputs": [f"/OUT/{n}"],
                                 "ldflags": ["-fuse-ld=lld", "-flto=thin"]} for n in ("x", "y")},
    })
    files = {"toolchain.ninja": parse(TOOLCHAIN)}
    files["obj/x/x.ninja"] = parse(SHARED.replace("CFLAGS_B", cflags_b), files["toolchain.ninja"].variables)
    return plan_graph(GnGraph(project, files), Config(), "/py")


def test_links_sharing_objects_classify_them_alike() -> None:
    plan = _plan_two_links("-O2")  # b.o native, a.o bitcode, in both links
    assert [t.output for t in plan.targets] == ["./x", "./y"] and not plan.refusals
    assert [[b.bitcode for b in t.backends] for t in plan.targets] == [["obj/x/a.o"], ["obj/x/a.o"]]
    assert [t.final_link.inputs for t in plan.targets] == [("obj/x/b.o",), ("obj/x/b.o",)]


def test_a_refused_shared_object_refuses_every_link_using_it() -> None:
    plan = _plan_two_links("-O2 -flto")
    reason = "obj/x/b.o is compiled with full LTO; only ThinLTO objects can be split"
    assert not plan.targets
    assert [(r.label, r.reason) for r in plan.refusals] == [("//x:x", reason), ("//x:y", reason)]


def test_shell_split_is_shlex_split() -> None:
    """The fast paths of shell_split (no quotes; double quotes only) split exactly as shlex.split does."""
    import random
    import shlex

    from gn_thinlto.plan.links import shell_split

    rng = random.Random(1)
    cases = ['rm -f a && "/usr/bin/ar" -r -c "a b" @"rsp"', 'x"a b"y  z', '""', "a ''", 'a\\ b "c\\"d"']
    cases += ["".join(rng.choice('ab "\t $:;&|=\'\\-') for _ in range(rng.randint(0, 14))) for _ in range(20000)]
    for text in cases:
        try:
            want: list[str] | str = shlex.split(text)
        except ValueError:
            want = "error"
        try:
            got: list[str] | str = shell_split(text)
        except ValueError:
            got = "error"
        assert got == want, text
