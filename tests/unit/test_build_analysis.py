"""[trace] The last build's critical path, serial fraction and per-binary figures, from logs and ninja's graph."""

from __future__ import annotations

from gn_thinlto.analysis.build_report import analyse, critical_path, parse_graph, serial_fraction, text
from gn_thinlto.analysis.build_log import Link, LogEdge, PhaseIndex, cache_verdicts, last_build
from tests.unit.test_trace import LINKS, LOG

# `ninja -t graph` for the build in LOG: compiles, the thin link (two outputs, so through an edge node), two
# backends reading the thin link's outputs, the final link.
DOT = """digraph ninja {
"0x1" [label="obj/a.o"]
"0x2" [label="a.cc"]
"0x2" -> "0x1" [label=" cxx"]
"0x3" [label="obj/b.o"]
"0x4" [label="b.cc"]
"0x4" -> "0x3" [label=" cxx"]
"0x5" [label="gn-thinlto/app/used.txt"]
"0x6" [label="gn-thinlto/app/final.rsp"]
"0xe1" [label="thinlink", shape=ellipse]
"0xe1" -> "0x5"
"0xe1" -> "0x6"
"0x1" -> "0xe1" [arrowhead=none]
"0x3" -> "0xe1" [arrowhead=none]
"0x7" [label="gn-thinlto/app/native/obj/a.o"]
"0xe2" [label="backend", shape=ellipse]
"0xe2" -> "0x7"
"0x1" -> "0xe2" [arrowhead=none]
"0x5" -> "0xe2" [arrowhead=none]
"0x8" [label="gn-thinlto/app/native/obj/b.o"]
"0xe3" [label="backend", shape=ellipse]
"0xe3" -> "0x8"
"0x3" -> "0xe3" [arrowhead=none]
"0x5" -> "0xe3" [arrowhead=none]
"0x9" [label="app"]
"0xe4" [label="link", shape=ellipse]
"0xe4" -> "0x9"
"0x7" -> "0xe4" [arrowhead=none]
"0x8" -> "0xe4" [arrowhead=none]
"0x6" -> "0xe4" [arrowhead=none]
}
"""


def test_parse_graph_reads_both_arrow_shapes() -> None:
    inputs = parse_graph(DOT)
    assert inputs["obj/a.o"] == {"a.cc"}
    assert inputs["gn-thinlto/app/final.rsp"] == {"obj/a.o", "obj/b.o"}
    assert inputs["app"] == {"gn-thinlto/app/native/obj/a.o", "gn-thinlto/app/native/obj/b.o",
                             "gn-thinlto/app/final.rsp"}


def test_critical_path_follows_the_last_finished_input() -> None:
    edges = last_build(LOG)
    path = critical_path(edges, parse_graph(DOT), PhaseIndex(LINKS))
    assert [(s.phase, s.edge.outputs[0]) for s in path] == [
        ("compile", "obj/b.o"), ("thin link", "gn-thinlto/app/used.txt"),
        ("backend", "gn-thinlto/app/native/obj/b.o"), ("final link", "app")]


def test_serial_fraction() -> None:
    # 0-10 two edges, 10-20 one, 20-30 none, 30-40 one: 30 of 40 ms at most one edge running
    edges = [LogEdge(0, 20, ("a",)), LogEdge(0, 10, ("b",)), LogEdge(30, 40, ("c",))]
    assert serial_fraction(edges) == 0.75


def test_report_per_binary_and_slowest_backends() -> None:
    cache = cache_verdicts("miss k1 gn-thinlto/app/native/obj/a.o\nhit k2 gn-thinlto/app/native/obj/b.o\n")
    links = [Link("app", "gn-thinlto/app", ("./app", "app"), bitcode_objects=3, used=2),
             Link("tool", "gn-thinlto/tool", ("./tool", "tool"))]
    keys = {"gn-thinlto/app/native/obj/a.o": "k1", "gn-thinlto/app/native/obj/b.o": "k2",
            "gn-thinlto/tool/native/obj/a.o": "k1"}
    report = analyse(last_build(LOG), links, cache, parse_graph(DOT), keys)
    assert report["binaries"] == [{"binary": "app", "bitcode_objects": 3, "used": 2, "backends_run": 2,
                                   "cache_hits": 1, "shared_with_other_binaries": 1, "backend_ms": 25,
                                   "thin_link_ms": 20, "final_link_ms": 4}]
    assert [b["output"] for b in report["slowest_backends"]] == ["gn-thinlto/app/native/obj/b.o",
                                                                 "gn-thinlto/app/native/obj/a.o"]
    assert report["critical_path_ms_by_phase"] == {"backend": 15, "compile": 55, "final link": 4, "thin link": 20}
    assert "critical path: 4 edges" in text(report)
