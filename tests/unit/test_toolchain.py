"""The compiler as inputs: the ELF closure equals what ld.so loads (checked against ldd), the tree is hashed once
per compiler, and an action carrying it runs the compiler from its input root."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from goma_ext.reapi.errors import InputError
from goma_ext.reapi.merkle import hash_file
from goma_ext.reapi.proto import re_pb2
from goma_ext.remote.client import prepare_action, toolchain_for
from goma_ext.remote.config import DEFAULT_BASE_SYSTEM, load_config
from goma_ext.remote.elf import ElfError, read_dynamic
from goma_ext.remote.identity import CompilerIdentity
from goma_ext.remote.toolchain import TOOLCHAIN_DIR, ToolchainCache, ToolchainError, closure, in_base
from thinlto_base.keys import ld_cache

CLANG = Path("/usr/lib/llvm-19/bin/clang")


def _ldd(binary: Path) -> dict[str, Path]:
    """soname -> resolved file, as glibc's loader resolves them (ldd), without the base system."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    found = {}
    for m in re.finditer(r"^\s*(\S+) => (\S+) \(", out, re.M):
        if not in_base(m.group(1), DEFAULT_BASE_SYSTEM):
            found[m.group(1)] = Path(m.group(2)).resolve()
    return found


def test_dynamic_section_matches_readelf() -> None:
    info = read_dynamic(CLANG)
    out = subprocess.run(["readelf", "-dl", str(CLANG)], capture_output=True, text=True, check=True).stdout
    assert list(info.needed) == re.findall(r"\(NEEDED\)\s+Shared library: \[(.+)\]", out)
    assert list(info.runpath) == re.findall(r"\(RUNPATH\)\s+Library runpath: \[(.+)\]", out)
    assert info.interpreter == re.search(r"interpreter: (\S+)\]", out).group(1)  # type: ignore[union-attr]


@pytest.mark.parametrize("compiler", ["/usr/lib/llvm-19/bin/clang", "/usr/lib/llvm-22/bin/clang"])
def test_closure_is_what_ldd_loads(compiler: str) -> None:
    files = closure(Path(compiler), "clang++", DEFAULT_BASE_SYSTEM)
    assert files[0].rel == "bin/clang++" and files[0].executable
    libs = {f.rel.removeprefix("lib/"): f.source for f in files[1:]}
    assert libs == _ldd(Path(compiler))
    assert any(n.startswith("libLLVM.so.") for n in libs) and any(n.startswith("libclang-cpp.so.") for n in libs)


def test_ld_so_cache_is_read_as_ldconfig_lists_it() -> None:
    """Read in-process (the proxy runs no process of its own), and equal to `ldconfig -p`."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    listed: dict[str, list[str]] = {}
    for name, path in re.findall(r"^\s+(\S+) \(.*\) => (\S+)$", out, re.M):
        listed.setdefault(name, []).append(path)
    assert ld_cache() == listed and "libLLVM.so.19.1" in listed


def test_not_elf_and_truncated_files_are_one_line_errors(tmp_path: Path) -> None:
    script = tmp_path / "clang"
    script.write_text("#!/bin/sh\nexec clang-19 \"$@\"\n")
    with pytest.raises(ElfError, match="not an ELF file"):
        read_dynamic(script)
    cut = tmp_path / "cut"
    cut.write_bytes(CLANG.read_bytes()[:100])
    with pytest.raises(ElfError, match="truncated"):
        read_dynamic(cut)


def test_a_library_that_cannot_be_resolved_is_named(tmp_path: Path) -> None:
    """A program linked against a library that is gone: the error names the library and says it runs locally."""
    lib_dir = tmp_path / "libs"
    lib_dir.mkdir()
    (tmp_path / "f.c").write_text("int f(void) { return 1; }\n")
    (tmp_path / "m.c").write_text("int f(void);\nint main(void) { return f(); }\n")
    subprocess.run(["clang-19", "-shared", "-fPIC", "-o", lib_dir / "libgxgone.so.1", "-Wl,-soname,libgxgone.so.1",
                    tmp_path / "f.c"], check=True)
    subprocess.run(["clang-19", "-o", tmp_path / "prog", tmp_path / "m.c", f"-L{lib_dir}", "-l:libgxgone.so.1"],
                   check=True)
    shutil.rmtree(lib_dir)
    with pytest.raises(ToolchainError) as err:
        closure(tmp_path / "prog", "prog", DEFAULT_BASE_SYSTEM)
    assert "libgxgone.so.1" in str(err.value) and "runs locally" in str(err.value) and "\n" not in str(err.value)


def own_clang(root: Path) -> Path:
    """A toolchain of the test's own: a copy of clang-19 in ROOT/bin, its libraries reached through ROOT/lib."""
    (root / "bin").mkdir()
    own = root / "bin" / "clang"
    shutil.copy2(CLANG, own)
    (root / "lib").symlink_to("/usr/lib/llvm-19/lib")
    return own


