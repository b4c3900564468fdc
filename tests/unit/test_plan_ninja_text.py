"""The GN ninja reader: parsing, escapes, rule evaluation."""

from __future__ import annotations

from gn_thinlto.gn.ninja_text import evaluate, evaluate_rule_binding, parse

TEXT = """\
cflags = -O2
rule link
  command = clang++ ${ldflags} -o ${out} @${out}.rsp
  rspfile = ${out}.rsp
  rspfile_content = -Wl,--whole-archive ${in} -Wl,--no-whole-archive

build ./a$ b: link x.o y$:z.o | dep.so || stamp
  ldflags = -Wl,-rpath=\\$$ORIGIN $cflags
subninja obj/x.ninja
"""


def test_parse_edge_and_escapes() -> None:
    f = parse(TEXT)
    (e,) = f.edges
    assert e.outputs == ("./a b",)
    assert e.inputs == ("x.o", "y:z.o") and e.implicit == ("dep.so",) and e.order_only == ("stamp",)
    assert e.bindings["ldflags"] == "-Wl,-rpath=\\$ORIGIN -O2"
    assert (e.first_line, e.last_line) == (6, 7)
    assert f.subninjas == ("obj/x.ninja",)


def test_rule_binding_evaluation() -> None:
    f = parse(TEXT)
    e = f.edges[0]
    rule = f.rules["link"]
    assert evaluate_rule_binding(rule, "command", e, f.variables) == "clang++ -Wl,-rpath=\\$ORIGIN -O2 -o ./a b @./a b.rsp"
    assert evaluate_rule_binding(rule, "rspfile_content", e, f.variables).split()[1:3] == ["x.o", "y:z.o"]


def test_evaluate_escapes() -> None:
    assert evaluate("a$$b$ c$:d ${x}$y", {"x": "X", "y": "Y"}) == "a$b c:d XY"


def test_path_lists_with_and_without_escapes() -> None:
    f = parse("build a  b$ c d$:e f$$g: r  x y$ z || o\n")
    e = f.edges[0]
    assert e.outputs == ("a", "b c", "d:e", "f$g")
    assert e.inputs == ("x", "y z") and e.order_only == ("o",)
    assert parse("build a b: r x  y\n").edges[0].outputs == ("a", "b")
