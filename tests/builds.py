"""Build directories the tests share (no tests here): the example built once per session, and copies of a build
that ninja finds up to date, so that a test runs only the steps it is about.

(Apart from tests/conftest.py, which re-exports these, so that helpers of every folder can import them without
importing a conftest.)"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gn_thinlto.steps.backend_log import CacheEvent
from goma_ext.remote.names import DEFAULT_STATS_LOG
from thinlto_base.store import CacheStore

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_ROOT = REPO / "examples" / "chromium_style"


@dataclass(frozen=True)
class Build:
    root: Path
    out: Path

    def ninja(self, *args: str) -> str:
        proc = subprocess.run(["ninja", "-C", str(self.out), *args], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        return proc.stdout

    def log_entries(self) -> list[tuple[int, int, str]]:
        """(start_ms, end_ms, output) of every .ninja_log line (format v5: start end mtime output hash)."""
        lines = (self.out / ".ninja_log").read_text().splitlines()[1:]
        return [(int(p[0]), int(p[1]), p[3]) for p in (line.split("\t") for line in lines)]

    def ran_since(self, count_before: int) -> list[str]:
        return [o for _, _, o in self.log_entries()[count_before:]]

    def run_binary(self, name: str) -> str:
        proc = subprocess.run([str(self.out / name)], cwd=self.out, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, f"{name}: exit {proc.returncode} {proc.stdout}{proc.stderr}"
        return proc.stdout.strip()


def gn_thinlto(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gn_thinlto.cli", *args], cwd=cwd, capture_output=True, text=True)


def gen_and_build(root: Path, out: Path, *extra: str, targets: tuple[str, ...] = ()) -> Build:
    """`gn-thinlto gen` with EXTRA, then ninja (TARGETS, or everything)."""
    proc = gn_thinlto("gen", str(out), "--root", str(root), *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    b = Build(root, out)
    b.ninja(*targets)
    return b


def copy_example_sources(parent: Path) -> Path:
    """A copy of the example's sources at PARENT/chromium_style; a test's build directories go beside it, in
    PARENT, as deep as one another, so that the relative paths of two builds to their sources are the same."""
    root = parent / EXAMPLE_ROOT.name
    shutil.copytree(EXAMPLE_ROOT, root)
    return root


def build_example_tree(dest: Path, *extra: str, targets: tuple[str, ...] = ()) -> Build:
    """A copy of the example's sources built through the graph with EXTRA `gn-thinlto gen` arguments, TARGETS or
    everything (with neither, what the session's `example_tree` holds), laid out as in the checkout:
    DEST/examples/chromium_style and DEST/out/example, so that `gn-thinlto example` run in DEST finds both."""
    tree = example_tree_in(dest)
    shutil.copytree(EXAMPLE_ROOT, tree.root)
    return gen_and_build(tree.root, tree.out, *extra, targets=targets)


EXAMPLE_STDOUT = "gn-thinlto-example.stdout"


def example_command_tree(dest: Path) -> None:
    """The example built as the README shows, `gn-thinlto example --root examples/chromium_style --out
    out/example` run in DEST (the graph, default settings: what `build_example_tree` makes, and every binary's
    self-check run), laid out in DEST as `build_example_tree` does; the command's output kept in DEST (read it
    with `example_stdout`)."""
    shutil.copytree(EXAMPLE_ROOT, example_tree_in(dest).root)
    proc = gn_thinlto("example", "--root", str(EXAMPLE_ROOT.relative_to(REPO)), "--out", "out/example", cwd=dest)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (dest / EXAMPLE_STDOUT).write_text(proc.stdout)


def example_in_process_tree(graph: Build, dest: Path) -> None:
    """GRAPH (made by `example_command_tree`) copied to DEST and switched back to GN's own graph, in-process
    ThinLTO in lld, as `gn-thinlto example --in-process` does it (run in DEST; its output kept, for
    `example_stdout`): the compiles are GRAPH's, only the links run."""
    tree = copy_example_tree(graph, dest)
    proc = gn_thinlto("example", "--root", str(EXAMPLE_ROOT.relative_to(REPO)), "--out", "out/example",
                      "--in-process", cwd=dest)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert tree == example_tree_in(dest)
    (dest / EXAMPLE_STDOUT).write_text(proc.stdout)