def rewrite_in_place(path: Path, mtime_ns: int | None = None) -> None:
    """PATH with its last byte changed, written in place (the same inode and size), and its modification time set
    to MTIME_NS (by default the one it had: as `cp -p` over it leaves it)."""
    before = path.stat()
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0xFF]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns if mtime_ns is None else mtime_ns))


def test_the_tree_is_hashed_once_per_compiler_and_again_when_a_file_changes(tmp_path: Path) -> None:
    hashed: list[Path] = []

    def counting(path: Path, st: os.stat_result) -> object:
        hashed.append(path)
        return hash_file(path, st)

    own = own_clang(tmp_path)
    persist = tmp_path / "toolchains.json"
    first = ToolchainCache(persist, counting).get(own, "clang++", DEFAULT_BASE_SYSTEM)  # type: ignore[arg-type]
    assert len(hashed) == len(set(hashed)) > 10
    n = len(hashed)
    again = ToolchainCache(persist, counting).get(own, "clang++", DEFAULT_BASE_SYSTEM)  # type: ignore[arg-type]
    assert again == first and len(hashed) == n  # a new process reads the build directory's memory
    with open(own, "ab") as f:
        f.write(b"\0")
    changed = ToolchainCache(persist, counting).get(own, "clang++", DEFAULT_BASE_SYSTEM)  # type: ignore[arg-type]
    assert changed.tree.root != first.tree.root and len(hashed) == 2 * n
    assert changed.dirname == f"{TOOLCHAIN_DIR}/{changed.tree.root.hash[:16]}"


def test_a_compiler_copied_over_in_place_with_its_old_size_and_time_is_hashed_again(tmp_path: Path) -> None:
    """`cp -p` over the file (same inode), same size, the old modification time set back: only the change time
    tells. Missed, the actions would carry the old compiler while the request names the new one."""
    own = own_clang(tmp_path)
    persist = tmp_path / "toolchains.json"
    cache = ToolchainCache(persist)
    first = cache.get(own, "clang++", DEFAULT_BASE_SYSTEM)
    before = own.stat()
    rewrite_in_place(own)
    after = own.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    for changed in (cache.get(own, "clang++", DEFAULT_BASE_SYSTEM),  # the proxy's memory
                    ToolchainCache(persist).get(own, "clang++", DEFAULT_BASE_SYSTEM)):  # the build directory's
        assert changed.tree.root != first.tree.root


def test_the_compiler_identity_of_a_compiler_copied_over_in_place_is_taken_again(tmp_path: Path) -> None:
    """The request's compiler identity (its SHA-256 picks the worker's own compiler under `toolchain: host`) is
    remembered by the binary's stat identity: a `cp -p` in place keeps size, inode and modification time."""
    from goma_ext.remote.identity import identify_cached

    own = tmp_path / "clang"
    shutil.copy2(CLANG, own)
    cache = tmp_path / "compiler-identity.json"
    first = identify_cached(str(own), tmp_path, cache)
    rewrite_in_place(own)
    assert identify_cached(str(own), tmp_path, cache).sha256 != first.sha256


def _workspace(tmp_path: Path) -> Path:
    out = tmp_path / "src" / "out" / "Default"
    (out / "obj").mkdir(parents=True)
    (out / "obj" / "a.o").write_bytes(b"BC")
    return out


def _command(prepared: object) -> re_pb2.Command:
    cmd = re_pb2.Command()
    cmd.ParseFromString(prepared.built.command)  # type: ignore[attr-defined]
    return cmd


