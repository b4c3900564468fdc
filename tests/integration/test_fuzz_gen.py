"""`gn-thinlto gen`, where gn runs the hook (--json-ide-script), and ninja's own re-run of gn after an edit, on
tests/workspaces/basic with bad configs: exit 0, or exit 2 with one `gn-thinlto: error:` line that carries the
hook's own message (not GN's "Python has quit", nor a traceback's last line).

test_fuzz_gen_configs: seed 9, 16 configs mutated as tests/unit/test_fuzz_gn_inputs mutates them, each through
a real `gn gen`; before the fixes of [trust] item 5, 1 of them (a config not UTF-8) ended in a traceback in the
hook, of which gen showed only the last line (`UnicodeDecodeError: 'utf-8' codec can't decode byte 0xc3…`);
and when ninja's re-run of gn wrote to a log file, the hook's line overwrote the start of the log.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.unit.test_fuzz_gn_inputs import _config_mutants

from .test_graph_support import copy_workspace

PREFIX = "gn-thinlto: error: "
PYTHON_EXCEPTION = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workspace("basic", tmp_path_factory.mktemp("ws"))


def gen(out: Path, root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gn_thinlto.cli", "gen", str(out), "--root", str(root), *extra],
                          capture_output=True, text=True, timeout=300, check=False)


def test_fuzz_gen_configs(root: Path, tmp_path: Path) -> None:
    breaches = []
    for n, (data, what) in enumerate(_config_mutants(9, 16)):
        config = tmp_path / f"config{n}.yaml"
        config.write_bytes(data)
        proc = gen(tmp_path / f"out{n}", root, "--config", str(config))
        one_line = proc.stderr.count("\n") == 1 and proc.stderr.startswith(PREFIX)
        # a traceback's last line ("…: UnicodeDecodeError: 'utf-8' codec…") or GN's "Python has quit" instead
        mute = PYTHON_EXCEPTION.search(proc.stderr) or "has quit" in proc.stderr
        if proc.returncode not in (0, 2) or (proc.returncode == 2 and (not one_line or mute)):
            breaches.append(f"{what}: exit {proc.returncode}: {proc.stderr[-300:]!r}")
    assert not breaches, "\n".join(breaches)


def test_gen_says_what_the_hook_said(root: Path, tmp_path: Path) -> None:
    config = tmp_path / "gn_thinlto.yaml"
    config.write_bytes(b"dyndep: \xff\n")
    proc = gen(tmp_path / "out", root, "--config", str(config))
    assert proc.returncode == 2 and proc.stderr == (
        f"{PREFIX}'gn gen {tmp_path / 'out'}…' failed with exit 1: {config}: not UTF-8 text (byte 0xff at offset 8)\n")


def _regenerate_with_bad_config(root: Path, out: Path, **streams: object) -> subprocess.CompletedProcess[str]:
    """`ninja build.ninja` re-running `gn -q gen` (a BUILD.gn edited) with a config the hook refuses."""
    config = root / "gn_thinlto.yaml"
    try:
        config.write_text("dyndep: true\n")
        assert gen(out, root).returncode == 0
        config.write_text("dyndep: 3\n")
        later = time.time() + 2
        os.utime(root / "BUILD.gn", (later, later))
        return subprocess.run(["ninja", "-C", str(out), "build.ninja"], text=True, timeout=300, check=False,
                              **streams)  # type: ignore[call-overload]
    finally:
        config.unlink()


def test_ninja_regeneration_shows_the_hook_error(root: Path, tmp_path: Path) -> None:
    """gn -q swallows the hook's output, so the hook writes its line to gn's stderr too (a pipe here, as CI's)."""
    proc = _regenerate_with_bad_config(root, tmp_path / "out", capture_output=True)
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith(PREFIX)]
    assert proc.returncode != 0 and said == [f"{PREFIX}{root}/gn_thinlto.yaml: dyndep: expected true or false, got 3"]


def test_ninja_regeneration_into_a_log_file_stays_whole(root: Path, tmp_path: Path) -> None:
    """When ninja writes to a file, a line written through a second file description would land at the wrong
    offset (it overwrote the log's first line): the hook leaves it out, and the log keeps ninja's lines."""
    log = tmp_path / "ninja.log"
    with log.open("w") as f:
        proc = _regenerate_with_bad_config(root, tmp_path / "out", stdout=f, stderr=subprocess.STDOUT)
    lines = log.read_text().splitlines()
    assert proc.returncode != 0 and lines[0].startswith("ninja: Entering directory"), lines
    assert "ERROR Python has quit with exit code 2." in lines and not any(PREFIX in line for line in lines), lines
