"""Links the planner must leave to GN, on small synthetic GN outputs."""

from __future__ import annotations

import pytest

from gn_thinlto.plan.config import Config
from gn_thinlto.plan.links import GnGraph
from gn_thinlto.gn.project import parse_project
from gn_thinlto.gn.ninja_text import parse
from gn_thinlto.plan.planner import plan_graph

TOOLCHAIN = """\
rule cxx
  command = /llvm/bin/clang++ ${cflags} -c ${in} -o ${out}
rule link
  command = /llvm/bin/clang++ ${ldflags} -o ${out} @${out}.rsp
  rspfile = ${out}.rsp
  rspfile_content = ${in}
rule link_norsp
  command = /llvm/bin/clang++ ${ldflags} -o ${out} ${in}
"""


def _plan(target_ninja: str, ldflags: str = "-fuse-ld=lld -flto=thin") -> list[str]:
    project = parse_project({
        "build_settings": {"build_dir": "/OUT/", "root_path": "/SRC", "default_toolchain": "//tc:tc"},
        "targets": {"//x:x": {"type": "executable", "toolchain": "//tc:tc", "outputs": ["/OUT/x"],
                              "ldflags": ldflags.split()}},
    })
    files = {"toolchain.ninja": parse(TOOLCHAIN)}
    files["obj/x/x.ninja"] = parse(target_ninja.replace("LDFLAGS", ldflags), files["toolchain.ninja"].variables)
    plan = plan_graph(GnGraph(project, files), Config(), "/py")
    assert not plan.targets or not plan.refusals
    return [r.reason for r in plan.refusals]


OK = """\
cflags = -O2 -flto=thin
build obj/x/a.o: cxx ../src/a.cc
build ./x: link obj/x/a.o
  ldflags = LDFLAGS
"""


def test_a_plain_thinlto_link_is_planned() -> None:
    assert _plan(OK) == []


@pytest.mark.parametrize(
    ("ninja", "reason"),
    [
        (OK.replace("-flto=thin", "-flto", 1), "obj/x/a.o is compiled with full LTO; only ThinLTO objects can be split"),
        (OK.replace("link obj/x/a.o", "link obj/x/a.o prebuilt.o"),
         "prebuilt object prebuilt.o has no GN edge; cannot tell whether it is bitcode"),
        (OK.replace(": link ", ": link_norsp "), "GN link command does not read its inputs from an @rspfile"),
        (OK.replace("cflags = -O2 -flto=thin", "cflags = -O2"), "no ThinLTO bitcode among the link inputs"),
    ],
)
def test_refusals(ninja: str, reason: str) -> None:
    assert _plan(ninja) == [reason]


def test_linker_other_than_lld_is_refused() -> None:
    assert _plan(OK, "-fuse-ld=gold -flto=thin") == ["linker is 'gold', not lld"]
