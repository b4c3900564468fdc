"""The environment a backend compile runs in locally: the caller's, without what changes the compiler's output.

A remote backend runs with an empty environment (the toolchain's lib/ directory aside), and the cache keys
(thinlto_base.keys) cover the compiler, its libraries as ld.so finds them, its flags and its inputs, never the
environment. So a local compile must not read what would make it differ from the remote one or from its key:
clang's driver edits its arguments after CCC_OVERRIDE_OPTIONS, finds the programs it starts in COMPILER_PATH and
skips its `.cfg` files under CLANG_NO_DEFAULT_CONFIG; the loader's variables load other libraries than the
compiler identity names. A variable that only changes messages or where temporary files go stays.

The step launcher (gn_thinlto/steps/launcher.c, UNSET_FOR_COMPILES) removes the same names from the compiles the
step server has it run (tests/unit/test_compile_env.py checks that the two lists agree). Only compiles: a remote
launcher (goma-ext, whose interpreter may need LD_LIBRARY_PATH) keeps the environment, and cleans it itself for
its local fallback. Standard library only:
the backend step imports this.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# The first word of a backend step's command that is a compile (not a remote launcher): the step and the step
# launcher drop it and run the rest with compile_environment() (launcher.c: COMPILE_MARK).
COMPILE_MARK = "gn-thinlto-compile:"

UNSET = (
    "CCC_OVERRIDE_OPTIONS",  # clang's driver: edits (adds, removes, replaces) its arguments
    "COMPILER_PATH",  # clang's driver: where it looks for the programs it starts (as, ld)
    "CLANG_NO_DEFAULT_CONFIG",  # clang's driver: skip the `.cfg` files beside the binary
    "LD_LIBRARY_PATH",  # ld.so: other libLLVM, libclang-cpp than the compiler identity names
    "LD_PRELOAD",
    "LD_AUDIT",
)


def compile_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """ENV (default: this process's) without the UNSET names: what a local backend compile runs with."""
    return {k: v for k, v in (os.environ if env is None else env).items() if k not in UNSET}


def explain_failure(code: int, env: Mapping[str, str] | None = None) -> str:
    """The line to show after a compile that could not start (the loader's exit status, 127) while ENV (default:
    this process's) set a loader variable this module removed; else ""."""
    removed = [name for name in UNSET if name.startswith("LD_") and (os.environ if env is None else env).get(name)]
    if code != 127 or not removed:
        return ""
    return (f"gn-thinlto: note: backend compiles run without {', '.join(removed)} (docs/guide/cache.md); a compiler "
            "that needs it to start needs a run path instead (-Wl,-rpath, or patchelf --set-rpath)")
