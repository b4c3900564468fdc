"""[graph] The example workspace built through the gn-thinlto graph: self-checks, the inline probe, backend
counts, equivalence with GN's in-process ThinLTO build, and incremental behaviour counted from .ninja_log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gn_thinlto.analysis.graph_query import backend_outputs_of
from tests.builds import copy_example_tree

from .test_graph_support import (
    OBJDUMP,
    Build,
    code_modulo_plt,
    defined_functions,
    disassembly,
    dynamic_symbols,
    edit_and_rebuild,
    executables,
    native_of,
    section_table,
    unstripped,
)

pytestmark = pytest.mark.slow
PROBE_OBJ = "obj/base/libbase.inline_probe.o"
DATA_SECTIONS = {".rodata", ".data.rel.ro", ".data", ".eh_frame", ".init_array", ".gcc_except_table", ".got"}


@pytest.fixture(scope="module")
def built(example_tree: Build, tmp_path_factory: pytest.TempPathFactory) -> Build:
    """The session's graph build of the example, copied: this file edits its sources."""
    return copy_example_tree(example_tree, tmp_path_factory.mktemp("example"))


@pytest.fixture(scope="module")
def root(built: Build) -> Path:
    return built.root


@pytest.fixture(scope="module")
def reference(example_in_process: Build) -> Build:
    """GN's own graph of the same sources and args: in-process ThinLTO in lld."""
    return example_in_process


def _links(b: Build) -> dict[str, dict]:
    """Planned links: output (without ./) -> thin-link manifest."""
    out = {}
    for path in sorted((b.out / "gn-thinlto").glob("*/thinlink.json")):
        m = json.loads(path.read_text())
        out[m["final_output"].removeprefix("./")] = m
    return out


def _section_contents(binary: Path, names: list[str], *, headers: bool = False) -> tuple[str, dict[str, bytes]]:
    """What `section_bytes` gives for each of NAMES (its `llvm-objdump -s` hex dump), from one objdump run for all of
    them, not one per section (an objdump start-up is most of a call's cost); with HEADERS, also their `-h` table."""
    out = subprocess.run([OBJDUMP, *(["-h"] if headers else []), "-s", *(f"--section={n}" for n in names),
                          str(binary)], capture_output=True, text=True, check=True).stdout
    table: list[str] = []
    contents: dict[str, list[str]] = {}
    current: str | None = None
    for line in out.splitlines():
        if line.startswith("Contents of section ") and line.endswith(":"):
            current = line.removeprefix("Contents of section ").removesuffix(":")
            contents.setdefault(current, [])
        elif current is None:
            table.append(line)
        else:
            contents[current].append(line)
    return "\n".join(table), {name: "\n".join(lines).encode() for name, lines in contents.items()}


def _text(binary: Path) -> tuple[int, bytes]:
    """BINARY's .text: its size (as `text_size`) and its bytes (as `section_bytes`), from one objdump run."""
    table, contents = _section_contents(binary, [".text"], headers=True)
    for line in table.splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[1] == ".text":
            return int(parts[2], 16), contents.get(".text", b"")
    raise AssertionError(f"no .text in {binary}")


def test_every_binary_passes_its_self_check(built: Build) -> None:
    names = executables(built)
    assert len(names) >= 6
    assert set(names) <= set(_links(built)), "every executable goes through the graph"
    for name in names:
        assert built.run_binary(name) == f"OK {name}"


def test_inline_probe_is_inlined_in_calc(built: Build) -> None:
    assert "ImportMeInline" not in disassembly(unstripped(built.out, "calc"))


def test_backend_count_per_target_equals_used_bitcode(built: Build) -> None:
    links = _links(built)
    backends = backend_outputs_of(built.out, list(links))  # one walk of every link's tree, dyndep loaded
    for output, m in links.items():
        tdir = m["used_list"].rsplit("/", 1)[0]
        used = (built.out / m["used_list"]).read_text().split()
        own = [o for o in backends[output] if o.startswith(f"{tdir}/native/")]
        assert len(own) == len(used), output
        assert len(used) <= len(m["bitcode"])
    # At least one link leaves lazy archive members unused (and unbuilt).
    assert any(len((built.out / m["used_list"]).read_text().split()) < len(m["bitcode"]) for m in links.values())


def test_same_functions_and_text_size_as_in_process(built: Build, reference: Build) -> None:
    """The unstripped copies (exe.unstripped/, lib.unstripped/) define the same functions, .text within 2%."""
    identical, same_size, same_code = [], [], []
    for output in sorted(_links(built)):
        ours, theirs = unstripped(built.out, output), unstripped(reference.out, output)
        assert ours != built.out / output, f"{output}: the example strips, so an unstripped copy must exist"
        assert defined_functions(ours) == defined_functions(theirs), output
        (a, our_text), (b, their_text) = _text(ours), _text(theirs)
        assert abs(a - b) <= 0.02 * b, (output, a, b)
        same_size += [output] if a == b else []
        # Byte-identical but for the PLT's slot order: lld fills the PLT in the order it first saw each symbol,
        # and the final link reads the natives after the other inputs, in-process ThinLTO the bitcode in place.
        assert code_modulo_plt(ours) == code_modulo_plt(theirs), output
        same_code.append(output)
        if our_text == their_text:
            identical.append(output)
    n = len(_links(built))
    print(f"\n.text same size as in-process: {len(same_size)}/{n}; same code up to PLT slot order: "
          f"{len(same_code)}/{n}; byte-identical: {len(identical)}/{n}: {identical}")