def example_stdout(tree: Build) -> str:
    """What `gn-thinlto example` printed when it built TREE (made by `example_command_tree` or
    `example_in_process_tree`)."""
    return (tree.out.parent.parent / EXAMPLE_STDOUT).read_text()


def example_tree_in(dest: Path) -> Build:
    """Where `build_example_tree` lays out the example in DEST."""
    return Build(dest / EXAMPLE_ROOT.relative_to(REPO), dest / "out" / "example")


def copy_build_dir(src: Path, dest: Path) -> Path:
    """A copy of build directory SRC at DEST, links as links and modification times kept (ninja finds it as up to
    date as SRC), without sockets and FIFOs (a step server may be listening in SRC: a copy cannot take its
    socket). DEST should be as deep as SRC, so that the build's relative paths to its sources hold."""

    def special(directory: str, names: list[str]) -> set[str]:
        modes = {n: os.lstat(os.path.join(directory, n)).st_mode for n in names}
        return {n for n, m in modes.items() if stat.S_ISSOCK(m) or stat.S_ISFIFO(m)}

    shutil.copytree(src, dest, symlinks=True, ignore=special)
    return dest


def copy_example_tree(tree: Build, dest: Path) -> Build:
    """A copy of TREE in DEST, sources and build placed as they are under their common parent (so every relative
    path in the build holds) with their modification times, so ninja finds it up to date; a test edits and
    regenerates its copy without compiling what did not change."""
    base = Path(os.path.commonpath([tree.root, tree.out]))
    root, out = dest / tree.root.relative_to(base), dest / tree.out.relative_to(base)
    shutil.copytree(tree.root, root, symlinks=True)
    copy_build_dir(tree.out, out)
    return Build(root, out)


def copy_without_backends(tree: Build, dest: Path) -> Build:
    """A copy of TREE in DEST (`copy_example_tree`) with its backends forgotten (`forget_backends`): generated
    again (e.g. with --remote), it compiles nothing and runs every backend again."""
    b = copy_example_tree(tree, dest)
    forget_backends(b.out)
    return b


def forget_target_backends(out: Path, target: str) -> Path:
    """OUT with one link TARGET's backends forgotten: its natives and the local backend cache's entries of its
    backends (their keys from the backend log; some were hits of other targets' backends, whose jobs then miss with
    them). Generated again with --remote, every backend's command line changes, so ninja runs them all again: the
    others hit the local cache, TARGET's run over REAPI. (`forget_backends` forgets every target's.)"""
    state = out / "gn-thinlto"
    lines = [line.split(" ", 2) for line in (state / "backend.log").read_text().splitlines()]
    keys = {key for event, key, output in lines
            if event in (CacheEvent.HIT, CacheEvent.MISS) and output.startswith(f"gn-thinlto/{target}/")}
    assert keys, f"{out}: the build ran no backend of {target}"
    store = CacheStore(state / "cache")
    for key in keys:
        os.unlink(store.entry_path(key))
    shutil.rmtree(state / target / "native")
    return out


def forget_backends(out: Path) -> Path:
    """OUT as a fresh build directory is to its backends: no native or partition object or .dwo, no local backend
    cache, no cache or stats log. Its compiles and thin links stay: generated again (e.g. with --remote), it
    compiles nothing and every backend runs again, missing the local cache."""
    shutil.rmtree(out / "gn-thinlto" / "cache", ignore_errors=True)
    for native in (out / "gn-thinlto").glob("*/native"):
        shutil.rmtree(native)
    for partition in (out / "gn-thinlto").glob("*/lto/part*.o"):  # partition edges compile like backends
        partition.unlink()
    (out / "gn-thinlto" / "backend.log").unlink(missing_ok=True)
    (out / DEFAULT_STATS_LOG).unlink(missing_ok=True)
    return out
