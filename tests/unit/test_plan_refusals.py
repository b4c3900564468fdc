"""Links the planner must leave to GN, on small synthetic GN outputs."""

from __future__ import annotations

import pytest

from gn_thinlto.errors import GnThinltoError
from gn_thinlto.plan.config import Config, LinkWrapper
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
rule link_twice
  command = /llvm/bin/clang++ ${ldflags} -o ${out} ${in} @${out}.rsp
  rspfile = ${out}.rsp
  rspfile_content = ${in}
rule link_badrsp
  command = /llvm/bin/clang++ ${ldflags} -o ${out} @${out}.rsp
  rspfile = ${out}.rsp
  rspfile_content = "-Wl,--whole-archive ${in}
rule link_wrapped_opaque
  command = python3 ../build/link.py --out ${out} ${in}
rule link_inputs_to_wrapper
  command = python3 ../build/link.py --inputs ${in} -- /llvm/bin/clang++ ${ldflags} -o ${out}
rule link_lto_in_rsp
  command = /llvm/bin/clang++ ${ldflags} -o ${out} @${out}.rsp
  rspfile = ${out}.rsp
  rspfile_content = -flto=thin ${in}
rule link_rust_wrapped
  command = python3 ../build/link.py --output=${out} -- /llvm/bin/clang++ ${ldflags} -o ${out} ${in} libstd.rlib
rule link_custom_wrapper
  command = sh ../build/link.sh --with /llvm/bin/clang++ ${ldflags} -o ${out} ${in}
rule link_lazy
  command = /llvm/bin/clang++ ${ldflags} -o ${out} -Wl,--start-lib ${in} -Wl,--end-lib
