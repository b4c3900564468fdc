"""goma_ext: the goma-side ThinLTO extension: bitcode decoding, backend inputs, remote execution, worker, cluster.

Stands alone: imports nothing from gn_thinlto (an import-linter contract). Stages, each importing only those
before it: bitcode -> inputs -> reapi -> remote -> proxy -> worker -> cluster -> dtlto -> cli.
"""

__version__ = "0.1.0"
