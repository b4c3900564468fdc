"""Build, once per cache, the ninja that the scale benchmark times and mark_built (bench/mark_built.cc).

Both come from the pinned ninja sdist, compiled without LTO straight with clang++ (no GN, no ninja), so the
scale benchmark measures one ninja version on every graph, and mark_built computes ninja's own command hashes.
Every file is compiled with a precompiled header of the standard headers ninja includes (PREFIX_HEADERS, their
templates instantiated once in it): parsing them was more than half of the build's CPU (52 -> 29 CPU s for the 33
files at -O2), and the objects' code is the same (their disassembly compared, file by file).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.measure import run
from bench.subjects import ninja_sdist

CXX = "/usr/lib/llvm-19/bin/clang++"
CXXFLAGS = ("-O2", "-std=c++17", "-DNDEBUG", "-DUSE_PPOLL=1", "-D_FILE_OFFSET_BITS=64", "-fno-rtti",
            "-fno-exceptions", "-w")
MARK_BUILT_SOURCE = Path(__file__).resolve().parent / "mark_built.cc"
# Included by ninja's sources; none of them emits code of its own (<iostream>'s static initializer would).
PREFIX_HEADERS = ("assert.h", "errno.h", "fcntl.h", "stdint.h", "stdio.h", "stdlib.h", "string.h", "unistd.h",
                  "algorithm", "functional", "map", "memory", "queue", "set", "string", "unordered_map",
                  "unordered_set", "vector")


@dataclass(frozen=True)
class NinjaTools:
    ninja: Path
    mark_built: Path
    version: str


def build(cache: Path) -> NinjaTools:
    upstream = ninja_sdist.fetch(cache)
    out = cache / f"tools-{ninja_sdist.VERSION}"
    tools = NinjaTools(out / "ninja", out / "mark_built", ninja_sdist.VERSION)
    stamp = out / "mark_built.source"
    if tools.ninja.is_file() and tools.mark_built.is_file() and stamp.is_file() \
            and stamp.read_text() == MARK_BUILT_SOURCE.read_text():
        return tools
    (out / "obj").mkdir(parents=True, exist_ok=True)
    src = upstream / "src"
    prefix = out / "obj" / "prefix.h"
    prefix.write_text("".join(f"#include <{h}>\n" for h in PREFIX_HEADERS))
    pch = prefix.with_name("prefix.h.pch")
    run([CXX, *CXXFLAGS, "-fpch-instantiate-templates", "-x", "c++-header", str(prefix), "-o", str(pch)])

    def compile_one(name: str) -> Path:
        obj = out / "obj" / f"{name}.o"
        source = src / f"{name}.cc" if (src / f"{name}.cc").is_file() else MARK_BUILT_SOURCE
        run([CXX, *CXXFLAGS, "-include-pch", str(pch), "-iquote", str(src), "-c", str(source), "-o", str(obj)])
        return obj

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        objs = dict(zip(ninja_sdist.LIBNINJA + ("ninja", "mark_built"),
                        pool.map(compile_one, ninja_sdist.LIBNINJA + ("ninja", "mark_built"))))
    lib = [str(objs[n]) for n in ninja_sdist.LIBNINJA]
    run([CXX, "-o", str(tools.ninja), str(objs["ninja"]), *lib])
    run([CXX, "-o", str(tools.mark_built), str(objs["mark_built"]), *lib])
    stamp.write_text(MARK_BUILT_SOURCE.read_text())
    return tools
