"""The one root exception of gn_thinlto; the CLI turns it into a one-line message and exit code 2.

Also the one place that turns a failure to read an input file (the OS's error, text that is not UTF-8, JSON
too deeply nested to decode, a string no file can hold) into that exception, naming the file. Standard
library only: the build steps use it under `python -S`. (goma_ext.errors does the same for goma_ext, which
the build steps may not import.)
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator
from typing import Any

PATH_MAX = 4096  # Linux: no longer path reaches the file system
SHOWN_PATH_CHARS = 200  # a path longer than this is shown shortened in messages (they stay one short line)


class GnThinltoError(Exception):
    """A problem the user can act on: bad input, a failed tool run, an unsupported link."""

    def __str__(self) -> str:
        return one_line(super().__str__())


def one_line(text: str) -> str:
    """TEXT with its line breaks written as \\n: a message is one line even when a file name holds a newline."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def shown(path: str | os.PathLike[str]) -> str:
    """PATH for a message: a very long one (a mistaken argument) cut in the middle."""
    text = os.fspath(path)
    if len(text) <= SHOWN_PATH_CHARS:
        return text
    half = SHOWN_PATH_CHARS // 2
    return f"{text[:half]}…({len(text)} characters)…{text[-half:]}"


def reason(e: BaseException) -> str:
    """Why reading or decoding a file failed, in words (no file name: the caller names the file)."""
    if isinstance(e, OSError):
        return e.strerror or str(e)
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})"
    if isinstance(e, UnicodeEncodeError):
        return "holds a lone surrogate, which no file name or UTF-8 text can hold"
    if isinstance(e, json.JSONDecodeError):
        return f"not JSON ({e.msg} at line {e.lineno} column {e.colno})"
    if isinstance(e, RecursionError):
        return "nested too deeply to decode"
    return str(e)


def file_error(path: str | os.PathLike[str], e: BaseException, what: str = "") -> GnThinltoError:
    """The error for file PATH (WHAT: the flag or role that named it, e.g. `--config`) failing with E."""
    return GnThinltoError(f"{what + ' ' if what else ''}{shown(path)}: {reason(e)}")


def is_file(path: str | os.PathLike[str], what: str = "") -> bool:
    """Whether PATH is a regular file; a path the OS cannot even look up (too long, a loop) is an error."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except (OSError, ValueError) as e:  # ValueError: a NUL byte or a lone surrogate in the name
        raise file_error(path, e, what) from e
    return stat.S_ISREG(st.st_mode)


def read_text(path: str | os.PathLike[str], what: str = "") -> str:
    """The UTF-8 text of file PATH; GnThinltoError naming it (and WHAT) when it cannot be read or decoded."""
    try:
        with open(path, "rb") as f:
            return f.read().decode()
    except (OSError, UnicodeError) as e:
        raise file_error(path, e, what) from e


def decode_json(text: str, path: str | os.PathLike[str], what: str = "") -> Any:
    """TEXT (the content of file PATH) decoded as JSON, with every string fit for a file (check_strings)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise file_error(path, e, what) from e
    if "\\ud" in text or "\\uD" in text:  # only an escape makes a surrogate: most files skip the walk
        check_strings(data, f"{what + ' ' if what else ''}{shown(path)}")
    return data


def write_text(path: str | os.PathLike[str], text: str, what: str = "") -> None:
    """Write TEXT to file PATH (a report the user asked for); GnThinltoError naming it when that fails."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise file_error(path, e, what) from e


def make_dir(path: str | os.PathLike[str], what: str = "") -> None:
    """Create directory PATH and its parents if missing; GnThinltoError naming it when that fails."""
    try:
        if len(os.fsencode(path)) >= PATH_MAX:  # os.makedirs would recurse once per missing component first
            raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), os.fspath(path))
        os.makedirs(path, exist_ok=True)
    except (OSError, ValueError) as e:
        raise file_error(path, e, what) from e


def read_json(path: str | os.PathLike[str], what: str = "") -> Any:
    """The decoded JSON of file PATH (see decode_json)."""
    return decode_json(read_text(path, what), path, what)


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """(string, where it is) for every string of decoded JSON or YAML VALUE, keys too (YAML aliases can make a
    list that holds itself: each list and mapping is walked once)."""
    stack, seen = [(value, where)], set()
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            yield item, at
        elif isinstance(item, (dict, list)) and id(item) not in seen:
            seen.add(id(item))
            if isinstance(item, dict):
                for k, v in item.items():
                    stack.append((k, f"{at}: key"))
                    stack.append((v, f"{at}.{k}" if isinstance(k, str) else at))
            else:
                stack.extend((v, f"{at}[{n}]") for n, v in enumerate(item))


def check_strings(value: Any, where: str) -> None:
    """Every string in VALUE can be written as UTF-8 (a JSON \\udcff escape decodes to a lone surrogate, which
    cannot), else GnThinltoError naming where (WHERE, then the keys and indexes down to it)."""
    for text, at in _strings(value, where):
        try:
            text.encode()
        except UnicodeEncodeError as e:
            raise GnThinltoError(f"{shown(at)}: {text[e.start]!a} {reason(e)}") from e
