"""Reading GN's output: project.json as typed records and a parser for GN's subset of ninja syntax.

Pure parsers of text and JSON values (the hook reads the files); imports only the standard library and
gn_thinlto.errors.
"""
