"""The one root exception of goma_ext; the CLI turns it into a one-line message and exit code 2."""


class GomaExtError(Exception):
    """A problem the user can act on: an undecodable file, a bad command line, a remote failure."""
