"""Jinja2 environment for the ninja templates shipped in gn_thinlto.templates.

Templates hold the files' structure (which statements, in which order, with which comments); the statements
themselves come from the one ninja writer, gn_thinlto.steps.ninja_syntax, bound as the global `ninja`
(`{{ ninja.build(...) }}`, `{{ ninja.variable(...) }}`), and the values a template writes itself (a rule's
command, a comment) are escaped with its `ninja_value` filter, the writer's escape()."""

from __future__ import annotations

import functools
import re
import shlex
from importlib import resources

import jinja2

from gn_thinlto.plan.links import is_shell_operator
from gn_thinlto.steps import ninja_syntax

TEMPLATE_PACKAGE = "gn_thinlto.templates"


_SHELL_SAFE = re.compile(r"[\w@%+=:,./-]*\Z", re.ASCII)  # what shlex.quote leaves alone (when not empty)


def shell_join(args: list[str] | tuple[str, ...]) -> str:
    """Quote an argument vector for /bin/sh, the way ninja runs commands (one check for the common case of
    nothing to quote: a null-index test's final link names ~1,000 objects)."""
    if all(args) and _SHELL_SAFE.match("".join(args)):
        return " ".join(args)
    return " ".join(map(shlex.quote, args))


def shell_command(args: list[str] | tuple[str, ...]) -> str:
    """Like shell_join, but shell operators (`&&`, `;`, `2>/dev/null`) stay shell syntax: a link command GN
    wrote as shell (`clang++ … && strip …`) keeps its meaning."""
    return " ".join(a if is_shell_operator(a) else shlex.quote(a) for a in args)


def make_environment() -> jinja2.Environment:
    """The environment every ninja file is rendered with: strict undefined, no autoescape, the writer, our filters."""
    loader = jinja2.FileSystemLoader(str(resources.files(TEMPLATE_PACKAGE)))
    env = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["ninja"] = ninja_syntax
    env.filters["ninja_value"] = ninja_syntax.escape
    env.filters["shell_join"] = shell_join
    env.filters["shell_command"] = shell_command
    return env


@functools.cache
def _shared_environment() -> jinja2.Environment:
    """One environment per process, so each template is parsed and compiled once, not once per rendered file.

    Not mutable state in the sense that matters: its configuration is fixed, and what it caches (compiled
    templates, reloaded when a template file changes) does not change what any render returns."""
    return make_environment()


def render(template: str, **context: object) -> str:
    """Render one template by name (e.g. 'header.ninja.j2') with the given plan data."""
    return _shared_environment().get_template(template).render(**context)
