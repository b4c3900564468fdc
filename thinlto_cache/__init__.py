"""The ThinLTO backend cache: jobs and their keys, the verified on-disk store, its policy and pruning.

Below both gn_thinlto (its backend build step) and goma_ext (the DTLTO distributor): it imports neither, and
only the standard library, since the backend step loads it under `python -S` once per backend edge.
"""
