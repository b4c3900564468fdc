"""[graph] The basic workspace through the graph with each installed LLVM (19 and 22): self-checks pass, the
cross-module call is inlined, and the binaries match the in-process ThinLTO build's functions and .text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Llvm

from .test_graph_support import copy_workspace, defined_functions, disassembly, gen_and_build, plain_build, text_size


def test_basic_workspace_with_each_llvm(llvm: Llvm, tmp_path: Path) -> None:
    root = copy_workspace("basic", tmp_path)
    args = f'clang_base_path="/usr/lib/llvm-{llvm.version}"'
    b = gen_and_build(root, tmp_path / "out", f"--args={args}")
    ref = plain_build(root, tmp_path / "ref", args)
    for name in ("app", "tool", "app_unittests", "lib_unittests", "refused"):
        assert b.run_binary(name) == f"OK {name}"
    main = disassembly(b.out / "app").split("<main>:")[1].split("\n\n")[0]
    assert "_ZN3lib6SquareEi" not in main
    for name in ("app", "tool", "app_unittests", "lib_unittests", "libcomp.so"):
        assert defined_functions(b.out / name) == defined_functions(ref.out / name), name
        assert abs(text_size(b.out / name) - text_size(ref.out / name)) <= 0.02 * text_size(ref.out / name), name
    assert f"/usr/lib/llvm-{llvm.version}/bin/clang -c -x ir" in (b.out / "gn-thinlto/app/build.ninja").read_text()
