"""The one ninja writer (gn_thinlto.steps.ninja_syntax): escaping, statements, the batch form. (ninja itself reading
back what it wrote: tests/integration/test_ninja_syntax_readback.py.)"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gn_thinlto.errors import GnThinltoError
from gn_thinlto.steps import ninja_syntax as ninja

ODD = ["a b", "c:d", "$e", "f$ g:h", "plain/o.o"]


@pytest.mark.parametrize(
    "raw,path,value",
    [("a b", "a$ b", "a b"), ("c:d", "c$:d", "c:d"), ("$x", "$$x", "$$x"), ("plain/o.o", "plain/o.o", "plain/o.o"),
     ("a $b:c", "a$ $$b$:c", "a $$b:c")],
)
def test_paths_escape_dollar_space_and_colon_values_only_dollar(raw: str, path: str, value: str) -> None:
    assert ninja.escape_path(raw) == path and ninja.escape(raw) == value
    assert ninja.paths([raw, "x"]) == f"{path} x" and ninja.paths(raw) == path


@pytest.mark.parametrize("write", [
    lambda: ninja.escape_path("a\nb"), lambda: ninja.escape("a\nb"), lambda: ninja.variable("k", "a\nb"),
    lambda: ninja.variable("k", ninja.raw("$a\nb")), lambda: ninja.build("o", "r", ["a", "b\nc"]),
    lambda: ninja.build("o", "r", variables={"k": "a\nb"}), lambda: ninja.subninja("a\nb"),
    lambda: ninja.include("a\nb"), lambda: ninja.comment("a\nb"),
    lambda: ninja.build_lines("r", ["o"], ["a\nb"]), lambda: ninja.build_lines("r", ["o"], variables={"k": ["\n"]}),
    lambda: ninja.build_lines("r", ["o"], variables={"k": ["$a\n"]}, raw_keys={"k"}),
], ids=["escape_path", "escape", "variable", "raw value", "build path", "build value", "subninja", "include",
        "comment", "build_lines path", "build_lines value", "build_lines raw value"])
def test_a_newline_is_refused_with_one_line(write: object) -> None:
    with pytest.raises(GnThinltoError, match="newline cannot be written to a ninja file") as e:
        write()  # type: ignore[operator]
    assert "\n" not in str(e.value)


def test_build_sections_in_ninja_order_and_empty_ones_left_out() -> None:
    assert ninja.build("o", "r") == "build o: r"
    assert ninja.build(["o 1", "o2"], "r", ["i:1", "i2"], implicit=["d$"], order_only=["s"],
                       implicit_outputs=["io"]) == "build o$ 1 o2 | io: r i$:1 i2 | d$$ || s"
    assert ninja.build("o", "r", implicit="d") == "build o: r | d"
    assert ninja.build("o", "r", order_only=("s",)) == "build o: r || s"


def test_variables_are_indented_escaped_unless_raw_and_none_leaves_them_out() -> None:
    text = ninja.build("o", "r", variables={"argv": ninja.raw("$head x$$y"), "description": "a $b", "pool": None,
                                            "restat": 1, "empty": ""})
    assert text == "build o: r\n  argv = $head x$$y\n  description = a $$b\n  restat = 1\n  empty = "
    assert ninja.build("o", "r", variables=[("b", "1"), ("a", "2")]) == "build o: r\n  b = 1\n  a = 2"
    assert ninja.variable("k", "v $x") == "k = v $$x" and ninja.variable("k", True, indent=2) == "    k = 1"


def test_rule_include_subninja_comment() -> None:
    bindings: dict[str, str | int | None] = {"command": ninja.raw("cc -c $in -o $out"), "restat": 1}
    assert ninja.rule("cc", bindings) == (
        "rule cc\n  command = cc -c $in -o $out\n  restat = 1")
    assert ninja.include("a b/rules.ninja") == "include a$ b/rules.ninja"
    assert ninja.subninja("x:y.ninja") == "subninja x$:y.ninja"
    assert ninja.comment("from a $b") == "# from a $b"


_path = st.text(alphabet="ab/.$ :", max_size=4)


@given(st.data())
def test_build_lines_is_build_per_statement(data: st.DataObject) -> None:
    n = data.draw(st.integers(0, 4))
    column = st.lists(_path.filter(bool), min_size=n, max_size=n)
    optional: st.SearchStrategy[list[str]] = st.one_of(st.just([]), st.lists(_path, min_size=n, max_size=n))
    outputs, inputs = data.draw(column), data.draw(optional)
    implicit, implicit_outputs = data.draw(optional), data.draw(optional)
    values = {k: data.draw(st.lists(_path, min_size=n, max_size=n)) for k in data.draw(st.sets(st.sampled_from("xy")))}
    raw_keys = data.draw(st.sets(st.sampled_from("xy")))
    expected = "\n".join(
        ninja.build(outputs[i], "r", [inputs[i]] if inputs and inputs[i] else [],
                    implicit=[implicit[i]] if implicit and implicit[i] else [],
                    implicit_outputs=[implicit_outputs[i]] if implicit_outputs and implicit_outputs[i] else [],
                    variables={k: ninja.raw(v[i]) if k in raw_keys else v[i] for k, v in values.items()})
        for i in range(n))
    assert ninja.build_lines("r", outputs, inputs, implicit, implicit_outputs, values, raw_keys) == expected


def test_build_lines_checks_its_columns() -> None:
    with pytest.raises(ValueError, match="one entry per output"):
        ninja.build_lines("r", ["a", "b"], ["x"])
    with pytest.raises(ValueError, match="one value per output"):
        ninja.build_lines("r", ["a", "b"], variables={"k": ["x"]})
