"""The dyndep file the thin-link step writes for the final link: the natives of the bitcode the link used.

Written at build time, once per thin link, so it comes from the ninja writer (ninja_syntax, standard library
only) rather than a Jinja2 template: importing jinja2 alone costs the step 50 ms, and the format is two lines
(ninja's `dyndep` file: a version line and one build statement adding implicit inputs).
"""

from __future__ import annotations

from collections.abc import Sequence

from gn_thinlto.steps.ninja_syntax import build, comment, variable


def dyndep_text(output: str, natives: Sequence[str], rsp_digest: str) -> str:
    """OUTPUT's dyndep statement; RSP_DIGEST (the final link's response file) makes the file change with it."""
    return "\n".join([
        variable("ninja_dyndep_version", 1),
        comment("Written by the gn-thinlto thin-link step: the natives of the bitcode objects this link used."),
        comment(f"final link response file: sha256 {rsp_digest}"),
        build(output, "dyndep", implicit=natives),
        "",
    ])
