"""The one ninja writer: statements as text, escaping built in (the shape of ninja's misc/ninja_syntax.py, our code).

Every function returns its statement without the final newline, so a template writes `{{ ninja.build(...) }}` on
a line of its own and Python joins statements with "\\n". Nothing here touches a file.

Ninja has two text contexts, escaped for the caller:
- paths (build outputs and inputs, include, subninja): `$`, space and `:` are special (escape_path);
- variable values: only `$` (escape). A value that must stay ninja syntax, because it refers to variables
  (`$argv`) or is escaped already, is passed as raw(text) and written as it is.
A newline cannot be escaped in either: it is refused with a one-line error.

Standard library and gn_thinlto.errors only: the thin-link step writes its dyndep file with it under `python -S`.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TypeAlias

from gn_thinlto.errors import GnThinltoError, shown

INDENT = "  "


class Raw(str):
    """Ninja text to write as it is (a value referring to ninja variables, or escaped already)."""

    __slots__ = ()


def raw(text: str) -> Raw:
    """TEXT marked as ninja syntax: variable(), build() and rule() write it unescaped (newlines still refused)."""
    return Raw(text)


def escape_path(path: str) -> str:
    """PATH for a build, include or subninja line: `$`, space and `:` escaped."""
    if "\n" in path:
        raise GnThinltoError(f"a path with a newline cannot be written to a ninja file: {shown(repr(path))}")
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def escape(value: str) -> str:
    """VALUE for the right side of a variable (a command line, a description): only `$` is special."""
    if "\n" in value:
        raise GnThinltoError(f"a value with a newline cannot be written to a ninja file: {shown(repr(value))}")
    return value.replace("$", "$$")


def _plain(text: str) -> bool:
    """Whether TEXT, as a path, needs no escaping: four scans in C, far faster than a regular expression over
    the concatenated paths of a whole link or batch."""
    return not ("$" in text or " " in text or ":" in text or "\n" in text)


def paths(items: str | Iterable[str]) -> str:
    """ITEMS (or one path) as a ninja path list: escaped, space-separated. One check over their concatenation
    finds the common case of nothing to escape (a final link names thousands of objects)."""
    items = [items] if isinstance(items, str) else list(items)
    if _plain("".join(items)):
        return " ".join(items)
    return " ".join(map(escape_path, items))


def value(text: str | int) -> str:
    """TEXT as a variable's value: escaped, unless it is raw(); an int (or bool: 1 or 0) as its decimal digits."""
    if isinstance(text, Raw):
        if "\n" in text:
            raise GnThinltoError(f"a value with a newline cannot be written to a ninja file: {shown(repr(text))}")
        return str(text)
    if isinstance(text, int):
        return str(int(text))
    return escape(text)


def variable(key: str, text: str | int, indent: int = 0) -> str:
    """`key = value`, indented INDENT levels (1 for a binding of a rule or build statement)."""
    return f"{INDENT * indent}{key} = {value(text)}"


Variables: TypeAlias = Mapping[str, str | int | None] | Iterable[tuple[str, str | int | None]]


def _bindings(variables: Variables) -> list[str]:
    """VARIABLES (in order) as indented lines; a None value writes no line."""
    pairs = variables.items() if isinstance(variables, Mapping) else variables
    return [variable(k, v, 1) for k, v in pairs if v is not None]


def build(
    outputs: str | Sequence[str],
    rule: str,
    inputs: str | Sequence[str] = (),
    implicit: str | Sequence[str] = (),
    order_only: str | Sequence[str] = (),
    implicit_outputs: str | Sequence[str] = (),
    variables: Variables = (),
) -> str:
    """A build statement: `build OUT [| IMPLICIT_OUT]: RULE [IN] [| IMPLICIT] [|| ORDER_ONLY]`, then its bindings.

    An empty section writes nothing (no stray `|`)."""
    line = "build " + paths(outputs)
    if implicit_outputs:
        line += " | " + paths(implicit_outputs)
    line += ": " + rule
    if inputs:
        line += " " + paths(inputs)
    if implicit:
        line += " | " + paths(implicit)
    if order_only:
        line += " || " + paths(order_only)
    return "\n".join([line, *_bindings(variables)])


def build_lines(
    rule: str,
    outputs: Sequence[str],
    inputs: Sequence[str] = (),
    implicit: Sequence[str] = (),
    implicit_outputs: Sequence[str] = (),
    variables: Mapping[str, Sequence[str]] | None = None,
    raw_keys: Collection[str] = (),
) -> str:
    """Many build statements of RULE, one per output: the text of build() for each, joined by newlines, at a
    fraction of its cost (a Chromium-size link has tens of thousands of backend edges).

    Statement i has one path in each section: outputs[i], inputs[i], implicit[i] and implicit_outputs[i] (a
    sequence is empty for none, else it has an entry per output; "" leaves out that statement's section). It
    binds each key of VARIABLES to the key's i-th value: literal text, but ninja text (as raw()) for RAW_KEYS.
    The batch is checked at once, and escaped only when some path or value needs it; the text is then joined
    in one pass, the constant parts of a statement repeated between the columns."""
    n = len(outputs)
    columns = [c if isinstance(c, list) else list(c) for c in (outputs, implicit_outputs, inputs, implicit)]
    if any(c and len(c) != n for c in columns):
        raise ValueError("build_lines: each path sequence has one entry per output, or none")
    if not all(map(_plain, map("".join, columns))):
        columns = [[escape_path(p) for p in c] for c in columns]
    out, implicit_out, in_, implicit_in = columns
    # zip() takes one piece of each statement from each in turn: a column, or text that every statement repeats.
    pieces: list[Iterable[str]] = [itertools.chain(["build "], itertools.repeat("\nbuild ")), out]
    text = ""  # constant text before the next column

    def add(separator: str, column: list[str], section: bool = True) -> None:
        nonlocal text
        if section and not all(column):  # some statements leave this section out (or all do)
            if not any(column):
                return
            column = [separator + p if p else "" for p in column]
        else:
            text += separator
        pieces.extend((itertools.repeat(text), column) if text else (column,))
        text = ""

    if implicit_out:  # an empty sequence: no such section
        add(" | ", implicit_out)
    text += ": " + rule
    if in_:
        add(" ", in_)
    if implicit_in:
        add(" | ", implicit_in)
    for key, values in (variables or {}).items():
        values = values if isinstance(values, list) else list(values)
        if len(values) != n:
            raise ValueError(f"build_lines: {key} has one value per output")
        joined = "".join(values)
        if "\n" in joined or ("$" in joined and key not in raw_keys):
            values = [value(raw(v) if key in raw_keys else v) for v in values]
        add(f"\n{INDENT}{key} = ", values, section=False)  # an empty value is still bound
    if text:
        pieces.append(itertools.repeat(text))
    return "".join(itertools.chain.from_iterable(zip(*pieces)))



def rule(name: str, variables: Variables) -> str:
    """`rule NAME` and its bindings, in order (a command that refers to $in or $out is raw())."""
    return "\n".join([f"rule {name}", *_bindings(variables)])


def include(path: str) -> str:
    """`include PATH`: PATH is read in this file's scope."""
    return "include " + escape_path(path)


def subninja(path: str) -> str:
    """`subninja PATH`: PATH is read in a scope of its own (it sees this file's variables, not the reverse)."""
    return "subninja " + escape_path(path)


def comment(text: str) -> str:
    """`# TEXT` (ninja reads nothing of a comment, so nothing is escaped; a newline is refused)."""
    if "\n" in text:
        raise GnThinltoError(f"a comment with a newline cannot be written to a ninja file: {shown(repr(text))}")
    return "# " + text
