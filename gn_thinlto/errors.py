"""The one root exception of gn_thinlto; the CLI turns it into a one-line message and exit code 2.

The file helpers (read, decode and write the files a user names, one line naming the file when that fails) are
thinlto_base.fileerrors', bound here to GnThinltoError. Standard library only: the build steps use it under
`python -S`.
"""

from __future__ import annotations

from thinlto_base.fileerrors import PATH_MAX, SHOWN_PATH_CHARS, FileErrors, OneLineError, one_line, reason, shown

__all__ = ["PATH_MAX", "SHOWN_PATH_CHARS", "GnThinltoError", "check_strings", "decode_json", "file_error", "is_file",
           "make_dir", "one_line", "read_json", "read_text", "read_yaml", "reason", "shown", "write_text"]


class GnThinltoError(OneLineError):
    """A problem the user can act on: bad input, a failed tool run, an unsupported link."""


_files = FileErrors(GnThinltoError)
file_error = _files.file_error
is_file = _files.is_file
read_text = _files.read_text
write_text = _files.write_text
make_dir = _files.make_dir
check_strings = _files.check_strings
decode_json = _files.decode_json
read_json = _files.read_json
read_yaml = _files.read_yaml
