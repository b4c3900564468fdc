"""gn-thinlto: ThinLTO thin link, backends and final link as edges of the main ninja graph."""

__version__ = "0.1.0"
