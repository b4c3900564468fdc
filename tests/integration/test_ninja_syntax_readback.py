"""The one ninja writer (gn_thinlto.steps.ninja_syntax) against ninja itself: what it writes, ninja reads back."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gn_thinlto.steps import ninja_syntax as ninja


def test_ninja_reads_back_the_paths_and_values_it_was_written(tmp_path: Path) -> None:
    """Odd paths (space, `$`, `:`) in every section, and a value with `$`, as ninja itself reads them."""
    out, implicit_out = "o ut$:1", "io $x"
    text = "\n".join([
        ninja.comment("written by test_ninja_syntax"),
        ninja.variable("msg", "a $b c"),
        ninja.rule("r", {"command": ninja.raw("echo $msg $extra > $out")}),
        ninja.build(out, "r", ["in 1", "i$n:2"], implicit=["dep:x"], order_only=["o o$"],
                    implicit_outputs=[implicit_out], variables={"extra": "$HOME"}),
        ninja.build_lines("r", ["in 1", "i$n:2", "dep:x", "o o$"]),
        "",
    ])
    (tmp_path / "build.ninja").write_text(text)

    def tool(*args: str) -> str:
        return subprocess.run(["ninja", "-C", str(tmp_path), *args], capture_output=True, text=True,
                              check=True).stdout

    query = tool("-t", "query", out)
    assert query.splitlines()[:5] == [f"{out}:", "  input: r", "    in 1", "    i$n:2", "    | dep:x"]
    assert query.splitlines()[5] == "    || o o$"
    targets = {line.rsplit(": ", 1)[0] for line in tool("-t", "targets", "all").splitlines()}
    assert targets == {out, implicit_out, "in 1", "i$n:2", "dep:x", "o o$"}
    assert tool("-t", "commands", out).splitlines()[-1] == f"echo a $b c $HOME > '{out}'"
    assert "ninja: no work to do" not in tool("-n", out)