def test_wrapper_products_equal_in_process(built: Build, reference: Build) -> None:
    """What the link wrappers make from the final link: stripped binaries with the in-process build's sections
    and dynamic symbols, and the same .TOC files, byte for byte."""
    tocs = sorted(p.name for p in reference.out.glob("*.so.TOC"))
    assert tocs == ["libcodec.so.TOC"]
    for toc in tocs:
        assert (built.out / toc).read_bytes() == (reference.out / toc).read_bytes(), toc
    identical = []
    for output in sorted(_links(built)):
        ours, theirs = built.out / output, reference.out / output
        assert defined_functions(ours) == set(), f"{output} is stripped"
        table = section_table(theirs)  # one objdump -h of each binary
        assert section_table(ours) == table, output
        assert dynamic_symbols(ours) == dynamic_symbols(theirs), output
        data = sorted(DATA_SECTIONS & {name for name, _ in table})
        assert data, output  # (without --section, objdump -s would dump every section)
        our_data, their_data = _section_contents(ours, data)[1], _section_contents(theirs, data)[1]
        assert sorted(our_data) == sorted(their_data) == data, output  # every section dumped, in both
        for name in data:  # data byte for byte; symbol tables differ in order only
            assert our_data[name] == their_data[name], (output, name)
        identical += [output] if ours.read_bytes() == theirs.read_bytes() else []
    print(f"\nstripped binaries byte-identical to in-process: {len(identical)}/{len(_links(built))}")


def test_every_binary_at_parity_with_in_process_and_lto_o0_in_two_steps(built: Build, reference: Build) -> None:
    """`gn-thinlto parity`: every binary has the in-process build's functions at their sizes, sections and
    dynamic symbols, including matrix_tool_lto_o0, linked with -Wl,--lto-O0 like most of Chromium (its backends
    optimize at O0 and generate code at O2, as lld does). Before the tests below edit sources."""
    from gn_thinlto.analysis.parity import compare_builds

    results = compare_builds(reference.out, built.out)
    assert "exe.unstripped/matrix_tool_lto_o0" in {r.name for r in results}
    assert [r.line() for r in results if not r.at_parity] == []
    ninja = (built.out / "gn-thinlto/matrix_tool_lto_o0/build.ninja").read_text()
    heads = [line for line in ninja.splitlines() if line.startswith("gn_thinlto_backend_head")]
    # the backends' (two steps), then the regular-LTO partitions' (code generation alone, one step)
    assert heads[0].split(" = ", 1)[1].startswith("--cg-opt-level=2 "), heads
    print("\n" + "\n".join(r.line() for r in results if r.name.startswith(("exe.unstripped/", "lib.unstripped/"))))

def test_solink_keeps_restat_and_toc(built: Build) -> None:
    """The shared library's final link keeps GN's restat, pool and outputs: a relink that does not change the
    exports leaves libcodec.so.TOC untouched, so its dependents do not relink."""
    text = (built.out / "gn-thinlto/libcodec.so/build.ninja").read_text()
    edge = text[text.index("build ./libcodec.so ./libcodec.so.TOC ./lib.unstripped/libcodec.so:"):]
    assert "  restat = 1\n" in edge and "  pool = build_toolchain_link_pool\n" in edge
    before = built.log_entries()
    (built.out / "lib.unstripped/libcodec.so").unlink()
    built.ninja()
    ran = built.ran_since(len(before))
    assert "lib.unstripped/libcodec.so" in " ".join(ran) and not any("archiver" in r for r in ran), ran


def test_second_ninja_is_a_no_op(built: Build) -> None:
    assert "no work to do" in built.ninja("-n")


def test_comment_only_edit_runs_only_its_own_backends_as_hits(built: Build) -> None:
    r = edit_and_rebuild(built, "base/inline_probe.cc", "namespace base {", "// comment\nnamespace base {")
    own = {f"{m['used_list'].rsplit('/', 1)[0]}/native/{PROBE_OBJ}" for m in _links(built).values()
           if PROBE_OBJ in (built.out / m["used_list"]).read_text().split()}
    assert own and r.changed_index == set()
    assert r.backends == own
    assert len(r.cache_lines) == len(own) and all(line.startswith("hit ") for line in r.cache_lines)