"""


def _plan(target_ninja: str, ldflags: str = "-fuse-ld=lld -flto=thin", config: Config | None = None) -> list[str]:
    project = parse_project({
        "build_settings": {"build_dir": "/OUT/", "root_path": "/SRC", "default_toolchain": "//tc:tc"},
        "targets": {"//x:x": {"type": "executable", "toolchain": "//tc:tc", "outputs": ["/OUT/x"],
                              "ldflags": ldflags.split()}},
    })
    files = {"toolchain.ninja": parse(TOOLCHAIN)}
    files["obj/x/x.ninja"] = parse(target_ninja.replace("LDFLAGS", ldflags), files["toolchain.ninja"].variables)
    plan = plan_graph(GnGraph(project, files), config or Config(), "/py")
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
        (OK.replace(": link ", ": link_twice "), "its command and response file name the inputs 2 times (expected once)"),
        (OK.replace(": link ", ": link_badrsp "),
         "cannot split the response file ./x.rsp of ./x: No closing quotation"),
        (OK.replace(": link ", ": link_wrapped_opaque "),
         "cannot find the clang link command inside python3 ../build/link.py --out …; if 'python3' wraps one, "
         "name it in gn_thinlto.yaml link_wrappers"),
        (OK.replace(": link ", ": link_inputs_to_wrapper "),
         "the link's inputs are not arguments of its clang link command"),
        (OK.replace(": link ", ": link_lazy "), "link command already uses --start-lib"),
        (OK.replace(": link ", ": link_rust_wrapped "),
         "the link wrapper rewrites its link command ('libstd.rlib'); the thin link cannot run it alone"),
        (OK.replace("cflags = -O2 -flto=thin", "cflags = -O2"), "no ThinLTO bitcode among the link inputs"),
        (OK.replace("cflags = -O2 -flto=thin", "cflags = -O2 -flto=thin -mcmodel=large"),
         "obj/x/a.o: compiled with -mcmodel=large, a code model the backends cannot reproduce as lld does"),
    ],
)
def test_refusals(ninja: str, reason: str) -> None:
    assert _plan(ninja) == [reason]


def test_inline_inputs_are_planned() -> None:
    assert _plan(OK.replace(": link ", ": link_norsp ")) == []


def test_link_wrappers_config_names_the_inner_command() -> None:
    ninja = OK.replace(": link ", ": link_custom_wrapper ")
    assert _plan(ninja) == []  # found by its clang token
    wrappers = (LinkWrapper("*/link.sh", "--with"),)
    assert _plan(ninja, config=Config(link_wrappers=wrappers)) == []
    assert _plan(ninja, config=Config(link_wrappers=(LinkWrapper("*/link.sh", "--inner"),))) == [
        "link command matches link_wrappers '*/link.sh' but has no '--inner' after it"]


def test_flto_thin_only_in_the_rsp_content_is_thinlto() -> None:
    ninja = OK.replace(": link ", ": link_lto_in_rsp ")
    assert _plan(ninja, "-fuse-ld=lld") == []
    assert _plan(ninja.replace("cflags = -O2 -flto=thin", "cflags = -O2"), "-fuse-ld=lld") == [
        "no ThinLTO bitcode among the link inputs"]


def test_the_links_cache_policy_bounds_the_backend_cache() -> None:
    project = parse_project({
        "build_settings": {"build_dir": "/OUT/", "root_path": "/SRC", "default_toolchain": "//tc:tc"},
        "targets": {"//x:x": {"type": "executable", "toolchain": "//tc:tc", "outputs": ["/OUT/x"], "ldflags": []}},
    })

    def plan(policy: str) -> str:
        files = {"toolchain.ninja": parse(TOOLCHAIN)}
        ldflags = f"-fuse-ld=lld -flto=thin -Wl,--thinlto-cache-policy={policy}"
        files["obj/x/x.ninja"] = parse(OK.replace("LDFLAGS", ldflags), files["toolchain.ninja"].variables)
        return plan_graph(GnGraph(project, files), Config(), "/py").cache_policy

    assert plan("cache_size=10%:cache_size_files=100") == "cache_size=10%:cache_size_files=100"
    with pytest.raises(GnThinltoError, match=r"^//x:x: -Wl,--thinlto-cache-policy=foo=1: unknown key 'foo'"):
        plan("foo=1")


def test_unknown_lto_flag_is_refused() -> None:
    assert _plan(OK, "-fuse-ld=lld -flto=thin -Wl,--thinlto-frobnicate") == [
        "unknown LTO linker option '--thinlto-frobnicate'"]


def test_fno_lto_after_flto_thin_is_refused_not_ignored() -> None:
    assert _plan(OK, "-fuse-ld=lld -flto=thin -fno-lto") == [
        "the link command turns ThinLTO off again (-fno-lto or -flto=full after -flto=thin)"]


def test_linker_other_than_lld_is_refused() -> None:
    assert _plan(OK, "-fuse-ld=gold -flto=thin") == ["linker is 'gold', not lld"]


def _planned(ldflags: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the backend's argv, the thin link's argv) of OK linked with LDFLAGS."""
    project = parse_project({
        "build_settings": {"build_dir": "/OUT/", "root_path": "/SRC", "default_toolchain": "//tc:tc"},
        "targets": {"//x:x": {"type": "executable", "toolchain": "//tc:tc", "outputs": ["/OUT/x"],
                              "ldflags": ldflags.split()}},
    })
    files = {"toolchain.ninja": parse(TOOLCHAIN)}
    files["obj/x/x.ninja"] = parse(OK.replace("LDFLAGS", ldflags), files["toolchain.ninja"].variables)
    plan = plan_graph(GnGraph(project, files), Config(), "/py")
    (target,) = plan.targets
    assert target.thin_link is not None
    return target.backends[0].argv, target.thin_link.manifest.argv


def test_lto_o0_backends_generate_code_at_lld_cg_level_and_the_thin_link_keeps_the_level() -> None:
    backend, thin_link = _planned("-fuse-ld=lld -flto=thin -Wl,--lto-O0")
    assert backend[:2] == ("--cg-opt-level=2", "/llvm/bin/clang") and "-O0" in backend
    assert "-Wl,--lto-O0" in thin_link  # lld computes imports only above O0: the index must say the same
    backend, thin_link = _planned("-fuse-ld=lld -flto=thin -Wl,--lto-O3")
    assert backend[0] == "/llvm/bin/clang" and "-O3" in backend and "-Wl,--lto-O3" in thin_link
    backend, _ = _planned("-fuse-ld=lld -flto=thin -Wl,--lto-O2,--lto-CGO1")
    assert backend[0] == "--cg-opt-level=1" and "-O2" in backend


def test_options_clang_cannot_express_refuse_the_link() -> None:
    assert _plan(OK, "-fuse-ld=lld -flto=thin -Wl,--lto-newpm-passes=default<O1>") == [
        "--lto-newpm-passes=default<O1>: clang's ThinLTO backend cannot run a custom LTO pass pipeline"]
