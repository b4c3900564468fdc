"""Planner tests on GN's snapshotted output for tests/workspaces/basic."""

from __future__ import annotations

import json
from pathlib import Path

from gn_thinlto.plan.config import Config
from gn_thinlto.plan.config import TestonlyMode as Mode
from gn_thinlto.hook import load_graph
from gn_thinlto.plan.planner import GnGraph, plan_graph
from gn_thinlto.plan.model import GraphPlan, TargetPlan

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
BASIC_GN = GOLDEN / "basic" / "gn"
PYTHON = "/venv/bin/python"


def basic_graph() -> tuple[GnGraph, dict[str, str]]:
    graph, texts, _ = load_graph(BASIC_GN, json.loads((BASIC_GN / "project.json").read_text()))
    return graph, texts


def basic_plan(config: Config | None = None) -> GraphPlan:
    return plan_graph(basic_graph()[0], config or Config(), PYTHON)


def _target(plan, output: str) -> TargetPlan:
    return next(t for t in plan.targets if t.output == output)


def test_selects_every_thinlto_link_and_refuses_unknown_lto_option() -> None:
    plan = basic_plan()
    assert [t.output for t in plan.targets] == ["./app", "./app_unittests", "./lib_unittests", "./libcomp.so", "./tool"]
    assert [(r.label, r.reason) for r in plan.refusals] == [
        ("//refused:refused", "unknown LTO linker option '--lto-debug-pass-manager'")
    ]


def test_thin_link_uses_start_lib_for_archives_and_index_only_flags() -> None:
    app = _target(basic_plan(), "./app")
    m = app.thin_link.manifest
    assert m.rsp_lines == (
        "obj/app/app.main.o", "obj/ss/ss.ss.o", "./libcomp.so",
        "-Wl,--start-lib", "obj/lib/lib.asm.o", "obj/lib/lib.shape.o", "obj/lib/lib.square.o", "obj/lib/lib.unused.o",
        "-Wl,--end-lib",
        "-Wl,--start-lib", "obj/reg/libreg.reg.o", "-Wl,--end-lib",
    )
    assert "-Wl,--start-group" not in m.argv and "-Wl,--end-group" not in m.argv
    assert m.argv[-5:] == (
        "-Wl,--thinlto-index-only=gn-thinlto/app/stage/used.txt",
        "-Wl,--thinlto-emit-imports-files",
        "-Wl,--thinlto-prefix-replace=;gn-thinlto/app/stage/",
        "-Wl,--why-extract=gn-thinlto/app/stage/why-extract.txt",
        "-Wl,--lto-obj-path=gn-thinlto/app/stage/lto.split.o",
    )
    assert m.argv[m.argv.index("-o") + 1] == "gn-thinlto/app/thinlink.out"
    # Every bitcode object has a declared index and imports file; the assembly object has none.
    assert [f.bitcode for f in m.index_files] == [
        "obj/app/app.main.o", "obj/ss/ss.ss.o", "obj/lib/lib.shape.o", "obj/lib/lib.square.o", "obj/lib/lib.unused.o",
        "obj/reg/libreg.reg.o",
    ]
    assert "gn-thinlto/app/index/obj/lib/lib.unused.o.thinlto.bc" in app.thin_link.implicit_outputs
    assert app.thin_link.outputs[-1] == "gn-thinlto/app/final.dd"


def test_backend_flags_are_routed_from_the_link_line() -> None:
    app = _target(basic_plan(), "./app")
    b = app.backends[0]
    assert b.argv[:8] == (
        "/usr/lib/llvm-19/bin/clang", "-c", "-x", "ir", "obj/app/app.main.o",
        "-fthinlto-index=gn-thinlto/app/index/obj/app/app.main.o.thinlto.bc", "-o", "gn-thinlto/app/native/obj/app/app.main.o",
    )
    flags = b.argv[8:]
    assert flags == ("-Wno-unused-command-line-argument", "--target=x86_64-linux-gnu", "-O2", "-ffunction-sections",
                     "-fdata-sections", "-faddrsig", "-fPIC", "-mllvm", "-import-instr-limit=30")
    assert not any(f.startswith(("-flto", "-fthinlto")) for f in flags)
    assert len(app.backends) == 6


