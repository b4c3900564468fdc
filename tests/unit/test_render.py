"""Golden tests for every ninja file gn-thinlto renders, and for the edits to GN's files.

Set GN_THINLTO_UPDATE_GOLDEN=1 to rewrite tests/golden/basic/expected after an intended change.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from gn_thinlto.errors import GnThinltoError
from gn_thinlto.gn.ninja_text import parse
from gn_thinlto.plan.config import Config
from gn_thinlto.plan.config import TestonlyMode as Mode
from gn_thinlto.plan.model import BackendCommand
from gn_thinlto.plan.planner import flag_inputs
from gn_thinlto.render.ninja import (
    SHARED_FILE,
    backend_groups,
    edit_build_ninja,
    edit_gn_target_files,
    render_files,
)
from gn_thinlto.render.templating import shell_join
from gn_thinlto.steps.dyndep import dyndep_text
from gn_thinlto.steps.ninja_syntax import escape, escape_path

from .test_plan import BASIC_GN, GOLDEN, basic_graph, basic_plan

EXPECTED = GOLDEN / "basic" / "expected"
UPDATE = os.environ.get("GN_THINLTO_UPDATE_GOLDEN") == "1"


def _check_golden(name: str, text: str) -> None:
    path = EXPECTED / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"missing golden file {path}; run with GN_THINLTO_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from its golden file"


def _all_files(config: Config) -> dict[str, str]:
    plan = basic_plan(config)
    graph, texts = basic_graph()
    files = dict(render_files(plan, step_dir="/site/gn_thinlto"))
    files.update({f"gn-edited/{k}": v for k, v in edit_gn_target_files(texts, plan).items()})
    files["gn-edited/build.ninja"] = edit_build_ninja((BASIC_GN / "build.ninja").read_text(), plan)
    return files


@pytest.mark.parametrize("mode", [Mode.THIN_LINK, Mode.SHARED_NULL_INDEX], ids=lambda m: m.value)
def test_rendered_files_match_golden(mode: Mode) -> None:
    for name, text in sorted(_all_files(Config(testonly=mode)).items()):
        _check_golden(f"{mode.value}/{name}", text)


def test_rendered_files_parse_as_ninja_and_are_deterministic() -> None:
    a, b = _all_files(Config()), _all_files(Config())
    assert a == b
    for name, text in a.items():
        parse(text)  # every file is valid for our reader (ninja itself checks them in integration tests)


def test_gn_edits_remove_exactly_the_planned_link_edges() -> None:
    plan = basic_plan()
    graph, texts = basic_graph()
    edited = edit_gn_target_files(texts, plan)
    assert sorted(edited) == [
        "obj/app/app.ninja", "obj/app/app_unittests.ninja", "obj/app/lib_unittests.ninja", "obj/comp/comp.ninja",
        "obj/tool/tool.ninja",
    ]
    app = parse(edited["obj/app/app.ninja"])
    assert [e.rule for e in app.edges] == ["cxx"]
    assert "# gn-thinlto: the link edge of ./app is in gn-thinlto/app/build.ninja." in edited["obj/app/app.ninja"]
    build = edit_build_ninja((BASIC_GN / "build.ninja").read_text(), plan)
    assert edit_build_ninja(build, plan) == build  # idempotent
    lines = build.splitlines()
    at = lines.index("subninja toolchain.ninja")
    assert lines[at + 2: at + 4] == ["include gn-thinlto/rules.ninja", "subninja gn-thinlto/targets.ninja"]


def test_dyndep_and_escaping() -> None:
    text = dyndep_text("./a b", ["n/x:y.o", "n/$z.o"], "0" * 64)
    assert "build ./a$ b: dyndep | n/x$:y.o n/$$z.o\n" in text
    assert text.startswith("ninja_dyndep_version = 1\n")
    assert escape_path("a b:$") == "a$ b$:$$" and escape("x $y") == "x $$y"
    with pytest.raises(GnThinltoError, match="newline"):
        escape_path("a\nb")


def test_backend_cache_off_renders_no_cache_backends() -> None:
    rules = render_files(basic_plan(Config(backend_cache=False)), step_dir="/s")["gn-thinlto/rules.ninja"]
    assert "/s/backend.py --no-cache --log gn-thinlto/backend.log -- $argv" in rules and "--cache" not in rules


def _edge_argvs(text: str) -> dict[str, str]:
    """Backend output -> its argv binding as ninja evaluates it (edge bindings expand file variables)."""
    return {e.outputs[0]: e.bindings["argv"] for e in parse(text).edges if e.rule == "gn_thinlto_backend"}


@pytest.mark.parametrize("mode", [Mode.THIN_LINK, Mode.SHARED_NULL_INDEX], ids=lambda m: m.value)
def test_backend_edges_expand_to_the_whole_backend_argv(mode: Mode) -> None:
    plan = basic_plan(Config(testonly=mode))
    files = render_files(plan)
    backends = [*plan.shared_backends, *(b for t in plan.targets for b in t.backends)]
    expanded = {k: v for text in files.values() for k, v in _edge_argvs(text).items()}
    assert expanded == {b.native: shell_join(b.argv) for b in backends}


def test_backends_with_different_commands_bind_numbered_variables() -> None:
    plan = basic_plan(Config(testonly=Mode.SHARED_NULL_INDEX))
    shared = list(plan.shared_backends)
    other = BackendCommand(("/other/clang $x", "-c", "-x", "ir"), ("-O0", "a b"))
    shared[2:] = [replace(b, command=other) for b in shared[2:]]
    groups = backend_groups(shared)
    assert [(g.head_var, g.flags_var, len(g.backends)) for g in groups] == [
        ("gn_thinlto_backend_head_1", "gn_thinlto_backend_flags_1", 2),
        ("gn_thinlto_backend_head_2", "gn_thinlto_backend_flags_2", len(shared) - 2),
    ]
    text = render_files(replace(plan, shared_backends=tuple(shared)))[SHARED_FILE]
    assert _edge_argvs(text) == {b.native: shell_join(b.argv) for b in shared}
    assert "'/other/clang $$x' -c -x ir" in text
    # Empty parts leave no stray spaces in the argv.
    for command in (BackendCommand(("clang",), ()), BackendCommand((), ("-O0",))):
        bare = [replace(b, command=command) for b in shared]
        text = render_files(replace(plan, shared_backends=tuple(bare)))[SHARED_FILE]
        assert _edge_argvs(text) == {b.native: shell_join(b.argv) for b in bare}


def test_backends_depend_on_the_files_their_flags_name() -> None:
    """A link's sample profile or basic-block sections list (lld's --lto-sample-profile, routed to every backend
    as -fprofile-sample-use): editing it must run the backends again, as it would relink in-process."""
    plan = basic_plan(Config(testonly=Mode.SHARED_NULL_INDEX))
    shared = list(plan.shared_backends)
    flags = (*shared[0].command.flags, "-fprofile-sample-use=p f.prof", "-fbasic-block-sections=list=bb.txt",
             "-mllvm", "-some-list=../../data/l.txt")
    command = BackendCommand(shared[0].command.head, flags, flag_inputs(flags, ("../../data/./l.txt", "x.TOC"), "/src/out/x"))
    assert command.inputs == ("p f.prof", "bb.txt", "../../data/./l.txt")
    with_files = tuple(replace(b, command=command) for b in shared)
    text = render_files(replace(plan, shared_backends=with_files))[SHARED_FILE]
    edges = [e for e in parse(text).edges if e.rule == "gn_thinlto_backend"]
    assert len(edges) == len(shared)
    assert all({"p f.prof", "bb.txt", "../../data/./l.txt"} <= set(e.implicit) for e in edges), edges[0]
    assert not any("x.TOC" in e.implicit for e in edges)  # what the link declares but no flag names
    assert _edge_argvs(text) == {b.native: shell_join(b.argv) for b in with_files}


def test_several_step_servers_are_the_launchers_to_spread_over() -> None:
    """[scale] step_servers > 1 tells the launcher how many servers to spread the edges over; 1 renders as before."""
    plan = replace(basic_plan(), step_launcher="gn-thinlto/step-launcher")
    one = render_files(plan, step_dir="/site/gn_thinlto")[plan.rules_file]
    three = render_files(replace(plan, step_servers=3), step_dir="/site/gn_thinlto")[plan.rules_file]
    assert "gn-thinlto/step-launcher gn-thinlto/step-" in one and "--servers" not in one
    assert "gn-thinlto/step-launcher --servers 3 gn-thinlto/step-" in three
    assert three.replace("--servers 3 ", "") == one


def test_flag_values_match_declared_inputs_as_paths_not_text() -> None:
    """A review of 9410af6: rebase_path() without a base gives the flag `/src/app/chr.txt` while ninja's input is
    `../../app/chr.txt`; the backends got no dependency on it."""
    flags = ("-mllvm", "-chr-function-list=/src/app/chr.txt", "-O2")
    assert flag_inputs(flags, ("../../app/chr.txt", "./libx.so.TOC"), "/src/out/x") == ("../../app/chr.txt",)
    assert flag_inputs(flags, ("../../app/other.txt",), "/src/out/x") == ()


def test_a_routed_file_the_link_declares_has_one_name() -> None:
    """Two spellings of one generated file made ninja look for the absolute one with no rule to make it."""
    assert flag_inputs(("-fprofile-sample-use=/b/out/gen/p.txt",), ("gen/p.txt",), "/b/out/") == ("gen/p.txt",)
