"""The one launcher the step server runs in its own process: goma-ext's thin client, known by its script's path.

This is the only module of gn_thinlto.steps that imports goma_ext, and goma_ext.remote.thin_client is the only
module it imports from there (import-linter contracts `steps-stdlib-only` and `thin-client-stdlib-only`): the
thin client loads only the standard library, so the server still runs under `python -S`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from goma_ext.remote import thin_client

InProcess = Callable[[list[str], dict[str, str]], "tuple[int, bytes, bytes] | None"]
THIN_CLIENT_SCRIPT = os.path.realpath(thin_client.__file__)
CODE_DIR = os.path.dirname(THIN_CLIENT_SCRIPT)  # the thin client's modules: the server leaves when they change


def entry(launcher: Sequence[str]) -> InProcess | None:
    """The thin client's `answer` when LAUNCHER is this install's thin client run by this interpreter under -S
    (`python -S …/thin_client.py OPTIONS --`); else None (the step launcher runs LAUNCHER's commands itself)."""
    if len(launcher) < 3 or launcher[0] != sys.executable or launcher[1] != "-S":
        return None
    return thin_client.answer if os.path.realpath(launcher[2]) == THIN_CLIENT_SCRIPT else None