def test_final_link_keeps_gn_shape_and_non_bitcode_inputs() -> None:
    app = _target(basic_plan(), "./app")
    f = app.final_link
    assert f.outputs == ("./app",)
    assert f.inputs == ("./libcomp.so", "obj/lib/lib.asm.o")
    assert f.dyndep == "gn-thinlto/app/final.dd" and f.dyndep in f.implicit
    assert f.argv[-3:] == ("-o", "./app", "@gn-thinlto/app/final.rsp")
    assert "-Wl,-rpath=$ORIGIN" in f.argv
    # Static part only; natives of used bitcode are appended at build time, after every other input.
    m = app.thin_link.manifest
    assert m.eager_inputs == ("obj/app/app.main.o", "obj/ss/ss.ss.o", "./libcomp.so")
    assert m.lazy_natives == ("obj/lib/lib.asm.o",)
    assert dict(app.thin_link.manifest.natives)["obj/lib/lib.square.o"] == "gn-thinlto/app/native/obj/lib/lib.square.o"


def test_solink_whole_archive_members_are_plain_objects() -> None:
    so = _target(basic_plan(), "./libcomp.so")
    m = so.thin_link.manifest
    at = m.argv.index("@gn-thinlto/libcomp.so/thinlink.rsp")
    assert m.argv[at - 1] == "-Wl,--whole-archive" and m.argv[at + 1] == "-Wl,--no-whole-archive"
    assert "-Wl,--start-lib" not in m.rsp_lines and not any(x.startswith("-") for x in m.rsp_lines)
    assert "-Wl,-soname=libcomp.so" in m.argv


def test_testonly_shared_null_index_mode() -> None:
    plan = basic_plan(Config(testonly=Mode.SHARED_NULL_INDEX))
    t = _target(plan, "./app_unittests")
    assert t.thin_link is None and t.backends == ()
    shared = [b for b in plan.shared_backends]
    assert {b.bitcode for b in shared} == {
        "obj/app/app_unittests.unittest.o", "obj/app/lib_unittests.lib_unittest.o",
        "obj/lib/lib.shape.o", "obj/lib/lib.square.o", "obj/lib/lib.unused.o",
    }
    assert all(not any(a.startswith("-fthinlto-index") for a in b.argv) for b in shared)
    assert "-Wl,--start-lib" in t.final_link.rsp_lines
    # Non-test links keep their thin link.
    assert _target(plan, "./app").thin_link is not None


def test_include_exclude_patterns() -> None:
    plan = basic_plan(Config(exclude=("//tool:*", "//app:*_unittests")))
    assert [t.output for t in plan.targets] == ["./app", "./libcomp.so"]
    plan = basic_plan(Config(include=("//comp/*",)))
    assert [t.output for t in plan.targets] == ["./libcomp.so"]


def test_target_dir_naming_and_overrides() -> None:
    plan = basic_plan(Config(target_dir="lto/{dir}/{name}", backend_flags_add=("-g0",), backend_flags_remove=("-fdata-sections",)))
    app = _target(plan, "./app")
    assert app.directory == "lto/app/app"
    assert "-fdata-sections" not in app.backends[0].argv and app.backends[0].argv[-1] == "-g0"


def test_plan_is_deterministic() -> None:
    assert basic_plan() == basic_plan()


def test_final_inputs_follow_in_process_section_order() -> None:
    from gn_thinlto.steps.thinlink import compose_final_inputs

    m = {
        "bitcode": ["a.bc", "lazy.bc"], "native_dir": "n",
        "lazy_natives": ["asm1.o", "asm2.o", "asm3.o"],
        "eager_inputs": ["x.o", "a.bc", "y.o"],
        "split_object": ["s/x.o", "x.o"],
    }
    why = [("a.bc", "lazy.bc"), ("lazy.bc", "asm2.o"), ("y.o", "asm1.o")]
    assert compose_final_inputs(m, ["a.bc", "lazy.bc"], why) == [
        "x.o", "asm2.o", "y.o", "asm1.o", "-Wl,--start-lib", "asm3.o", "-Wl,--end-lib", "n/a.bc", "n/lazy.bc"
    ]


def test_minimized_bitcode_needs_the_toolchain_to_write_it() -> None:
    plan = basic_plan(Config(minimized_bitcode=True))
    assert plan.targets == ()
    reasons = [r.reason for r in plan.refusals if r.label != "//refused:refused"]
    assert len(reasons) == 5
    assert all("does not also write obj/" in r and r.endswith(".thinlink.o") for r in reasons)
