"""The one root exception of goma_ext; the CLI turns it into a one-line message and exit code 2.

The file helpers (read, decode and write the files a user names, one line naming the file when that fails) are
thinlto_base.fileerrors', bound here to GomaExtError. Standard library only: the thin client imports it.
"""

from __future__ import annotations

from thinlto_base.fileerrors import SHOWN_PATH_CHARS, FileErrors, OneLineError, one_line, reason, shown

__all__ = ["SHOWN_PATH_CHARS", "DecodeError", "GomaExtError", "check_strings", "decode_json", "file_error",
           "is_file", "make_dir", "one_line", "read_json", "read_text", "read_yaml", "reason", "shown", "write_text"]


class GomaExtError(OneLineError):
    """A problem the user can act on: an undecodable file, a bad command line, a remote failure."""


_files = FileErrors(GomaExtError)
file_error = _files.file_error
is_file = _files.is_file
read_text = _files.read_text
write_text = _files.write_text
make_dir = _files.make_dir
check_strings = _files.check_strings
decode_json = _files.decode_json
read_json = _files.read_json
read_yaml = _files.read_yaml


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
