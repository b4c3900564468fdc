"""The standard-library base both packages sit on (it was thinlto_cache, when the cache was all it held):
- the ThinLTO backend cache: jobs and their keys (keys), the verified on-disk store (store), its policy and
  pruning (policy, prune), who may write it (trust), two-step and split-DWARF jobs, notices;
- safe file access (safefs, fsutil), one-line errors and the file and YAML helpers (fileerrors);
- the one ELF reader (elf, with its layouts in elf_layout);
- setting descriptors the configuration parsers and the generated reference share (settings).

Below both gn_thinlto (its build steps) and goma_ext (the thin client, the DTLTO distributor): it imports
neither, and only the standard library, since the build steps load it under `python -S` once per edge.
"""
