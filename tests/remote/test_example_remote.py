"""The bundled example's ThinLTO backends, run remotely through `goma-ext run`: byte-identical, binaries self-check.

Until gn-thinlto renders backend edges through the wrapper itself, the test builds the example locally, takes each
backend edge's argv from the generated ninja files, reruns it remotely in the build directory, and relinks.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from goma_ext.remote import stats
from tests.conftest import EXAMPLE_ROOT
from tests.remote.conftest import INSTANCE, Cluster

JOBS = 4


def _unescape_ninja(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        if value[i] == "$" and i + 1 < len(value):
            out.append(value[i + 1])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def backend_argvs(out: Path) -> list[list[str]]:
    """Every backend edge's compiler argv, from gn-thinlto's per-link ninja files."""
    argvs = []
    for f in sorted((out / "gn-thinlto").glob("*/build.ninja")):
        lines = f.read_text().splitlines()
        for n, line in enumerate(lines):
            if ": gn_thinlto_backend " in line and line.startswith("build "):
                argv_line = next(x for x in lines[n + 1 :] if x.startswith("  argv = "))
                argvs.append(shlex.split(_unescape_ninja(argv_line[len("  argv = ") :])))
    return argvs


def _output(argv: list[str]) -> str:
    return argv[argv.index("-o") + 1]


def test_example_backends_run_remotely_byte_identical(cluster: Cluster, tmp_path: Path, salt: str) -> None:
    cluster.ensure_server()
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "gn_thinlto.cli", "gen", str(out), "--root", str(EXAMPLE_ROOT)], check=True,
                   capture_output=True)
    subprocess.run(["ninja", "-C", str(out)], check=True, capture_output=True)
    argvs = backend_argvs(out)
    assert len(argvs) > 100
    reference = {}
    for argv in argvs:
        native = out / _output(argv)
        if native.exists():
            reference[_output(argv)] = native.read_bytes()
            native.unlink()

    def remote(argv: list[str]) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "goma_ext.run", "--remote", cluster.endpoint, "--exec-root", ".", "--", *argv]
        env = {"GOMA_EXT_CACHE_SALT": salt, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE, "PATH": "/usr/bin:/bin"}
        return subprocess.run(cmd, cwd=out, capture_output=True, text=True, env=env)

    todo = [a for a in argvs if _output(a) in reference]
    with ThreadPoolExecutor(JOBS) as pool:
        runs = list(pool.map(remote, todo))
    assert [r.returncode for r in runs] == [0] * len(runs), next(r.stderr for r in runs if r.returncode)
    modes = [r.mode for r in stats.read(out / "gn_thinlto_remote.jsonl")]
    assert modes == [stats.Mode.REMOTE] * len(todo), next(r.stderr for r in runs if "warning" in r.stderr)
    differ = [o for o in reference if (out / o).read_bytes() != reference[o]]
    assert differ == []
    relink = subprocess.run(["ninja", "-C", str(out)], capture_output=True, text=True)
    assert relink.returncode == 0, relink.stdout[-2000:]
    from gn_thinlto import tools
    from gn_thinlto.example import run_self_checks

    binaries = tools.gn_ls(out, EXAMPLE_ROOT, "--type=executable", "--as=output")
    failed = [c for c in run_self_checks(out, binaries) if not c.ok]
    assert binaries and failed == []
