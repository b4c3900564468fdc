"""[graph] After any regeneration the ThinLTO graph is in place, or the build stops with a clear message."""

from __future__ import annotations

import subprocess

import pytest

from .test_graph_support import Build, copy_workspace, gen_and_build, gn_thinlto

MARKER = "include gn-thinlto/rules.ninja"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Build:
    root = copy_workspace("basic", tmp_path_factory.mktemp("regen"))
    return gen_and_build(root, root.parent / "out")


def _ninja(b: Build) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ninja", "-C", str(b.out)], capture_output=True, text=True)


def test_manual_gn_gen_with_unchanged_json_keeps_the_graph(built: Build) -> None:
    # GN only runs --json-ide-script when project.json changed; the hook's marker in project.json makes it.
    proc = subprocess.run(["gn", "gen", str(built.out), f"--root={built.root}", "--ide=json",
                           "--json-ide-script=gn-thinlto/gn_hook.py"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert ("gn-thinlto: 6 link targets: 5 ThinLTO links in the ninja graph, 1 left to GN, 0 not ThinLTO "
            "(details: gn-thinlto/links.txt)") in proc.stdout
    assert MARKER in (built.out / "build.ninja").read_text()
    assert "no work to do" in built.ninja("-n")


def test_ninja_regeneration_after_build_gn_change_keeps_the_graph(built: Build) -> None:
    gn_file = built.root / "tool" / "BUILD.gn"
    (built.root / "tool" / "extra.cc").write_text("int ToolExtra() { return 1; }\n")
    gn_file.write_text(gn_file.read_text().replace('sources = [ "tool.cc" ]', 'sources = [ "extra.cc", "tool.cc" ]'))
    before = len(built.log_entries())
    out = built.ninja()
    assert "Regenerating ninja files" in out
    assert MARKER in (built.out / "build.ninja").read_text()
    ran = built.ran_since(before)
    assert {"obj/tool/tool.extra.o", "gn-thinlto/tool/final.dd", "gn-thinlto/tool/native/obj/tool/tool.extra.o",
            "tool"} <= set(ran), ran
    assert not any(o.startswith("gn-thinlto/app/") for o in ran)  # other links untouched
    assert "input: gn_thinlto_final_link" in built.ninja("-t", "query", "tool")
    assert built.run_binary("tool") == "OK tool"
    # A comment-only BUILD.gn change regenerates too (project.json content is unchanged) and builds nothing.
    gn_file.write_text("# a comment\n" + gn_file.read_text())
    out = built.ninja()
    assert "Regenerating ninja files" in out and MARKER in (built.out / "build.ninja").read_text()
    assert "no work to do" in built.ninja("-n")


def test_a_failing_hook_stops_the_build_with_its_message(built: Build) -> None:
    config = built.root / "gn_thinlto.yaml"
    config.write_text("testonly: sometimes\n")
    (built.root / "tool" / "BUILD.gn").write_text((built.root / "tool" / "BUILD.gn").read_text() + "\n")
    proc = _ninja(built)
    assert proc.returncode != 0
    assert "gn-thinlto: error: " in proc.stdout + proc.stderr
    assert "testonly: expected one of thin_link, shared_null_index, got 'sometimes'" in proc.stdout + proc.stderr
    # The config is now a regeneration input: fixing it alone re-runs gn and the hook.
    config.write_text("testonly: thin_link\n")
    proc = _ninja(built)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert MARKER in (built.out / "build.ninja").read_text()


def test_plain_gn_gen_without_the_hook_is_detected(built: Build) -> None:
    subprocess.run(["gn", "gen", str(built.out), f"--root={built.root}"], check=True, capture_output=True)
    proc = gn_thinlto("explain", str(built.out), "//app:app")
    assert proc.returncode == 2
    assert "generated without the gn-thinlto hook" in proc.stderr
    # Restoring is one command.
    assert gn_thinlto("gen", str(built.out), "--root", str(built.root)).returncode == 0
    assert MARKER in (built.out / "build.ninja").read_text()


def test_gen_after_an_unhooked_json_gen_still_installs_the_graph(built: Build) -> None:
    out = built.out.parent / "json_first"
    subprocess.run(["gn", "gen", str(out), f"--root={built.root}", "--ide=json"], check=True, capture_output=True)
    proc = gn_thinlto("gen", str(out), "--root", str(built.root))
    assert proc.returncode == 0, proc.stderr
    assert MARKER in (out / "build.ninja").read_text()
