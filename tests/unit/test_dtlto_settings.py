"""The `goma-ext dtlto` distributor's settings: what it takes from its flags, the YAML and the environment."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from goma_ext.dtlto import cli


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    return parser.parse_args(["dtlto", *argv])


@pytest.mark.parametrize("where", ["env", "yaml"])
def test_objects_always_come_down_whatever_remote_download_says(tmp_path: Path, where: str) -> None:
    """lld links the backends' objects in its own process: `download: minimal` (from $GOMA_EXT_REMOTE_DOWNLOAD or
    the YAML's `remote:`) must not give it stand-ins, through the proxy or not."""
    config = tmp_path / "dtlto.yaml"
    config.write_text("remote:\n  download: minimal\n" if where == "yaml" else "dtlto: {}\n")
    env = {"GOMA_EXT_REMOTE_DOWNLOAD": "minimal"} if where == "env" else {}
    args = _args("--config", str(config), "--remote", "grpc://127.0.0.1:9", "--no-cache", "--slots-dir",
                 str(tmp_path / "slots"), str(tmp_path / "job.json"))
    remote = cli.settings(args, env).remote
    assert remote is not None and remote.endpoint == "grpc://127.0.0.1:9" and remote.download == "all"
