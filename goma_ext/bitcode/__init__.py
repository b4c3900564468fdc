"""LLVM bitcode: bit cursor, bitstream reader, abbreviation compiler, format tables, ThinLTO index and summary
decoding, object inspection, and `goma-ext index`. Imports only goma_ext.errors, construct and the stdlib.
"""
