"""The one root exception of gn_thinlto; the CLI turns it into a one-line message and exit code 2."""


class GnThinltoError(Exception):
    """A problem the user can act on: bad input, a failed tool run, an unsupported link."""
