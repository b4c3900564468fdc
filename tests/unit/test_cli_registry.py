"""Both command lines name each subcommand's module in a table (COMMANDS) and import only the chosen one: the
table and the modules agree, the full parser (--help, the reference pages) still has every command, and a
command's start-up does not import the others' dependencies."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable, Mapping

import pytest

from gn_thinlto.cli import main as gn_thinlto_cli
from goma_ext import cli as goma_ext_cli

CLIS: dict[str, tuple[Mapping[str, str], Callable[..., argparse.ArgumentParser]]] = {
    "gn-thinlto": (gn_thinlto_cli.COMMANDS, gn_thinlto_cli.build_parser),
    "goma-ext": (goma_ext_cli.COMMANDS, goma_ext_cli.build_parser),
}


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


@pytest.mark.parametrize("prog", sorted(CLIS))
def test_the_table_names_each_commands_module(prog: str) -> None:
    commands, build_parser = CLIS[prog]
    assert _commands(build_parser()) == list(commands)
    for name in commands:
        assert _commands(build_parser([name, "--help"])) == [name], name
    assert _commands(build_parser(["no-such-command"])) == list(commands)  # its error lists them all


def test_a_command_imports_only_its_own_module() -> None:
    code = ("import sys; from goma_ext import cli; cli.build_parser(['report']); "
            "print(sorted(m for m in ('grpc', 'goma_ext.cluster.cli', 'goma_ext.worker.cli') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