def test_imported_body_change_runs_only_changed_backends(built: Build) -> None:
    r = edit_and_rebuild(built, "base/inline_probe.cc", "return x * 3 + 1;",
                         "return x > 1000000 ? x * 3 + 2 : x * 3 + 1;")
    importers = {native_of(p) for p in r.changed_index}
    own = {o for o in r.backends if o.endswith(PROBE_OBJ)}
    assert own and any("calc/" in p for p in r.changed_index)
    assert r.backends <= own | importers, sorted(r.backends - own - importers)
    assert "no work to do" in built.ninja("-n")


def test_the_build_writes_nothing_into_the_source_tree(built: Build) -> None:
    """The link wrappers import a module of their own: no __pycache__ may appear among the sources (the
    benchmarks copy //build as text), nor its bytecode where PYTHONPYCACHEPREFIX (`./dev test` sets it) would put
    it: the wrappers write none."""
    assert not list(built.root.rglob("__pycache__"))
    if sys.pycache_prefix:
        assert not list((Path(sys.pycache_prefix) / built.root.resolve().relative_to("/")).rglob("*.pyc"))


def test_trace_of_the_build_names_every_phase(built: Build, tmp_path: Path) -> None:
    """[trace] `gn-thinlto trace`: one slice per edge of the last build, by phase and binary, on slot tracks."""
    from .test_graph_support import gn_thinlto

    (built.out / "gn-thinlto/crc_tool/native/obj/tools/crc_tool/crc_tool.main.o").unlink()
    built.ninja()  # the last build: that backend (a cache hit) and crc_tool's final link
    proc = gn_thinlto("trace", str(built.out), "-o", str(tmp_path / "trace.json"))
    assert proc.returncode == 0, proc.stderr
    trace = json.loads((tmp_path / "trace.json").read_text())
    from tests.unit.test_trace import check_trace_event_format

    assert check_trace_event_format(trace) >= 3
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    by_phase = {e["cat"]: e for e in slices}
    assert set(by_phase) == {"backend", "final link", "other"}, [e["name"] for e in slices]  # other: stamps
    assert by_phase["backend"]["args"] == {
        "outputs": ["gn-thinlto/crc_tool/native/obj/tools/crc_tool/crc_tool.main.o"], "binary": "crc_tool",
        "cache": "hit"}
    assert by_phase["final link"]["args"]["binary"] == "crc_tool"
    assert "exe.unstripped/crc_tool" in by_phase["final link"]["args"]["outputs"]
    # `gn-thinlto report --build`: that backend held back crc_tool's final link, which ended the build
    proc = gn_thinlto("report", str(built.out), "--build", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    path = [(s["phase"], s["binary"]) for s in report["critical_path"]]
    assert path[:2] == [("backend", "crc_tool"), ("final link", "crc_tool")], path
    assert report["binaries"][0]["binary"] == "crc_tool" and report["binaries"][0]["cache_hits"] == 1
    assert 0 < report["serial_fraction"] <= 1


def test_html_report_renders_in_a_headless_browser(built: Build, tmp_path: Path) -> None:
    """[trace] `gn-thinlto report --build --html`: Debian's chromium loads the page headless; its DOM says both
    plots decoded and the four tables are there, and the screenshot shows the plots' phase colours."""
    # numpy and Pillow come with matplotlib (the report extra), whose imread decodes PNGs with Pillow; importing
    # matplotlib itself here cost ~0.7 CPU s
    import numpy
    from PIL import Image

    from gn_thinlto.analysis.build_html import PHASE_COLOURS

    from .test_graph_support import gn_thinlto

    page, shot = tmp_path / "report.html", tmp_path / "report.png"
    proc = gn_thinlto("report", str(built.out), "--build", "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    browser = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    # one browser run for both: headless chromium dumps the loaded page's DOM and takes the screenshot
    dom = subprocess.run([*browser, "--window-size=1280,2000", f"--screenshot={shot}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<body data-plots="2" data-tables="4">' in dom.stdout, dom.stdout[:500] + dom.stderr[-500:]
    with Image.open(shot) as image:
        pixels = numpy.asarray(image.convert("RGB")).astype(int)
    assert pixels.shape[:2] == (2000, 1280)
    found = {name for name, colour in PHASE_COLOURS.items()
             if ((pixels == [int(colour[i:i + 2], 16) for i in (1, 3, 5)]).all(axis=2)).sum() > 200}
    assert found, "no plot colours in the screenshot"


def test_cache_stats_read_the_link_lines_policy(built: Build) -> None:
    """`gn-thinlto cache stats` on the example: its entries, and the policy its link lines give lld."""
    from .test_graph_support import gn_thinlto

    proc = gn_thinlto("cache", "stats", str(built.out))
    assert proc.returncode == 0, proc.stderr
    assert "entries" in proc.stdout and "hit rate" in proc.stdout
    assert "policy: cache_size=10%:cache_size_bytes=40g:cache_size_files=100000" in proc.stdout
