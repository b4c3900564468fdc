"""One-line errors, and reading and writing the files a user names, for both packages: gn_thinlto.errors and
goma_ext.errors bind these helpers to their own root exception (FileErrors(GnThinltoError), …), so each package's
callers catch their own class while the wording and the checks are written once.

Turns a failure to read an input file (the OS's error, text that is not UTF-8, JSON too deeply nested to decode, a
string no file can hold) into that exception, naming the file. Standard library only: the build steps and the
thin client use it under `python -S`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

PATH_MAX = 4096  # Linux: no longer path reaches the file system
SHOWN_PATH_CHARS = 200  # a path longer than this is shown shortened in messages (they stay one short line)


class OneLineError(Exception):
    """An error whose message is one line even when a file name in it holds a newline."""

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


def strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
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


E = TypeVar("E", bound=Exception)


class FileErrors(Generic[E]):
    """The file helpers, raising ERROR (a package's root exception) with one line that names the file."""

    def __init__(self, error: type[E]) -> None:
        self.error = error

    def file_error(self, path: str | os.PathLike[str], e: BaseException, what: str = "") -> E:
        """The error for file PATH (WHAT: the flag or role that named it, e.g. `--config`) failing with E."""
        return self.error(f"{what + ' ' if what else ''}{shown(path)}: {reason(e)}")

    def is_file(self, path: str | os.PathLike[str], what: str = "") -> bool:
        """Whether PATH is a regular file; a path the OS cannot even look up (too long, a loop) is an error."""
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except (OSError, ValueError) as e:  # ValueError: a NUL byte or a lone surrogate in the name
            raise self.file_error(path, e, what) from e
        return stat.S_ISREG(st.st_mode)

    def read_text(self, path: str | os.PathLike[str], what: str = "") -> str:
        """The UTF-8 text of file PATH; the error naming it (and WHAT) when it cannot be read or decoded."""
        try:
            with open(path, "rb") as f:
                return f.read().decode()
        except (OSError, UnicodeError) as e:
            raise self.file_error(path, e, what) from e

    def write_text(self, path: str | os.PathLike[str], text: str | Callable[[], str], what: str = "") -> None:
        """Write TEXT to file PATH (a report the user asked for); the error naming it when that fails. TEXT may be
        the function that makes it: PATH is opened first, so that a path it cannot write fails before that work,
        and only emptied once the text is made (a failure meanwhile leaves an older report as it was)."""
        existed = os.path.lexists(path)
        try:
            f = open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666), "w", encoding="utf-8")
        except OSError as e:
            raise self.file_error(path, e, what) from e
        try:
            content = text() if callable(text) else text
        except BaseException:
            f.close()  # nothing written: nothing to flush
            if not existed:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            raise
        try:
            with f:  # closing flushes, and can fail too
                f.truncate(0)
                f.write(content)
        except OSError as e:
            raise self.file_error(path, e, what) from e

    def make_dir(self, path: str | os.PathLike[str], what: str = "") -> None:
        """Create directory PATH and its parents if missing; the error naming it when that fails."""
        try:
            if len(os.fsencode(path)) >= PATH_MAX:  # os.makedirs would recurse once per missing component first
                raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), os.fspath(path))
            os.makedirs(path, exist_ok=True)
        except (OSError, ValueError) as e:
            raise self.file_error(path, e, what) from e

    def check_strings(self, value: Any, where: str) -> None:
        """Every string in VALUE can be written as UTF-8 (a JSON \\udcff escape decodes to a lone surrogate, which
        cannot), else the error naming where (WHERE, then the keys and indexes down to it)."""
        for text, at in strings(value, where):
            try:
                text.encode()
            except UnicodeEncodeError as e:
                raise self.error(f"{shown(at)}: {text[e.start]!a} {reason(e)}") from e

    def decode_json(self, text: str, path: str | os.PathLike[str], what: str = "") -> Any:
        """TEXT (the content of file PATH) decoded as JSON, with every string fit for a file (check_strings)."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise self.file_error(path, e, what) from e
        if "\\ud" in text or "\\uD" in text:  # only an escape makes a surrogate: most files skip the walk
            self.check_strings(data, f"{what + ' ' if what else ''}{shown(path)}")
        return data

    def read_json(self, path: str | os.PathLike[str], what: str = "") -> Any:
        """The decoded JSON of file PATH (see decode_json)."""
        return self.decode_json(self.read_text(path, what), path, what)

    def read_yaml(self, path: str | os.PathLike[str], what: str = "") -> Any:
        """The decoded YAML of file PATH (yaml.safe_load), with every string fit for a file: the one YAML loader of
        both packages' configuration files (gn_thinlto.yaml, its remote: section, goma-ext's dtlto.yaml)."""
        import yaml  # here, not at the top: the build steps and the thin client import this module under python -S

        text = self.read_text(path, what)
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            raise self.error(f"{what + ' ' if what else ''}{shown(path)}: not valid YAML ({problem}{where})") from e
        except RecursionError as e:
            raise self.file_error(path, e, what) from e
        self.check_strings(data, f"{what + ' ' if what else ''}{shown(path)}")
        return data