def test_an_action_with_a_toolchain_runs_the_compiler_from_its_input_root(tmp_path: Path) -> None:
    out = _workspace(tmp_path)
    cfg = load_config({"endpoint": "grpc://127.0.0.1:1", "exec_root": "../..",
                       "platform": {"OSFamily": "Linux", "container-image": "docker://img@sha256:ab"}}, {})
    assert cfg is not None
    ident = CompilerIdentity(CLANG, "clang version 19", "0" * 64)
    tc = toolchain_for(cfg, "clang++-19", ident, ToolchainCache())
    assert tc is not None
    prepared = prepare_action(cfg, ["clang++-19", "-c", "obj/a.o", "-o", "obj/a.native.o"], out, ["obj/a.o"],
                              ["obj/a.native.o"], ident, toolchain=tc)
    cmd = _command(prepared)
    assert cmd.arguments[0] == f"../../{tc.dirname}/bin/clang++-19"
    assert [(e.name, e.value) for e in cmd.environment_variables] == [("LD_LIBRARY_PATH", f"../../{tc.dirname}/lib")]
    assert [(p.name, p.value) for p in cmd.platform.properties] == [
        ("OSFamily", "Linux"), ("container-image", "docker://img@sha256:ab")]  # sorted; no compiler identity
    assert prepared.tree.file_bytes == 2  # the command's own inputs; the toolchain's blobs travel besides
    assert set(tc.tree.blobs) <= set(prepared.blobs())
    other = load_config({"endpoint": "grpc://127.0.0.1:1", "exec_root": "../..", "platform": {"Pool": "big"}}, {})
    assert other is not None
    moved = prepare_action(other, ["clang++-19", "-c", "obj/a.o", "-o", "obj/a.native.o"], out, ["obj/a.o"],
                           ["obj/a.native.o"], ident, toolchain=tc)
    assert moved.built.action_digest != prepared.built.action_digest  # the platform is part of the action key


def test_host_mode_names_the_compiler_and_an_input_inside_the_toolchain_dir_is_refused(tmp_path: Path) -> None:
    out = _workspace(tmp_path)
    cfg = load_config({"endpoint": "grpc://127.0.0.1:1", "exec_root": "../..", "toolchain": "host"}, {})
    assert cfg is not None
    ident = CompilerIdentity(CLANG, "clang version 19", "0" * 64)
    assert toolchain_for(cfg, "clang", ident, ToolchainCache()) is None
    cmd = _command(prepare_action(cfg, ["clang", "-c", "obj/a.o"], out, ["obj/a.o"], ["obj/a.native.o"], ident))
    assert cmd.arguments[0] == "clang" and not cmd.environment_variables
    assert {p.name for p in cmd.platform.properties} == {"OSFamily", "compiler-sha256", "compiler-version"}
    tc = ToolchainCache().get(CLANG, "clang", DEFAULT_BASE_SYSTEM)
    sneaky = out.parent.parent / tc.dirname / "bin"
    sneaky.mkdir(parents=True)
    (sneaky / "x").write_text("x")
    with pytest.raises(InputError, match="receives whole"):
        prepare_action(cfg, ["clang", "-c", "obj/a.o"], out, [f"../../{tc.dirname}/bin/x"], ["obj/a.native.o"],
                       ident, toolchain=tc)


def test_settings_from_yaml_env_and_flags() -> None:
    env = {"GOMA_EXT_REMOTE_PLATFORM": "Pool=big,OSFamily=Linux", "GOMA_EXT_REMOTE_BASE_SYSTEM": "libc.so.6, libm*"}
    cfg = load_config({"endpoint": "grpcs://rbe:443", "toolchain": "inputs"}, env)
    assert cfg is not None
    assert cfg.platform == (("OSFamily", "Linux"), ("Pool", "big")) and cfg.base_system == ("libc.so.6", "libm*")
    for bad in ({"toolchain": "docker"}, {"platform": "Pool"}, {"platform": {"Pool": ""}}, {"platform": ["a"]}):
        with pytest.raises(InputError.__mro__[1], match=r"remote\.(toolchain|platform)"):
            load_config({"endpoint": "grpc://127.0.0.1:1", **bad}, {})
