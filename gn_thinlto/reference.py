"""docs/reference/{cli,config,environment}.md, generated from the argparse parsers and the settings tables.

    python -m gn_thinlto.reference            # rewrite the pages that changed
    python -m gn_thinlto.reference --check    # exit 1 if a committed page differs from the code

Output is deterministic: no absolute path, home directory or CPU count appears in it (a default that depends on the
machine is described in words next to its setting), and argparse's usage lines are wrapped at a fixed width.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import socket
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from gn_thinlto.cli.main import build_parser as gn_thinlto_parser
from gn_thinlto.errors import GnThinltoError
from gn_thinlto.plan import config as gn_config
from gn_thinlto.steps import backend as step_backend
from goma_ext.cli import build_parser as goma_ext_parser
from goma_ext.dtlto import cli as dtlto_cli
from goma_ext.proxy import cli as proxy_cli
from goma_ext.remote import config as remote_config
from goma_ext.remote import names as remote_names
from goma_ext.remote import proxy_protocol
from thinlto_base import store
from thinlto_base.fsutil import write_if_changed
from thinlto_base.settings import REQUIRED, Setting

COMMAND = "python -m gn_thinlto.reference"
PAGE_DIR = Path(__file__).resolve().parent.parent / "docs" / "reference"
USAGE_WIDTH = 100
# The (NAME, DEFAULT, MEANING) tables of the variables that are not config overrides, one per module reading them.
ENVIRONMENT_TABLES: tuple[tuple[tuple[str, str, str], ...], ...] = (
    remote_names.ENVIRONMENT, proxy_protocol.ENVIRONMENT, proxy_cli.ENVIRONMENT, dtlto_cli.ENVIRONMENT,
    step_backend.ENVIRONMENT, store.ENVIRONMENT,
)


def _header(title: str) -> list[str]:
    return [f"<!-- Generated from the code by `{COMMAND}`: edit the code, then run it. -->", "", f"# {title}", ""]


def _cell(text: str) -> str:
    """TEXT as one Markdown table cell: one line, `|` and `<` escaped outside code spans."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):  # even parts are outside backticks
        parts[i] = parts[i].replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")
    return "`".join(parts)


def _code(value: str) -> str:
    return f"`` {value} ``" if "`" in value else f"`{value}`"


def _table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


# --- the command lines ---------------------------------------------------------------------------------------------

def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=USAGE_WIDTH)  # usage is formatted alike by all
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _default(action: argparse.Action) -> str:
    value = action.default
    if value is None or value == argparse.SUPPRESS or value in ([], "") or action.nargs == 0:
        return ""  # flags (store_true and the like) and unset or empty values show nothing
    if isinstance(value, (list, tuple)):
        return _code(",".join(map(str, value)))
    return _code(str(value))


def _invocation(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=USAGE_WIDTH)
    if not action.option_strings:
        return _code(formatter._metavar_formatter(action, action.dest)(1)[0])
    args = "" if action.nargs == 0 else " " + formatter._format_args(action, action.dest.upper())
    return ", ".join(_code(option + args) for option in action.option_strings)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    text = action.help or ""
    if "%" in text:
        text = text % {**vars(action), "prog": parser.prog}
    return text


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(one-line help, parser) of each subcommand, sorted by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name in sorted(action.choices):
                yield helps.get(name, ""), action.choices[name]


def _command(parser: argparse.ArgumentParser, summary: str, level: int) -> list[str]:
    lines = [f"{'#' * level} {parser.prog}", ""]
    if summary:
        lines += [summary[:1].upper() + summary[1:] + ("" if summary.endswith(".") else "."), ""]
    lines += ["```text", _usage(parser), "```", ""]
    description = (parser.description or "").strip()
    if description and description != summary:
        if "%(" in description:
            description = description % {"prog": parser.prog}
        if parser.formatter_class is argparse.RawDescriptionHelpFormatter:
            lines += ["```text", description, "```", ""]
        else:
            lines += [" ".join(description.split()), ""]
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue  # -h and --version are said once at the top; subcommands get sections of their own
        if action.help == argparse.SUPPRESS:
            continue  # internal (a supervisor's option for its children)
        choices = ", ".join(_code(str(c)) for c in action.choices) if action.choices else ""
        rows.append((_invocation(parser, action), _default(action), choices, _cell(_help(parser, action))))
    if rows:
        lines += _table(("Argument", "Default", "Choices", "Meaning"), rows)
    for help_text, sub in _subcommands(parser):
        lines += _command(sub, help_text, min(level + 1, 6))
    return lines


def cli_page() -> str:
    lines = _header("Command line")
    lines += ["Every command takes `-h`/`--help`; `gn-thinlto --version` and `goma-ext --version` print the version.",
              ""]
    for parser in (gn_thinlto_parser(), goma_ext_parser()):
        lines += _command(parser, "", 2)
    return "\n".join(lines)


# --- the config files ----------------------------------------------------------------------------------------------

