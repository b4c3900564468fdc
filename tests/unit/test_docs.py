"""[shape] The docs: README.md stays a short start page whose links work, and every `gn-thinlto`/`goma-ext` command
line the user guide and the README show parses against the real parsers (the `--help` and `--version` ones run
for real; tests/remote/test_guide_commands.py runs every guide page's commands). The MkDocs site's `build
--strict` is a static check: `./dev test` runs it beside pytest."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import re
import shlex
import subprocess
import sys

import pytest

from gn_thinlto.cli import main as gn_thinlto_cli
from goma_ext import cli as goma_ext_cli
from tests.conftest import REPO
from tests.docs_commands import GUIDE, Command, shell_lines

README = REPO / "README.md"
README_MAX_BYTES = 12 * 1024
COMMAND_PAGES = (README, *sorted(GUIDE.glob("*.md")))
PARSERS = {"gn-thinlto": gn_thinlto_cli.build_parser, "goma-ext": goma_ext_cli.build_parser}
MODULES = {"gn-thinlto": "gn_thinlto.cli", "goma-ext": "goma_ext.cli"}
# A whole-word placeholder (PORT, OUT, N) stands for any value, so it may fill an option typed int or float.
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def documented_commands() -> list[Command]:
    commands = []
    for page in COMMAND_PAGES:
        for line, text in shell_lines(page):
            words = shlex.split(text, comments=True)
            if words and words[0] in PARSERS:
                commands.append(Command(page, line, tuple(words)))
    return commands


COMMANDS = documented_commands()


def runs_for_real(command: Command) -> bool:
    return bool({"--help", "-h", "--version"} & set(command.words))


@functools.cache
def parser(program: str) -> argparse.ArgumentParser:
    return PARSERS[program]()


def test_readme_is_a_short_start_page() -> None:
    size = README.stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/ (at most {README_MAX_BYTES})"


def test_readme_relative_links_point_at_files() -> None:
    broken = []
    for target in LINK.findall(README.read_text()):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        if not (REPO / target.split("#", 1)[0]).exists():
            broken.append(target)
    assert not broken, f"README.md links to missing files: {broken}"


def test_the_readme_keeps_the_test_command_ci_runs() -> None:
    assert "exec ./dev test\n" in (REPO / ".ci" / "run").read_text()
    assert ("## Tests\n\n```sh\n./dev test\n```") in README.read_text()


def test_the_guide_shows_every_command() -> None:
    """Every subcommand of both programs appears in a command line of the README or the user guide."""
    shown = {(c.words[0], c.words[1]) for c in COMMANDS if len(c.words) > 1}
    for program in PARSERS:
        subparsers = next(a for a in parser(program)._actions if isinstance(a, argparse._SubParsersAction))
        missing = sorted(set(subparsers.choices) - {sub for prog, sub in shown if prog == program})
        assert not missing, f"{program} commands no user-guide page shows: {missing}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if not runs_for_real(c)], ids=lambda c: c.where)
def test_documented_command_parses(command: Command) -> None:
    args = ["1" if PLACEHOLDER.match(w) else w for w in command.words[1:]]
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            parser(command.words[0]).parse_args(args)
    except SystemExit as e:
        pytest.fail(f"{command.where}: `{shlex.join(command.words)}` does not parse (exit {e.code}): "
                    f"{stderr.getvalue().strip().splitlines()[-1:]}")


@pytest.mark.parametrize("command", [c for c in COMMANDS if runs_for_real(c)], ids=lambda c: c.where)
def test_documented_help_and_version_run(command: Command) -> None:
    proc = subprocess.run([sys.executable, "-m", MODULES[command.words[0]], *command.words[1:]],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"{command.where}: {proc.stderr}"
    assert proc.stdout.strip(), f"{command.where}: printed nothing"


def test_commands_are_found() -> None:
    """The extractor finds the guide's commands at all (a broken fence parser would pass every test above)."""
    assert len(COMMANDS) >= 40
    assert {c.page.name for c in COMMANDS} >= {"README.md", "local-builds.md", "cache.md", "remote.md", "cluster.md",
                                               "workers.md", "dtlto.md", "inspect.md", "install.md"}
