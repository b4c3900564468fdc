"""goma_ext: ThinLTO index decoding, backend input processing and remote execution."""

from gn_thinlto import __version__

__all__ = ["__version__"]
