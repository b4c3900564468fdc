"""Build-time steps ninja runs: thin link, backend, the backend's step server, and their file and ninja helpers.

Each step runs as `python -S path/to/step.py`: they import only the standard library, each other, thinlto_base
and gn_thinlto.errors, and the step server also goma_ext's stdlib-only thin client (import-linter contracts;
tests/unit/test_layout.py checks the loaded modules too). The backend step's parts: step_args (its command line),
backend (the step), server_start (starts step_server.py by path), step_server (the server's command line),
step_serving (the server process), step_protocol (launcher.c's protocol), in_process_launcher (the thin client),
launcher_build (compiles launcher.c for the hook).
"""
