"""The one root exception of goma_ext; the CLI turns it into a one-line message and exit code 2.

Also the one place that turns a failure to read an input file (the OS's error, text that is not UTF-8, JSON or
YAML too deeply nested to decode) into that exception, naming the file. (gn_thinlto.errors does the same for
gn_thinlto, whose build steps may not import goma_ext.) Standard library only: the thin client imports it.
"""

from __future__ import annotations

import os

SHOWN_PATH_CHARS = 200  # a path longer than this is shown shortened in messages


class GomaExtError(Exception):
    """A problem the user can act on: an undecodable file, a bad command line, a remote failure."""

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
    """Why reading or decoding a file failed, in words (the caller names the file)."""
    if isinstance(e, OSError):
        return e.strerror or str(e)
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})"
    if isinstance(e, RecursionError):
        return "nested too deeply to decode"
    return str(e)


def file_error(path: str | os.PathLike[str], e: BaseException, what: str = "") -> GomaExtError:
    """The error for file PATH (WHAT: the flag or role that named it, e.g. `--config`) failing with E."""
    return GomaExtError(f"{what + ' ' if what else ''}{shown(path)}: {reason(e)}")


def is_file(path: str | os.PathLike[str], what: str = "") -> bool:
    """Whether PATH is a regular file; a path the OS cannot even look up (too long, a loop) is an error."""
    import stat

    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except (OSError, ValueError) as e:  # ValueError: a NUL byte or a lone surrogate in the name
        raise file_error(path, e, what) from e
    return stat.S_ISREG(st.st_mode)


def read_text(path: str | os.PathLike[str], what: str = "") -> str:
    """The UTF-8 text of file PATH; GomaExtError naming it (and WHAT) when it cannot be read or decoded."""
    try:
        with open(path, "rb") as f:
            return f.read().decode()
    except (OSError, UnicodeError) as e:
        raise file_error(path, e, what) from e


class DecodeError(GomaExtError):
    """A file that is not valid LLVM bitstream, bitcode or ThinLTO index data.

    Carries where decoding stopped: the bit offset from the start of the file and the path of
    nested blocks (outermost first), so one line tells the user which byte of which file is bad.
    """

    def __init__(self, message: str, *, bit_offset: int, block_path: tuple[str, ...] = (), file: str = "") -> None:
        self.message = " ".join(message.split())  # always one line
        self.bit_offset = bit_offset
        self.block_path = block_path
        self.file = file
        super().__init__(str(self))

    @property
    def byte_offset(self) -> int:
        return self.bit_offset // 8

    def __str__(self) -> str:
        where = f"byte {self.bit_offset // 8}"
        if self.bit_offset % 8:
            where += f" (bit {self.bit_offset % 8})"
        block = "/".join(self.block_path) if self.block_path else "top level"
        prefix = f"{self.file}: " if self.file else ""
        return one_line(f"{prefix}{where}, in {block}: {self.message}")

    def with_context(self, *, block_path: tuple[str, ...] | None = None, file: str | None = None) -> DecodeError:
        """A copy with the block path or file name filled in (the innermost reader that knows them sets them)."""
        return DecodeError(
            self.message,
            bit_offset=self.bit_offset,
            block_path=self.block_path if block_path is None else block_path,
            file=self.file if file is None else file,
        )
