"""gn-thinlto: ThinLTO thin link, backends and final link as edges of the main ninja graph.

Stages, each importing only those before it (import-linter contracts in setup.cfg): gn (read GN's output) ->
plan (pure) -> render (ninja text) -> hook (the gen-time entry point, GN runs it) -> cli. steps/ runs at build
time under `python -S` and imports only the standard library. The version lives in goma_ext.
"""
