"""The dyndep file the thin-link step writes for the final link: the natives of the bitcode the link used.

Written at build time, once per thin link, so it is formatted here rather than from a Jinja2 template:
importing jinja2 alone costs the step 50 ms, and the format is two lines (ninja's `dyndep` file: a version
line and one build statement adding implicit inputs).
"""

from __future__ import annotations

from collections.abc import Sequence

from gn_thinlto.steps.ninja_escape import ninja_path


def dyndep_text(output: str, natives: Sequence[str], rsp_digest: str) -> str:
    """OUTPUT's dyndep statement; RSP_DIGEST (the final link's response file) makes the file change with it."""
    inputs = "".join(f" {ninja_path(n)}" for n in natives)
    return (
        "ninja_dyndep_version = 1\n"
        "# Written by the gn-thinlto thin-link step: the natives of the bitcode objects this link used.\n"
        f"# final link response file: sha256 {rsp_digest}\n"
        f"build {ninja_path(output)}: dyndep |{inputs}\n"
    )
