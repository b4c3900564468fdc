"""The thin client's fast path: the options it takes itself, and that it loads nothing but the standard library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.proxy_client import endpoint_key
from goma_ext.remote.thin_client import parse
from tests.conftest import REPO


def test_parse_takes_known_options_and_the_command() -> None:
    assert parse(["--remote", "grpc://h:1", "--exec-root=..", "--", "clang", "-c"]) == (
        {"endpoint": "grpc://h:1", "exec_root": ".."}, ["clang", "-c"])


@pytest.mark.parametrize("argv", [
    ["--config", "x.yaml", "--", "clang"],  # YAML settings: the full client
    ["--no-proxy", "--", "clang"],
    ["--remote", "grpc://h:1"],  # no command
    ["--remote", "grpc://h:1", "--"],
    ["--remote"],
    ["-h"],
])
def test_parse_leaves_everything_else_to_the_full_client(argv: list[str]) -> None:
    assert parse(argv) is None


def test_the_thin_client_and_the_full_client_name_the_same_proxy() -> None:
    cfg = RemoteConfig(endpoint="grpcs://h:9", instance="i", ca_file=Path("./certs/../ca.pem"))
    thin = wire.endpoint_key("/b/out", "grpcs://h:9", "i", "./certs/../ca.pem", None, "")
    assert endpoint_key(cfg, Path("/b/out")) == thin
    assert wire.endpoint_key("/b/out", "grpcs://h:9", "", "ca.pem", None, "") != thin


def test_fast_path_imports_only_the_standard_library() -> None:
    """Under `python -S` (as ninja runs it): after a fast-path attempt, no site-packages module is loaded, nor
    the heavier standard modules the full client needs (argparse, dataclasses, pathlib, subprocess, hashlib)."""
    code = (
        "import os, sys; sys.path.insert(0, sys.argv[1]); "
        "from goma_ext.remote import thin_client; "
        "os.environ['GOMA_EXT_PROXY_DIR'] = '/nonexistent-gxp'; "
        "print(thin_client.fast(['--remote', 'grpc://127.0.0.1:1', '--', 'clang-19', '-c', 'x.o'], os.environ)); "
        "heavy = {'argparse', 'dataclasses', 'pathlib', 'subprocess', 'hashlib', 'typing', 'grpc', 'google', "
        "'yaml', 'construct', 'jinja2'}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code, str(REPO)], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["None", "[]"], out