def _setting_default(setting: Setting) -> str:
    if setting.default_text:
        return _cell(setting.default_text)
    if setting.default is REQUIRED:
        return "required"
    if setting.default is None:
        return "none"
    return _code(json.dumps(setting.default, ensure_ascii=False))  # JSON is YAML's flow style


def _settings_table(settings: Iterable[Setting], with_env: bool) -> list[str]:
    head = ("Key", "Type", "Default", *(("Environment",) if with_env else ()), "Meaning")
    rows = []
    for s in settings:
        env = (_code(s.env) if s.env else "",) if with_env else ()
        rows.append((_code(s.key), _cell(s.kind), _setting_default(s), *env, _cell(s.meaning)))
    return _table(head, rows)


def config_page() -> str:
    lines = _header("Configuration files")
    lines += [
        f"## {gn_config.CONFIG_FILE_NAME}", "",
        f"`gn-thinlto gen` reads `--config FILE`, else `{gn_config.CONFIG_FILE_NAME}` at the GN source root; every "
        "key is optional. Its `remote:` section is below.", "",
        *_settings_table(gn_config.SETTINGS, with_env=False),
        "## remote:", "",
        f"The `remote:` section of `{gn_config.CONFIG_FILE_NAME}` and of the DTLTO config file: run backends over "
        "REAPI. Environment variables override the file, and command-line options (`goma-ext run`, `goma-ext "
        "dtlto`, `gen --remote`) override both; `-` may stand for `_` in keys.", "",
        *_settings_table(remote_config.SETTINGS, with_env=True),
        "## dtlto:", "",
        f"The `dtlto:` section of `goma-ext dtlto`'s config file (`--config`, else `${dtlto_cli.ENV_CONFIG}`, else "
        "`$XDG_CONFIG_HOME/goma-ext/dtlto.yaml` if present), which may also hold a `remote:` section. The option of "
        "the same name (`--slots-dir` for `slots_dir`) wins over each key.", "",
        *_settings_table(dtlto_cli.SETTINGS, with_env=False),
    ]
    return "\n".join(lines)


# --- the environment -----------------------------------------------------------------------------------------------

def environment() -> dict[str, tuple[str, str]]:
    """Every variable gn-thinlto and goma-ext read: name -> (default, meaning)."""
    found: dict[str, tuple[str, str]] = {}
    for s in remote_config.SETTINGS:
        if s.env:
            found[s.env] = (_setting_default(s), f"overrides `remote.{s.key}` ({s.kind}): {s.meaning}")
    for table in ENVIRONMENT_TABLES:
        for name, default, meaning in table:
            if name in found:
                raise ValueError(f"{name}: described twice")
            found[name] = (_cell(default) if default else "", meaning)
    return found


def environment_page() -> str:
    lines = _header("Environment variables")
    lines += ["Variables that override a key of the `remote:` section are also listed in the "
              "[configuration reference](config.md).", ""]
    rows = [(_code(name), default, _cell(meaning)) for name, (default, meaning) in sorted(environment().items())]
    lines += _table(("Variable", "Default", "Meaning"), rows)
    return "\n".join(lines)


# --- the pages -----------------------------------------------------------------------------------------------------

def _machine_values() -> list[str]:
    """Strings that would make a page depend on the machine that generated it."""
    values = [str(Path.home()), os.getcwd(), str(PAGE_DIR.parent.parent), socket.gethostname()]
    try:
        values.append(getpass.getuser())
    except (KeyError, OSError):  # no login name and no passwd entry (a bare container)
        pass
    return sorted({v for v in values if len(v) > 1}, key=len, reverse=True)


def pages() -> dict[str, str]:
    """File name -> content of each reference page; refuses text that depends on this machine (an option whose
    default is computed when the parser is built: compute it when the command runs, and say it in the help)."""
    out = {"cli.md": cli_page(), "config.md": config_page(), "environment.md": environment_page()}
    for name, text in out.items():
        cells = [cell.strip(" `") for line in text.splitlines() if line.startswith("|") for cell in line.split(" | ")]
        for value in _machine_values():
            if value in cells or (value.startswith("/") and re.search(re.escape(value) + r"(?![\w.-])", text)):
                raise GnThinltoError(f"{name} holds {value!r}, which depends on this machine: describe that default")
    return {name: text.rstrip("\n") + "\n" for name, text in out.items()}


def stale(directory: Path = PAGE_DIR) -> list[str]:
    """The pages in DIRECTORY that differ from the code (or are missing)."""
    out = []
    for name, text in pages().items():
        try:
            if (directory / name).read_text(encoding="utf-8") == text:
                continue
        except OSError:
            pass
        out.append(name)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if a page differs from the code")
    parser.add_argument("--dir", type=Path, default=PAGE_DIR, help="where the pages are (default: docs/reference)")
    args = parser.parse_args(argv)
    try:
        if args.check:
            if differ := stale(args.dir):
                print(f"{', '.join(differ)}: out of date with the code; run `{COMMAND}`", file=sys.stderr)
                return 1
            return 0
        for name, text in pages().items():
            if write_if_changed(args.dir / name, text):
                print(f"wrote {args.dir / name}")
    except GnThinltoError as e:
        print(f"{COMMAND}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
