"""The local backend cache's compiler identity (thinlto_base.keys.compiler_identity): the binary and the shared
libraries it loads. Debian's clang is a small driver; its code generator is libLLVM and libclang-cpp, and an update
of those alone must make the cached objects another compiler's (an attacker's review, 2026-12-07)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_toolchain import own_clang, rewrite_in_place
from thinlto_base.keys import compiler_identity


def _program_with_a_library(root: Path) -> tuple[Path, Path]:
    (root / "bin").mkdir()
    (root / "lib").mkdir()
    (root / "foo.c").write_text("int foo(void) { return 42; }\n")
    (root / "main.c").write_text("int foo(void);\nint main(void) { return foo() == 42 ? 0 : 1; }\n")
    lib, prog = root / "lib" / "libfoo.so", root / "bin" / "prog"
    subprocess.run(["clang-19", "-shared", "-fPIC", "-o", str(lib), str(root / "foo.c")], check=True)
    subprocess.run(["clang-19", "-o", str(prog), str(root / "main.c"), f"-L{root / 'lib'}", "-lfoo",
                    "-Wl,-rpath,$ORIGIN/../lib"], check=True)
    subprocess.run([str(prog)], check=True)  # it does load the library through its runpath
    return prog, lib


def test_an_update_of_a_library_the_compiler_loads_is_another_compiler(tmp_path: Path) -> None:
    prog, lib = _program_with_a_library(tmp_path)
    first = compiler_identity(str(prog))
    assert str(lib) in first and "libc.so" not in first  # the C runtime is no compiler's code generator
    assert compiler_identity(str(prog)) == first
    before = lib.stat()
    rewrite_in_place(lib, before.st_mtime_ns + 1_000_000_000)  # same size, a new modification time (an update's)
    assert compiler_identity(str(prog)) != first
    # Not the change time: a cache shared by machines with the same packages (dpkg keeps mtimes) still hits.
    os.utime(lib, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert compiler_identity(str(prog)) == first


def test_debians_clang_is_keyed_with_libllvm() -> None:
    identity = compiler_identity("clang-19")
    assert "libLLVM.so" in identity and "libclang-cpp.so" in identity


def test_a_library_upgraded_under_a_long_lived_process_is_seen_and_breaks_nothing(tmp_path: Path) -> None:
    """The step server keys backends for hours: an upgrade replaces libfoo.so.1's versioned file (the link then
    names another one, the old one is gone). The identity follows the name the loader uses, and changes."""
    prog, lib = _program_with_a_library(tmp_path)
    versioned = lib.with_name("libfoo.so.1.0")
    lib.rename(versioned)
    lib.symlink_to(versioned.name)
    first = compiler_identity(str(prog))
    upgraded = lib.with_name("libfoo.so.1.1")
    upgraded.write_bytes(versioned.read_bytes() + b"\0")
    versioned.unlink()
    lib.unlink()
    lib.symlink_to(upgraded.name)
    assert compiler_identity(str(prog)) != first


def test_a_clang_config_file_beside_the_compiler_is_part_of_it_locally_and_remotely(tmp_path: Path) -> None:
    """clang reads `clang.cfg` (and `<triple>-clang.cfg`) from its own directory: a flag there changes every
    object. It is in the local cache's key, and it travels with the remote toolchain, so the remote clang reads
    it too (an attacker's review, 2026-12-07: a clang.cfg with -ffunction-sections gave another object locally)."""
    from goma_ext.remote.toolchain import closure
    from thinlto_base.keys import config_files

    clang = own_clang(tmp_path)
    before = compiler_identity(str(clang))
    (tmp_path / "bin" / "clang.cfg").write_text("-ffunction-sections\n")
    assert config_files(str(clang)) == [str(tmp_path / "bin" / "clang.cfg")]
    assert compiler_identity(str(clang)) != before
    from goma_ext.remote.config import DEFAULT_BASE_SYSTEM

    tree = {f.rel: f.source for f in closure(clang, "clang++", DEFAULT_BASE_SYSTEM)}
    assert tree["bin/clang.cfg"] == tmp_path / "bin" / "clang.cfg"


def test_a_library_found_through_ld_so_conf_is_part_of_the_compiler(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """ld.so finds a library without a run path through ld.so.cache, which lists /etc/ld.so.conf's directories
    (/usr/local/lib): a libLLVM there was left out of the key, so its update kept every entry (a review)."""
    import shutil

    from thinlto_base import keys

    libs = tmp_path / "local-lib"
    libs.mkdir()
    (tmp_path / "shim.c").write_text("int gx_shim(void) { return 0; }\n")
    (tmp_path / "drv.c").write_text("int gx_shim(void);\nint main(void) { return gx_shim(); }\n")
    subprocess.run(["clang-19", "-shared", "-fPIC", "-Wl,-soname,libgxconf.so.1", "-o", libs / "libgxconf.so.1",
                    tmp_path / "shim.c"], check=True)
    subprocess.run(["clang-19", "-o", tmp_path / "drv", tmp_path / "drv.c", f"-L{libs}", "-l:libgxconf.so.1"],
                   check=True)
    (tmp_path / "ld.so.conf").write_text(f"{libs}\n")
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    # a cache of our own (-C), from a configuration of our own (-f): the machine's stays as it is
    subprocess.run([ldconfig, "-C", tmp_path / "ld.so.cache", "-f", tmp_path / "ld.so.conf"], check=True)
    keys._LIBRARIES.clear()
    machines = keys.ld_cache
    monkeypatch.setattr(keys, "ld_cache", lambda: machines(str(tmp_path / "ld.so.cache")))
    assert str(libs / "libgxconf.so.1") in compiler_identity(str(tmp_path / "drv"))
    keys._LIBRARIES.clear()
