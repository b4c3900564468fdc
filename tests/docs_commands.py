"""The shell commands the user guide and the README show, as the tests read them (no tests here): test_docs parses
the `gn-thinlto`/`goma-ext` ones against the real parsers; tests/remote/test_guide_commands.py runs every page's."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.builds import REPO

SHELL_FENCES = ("sh", "console")
FENCE = re.compile(r"^\s*```(\w*)")
GUIDE = REPO / "docs" / "guide"


@dataclass(frozen=True)
class Command:
    page: Path
    line: int
    words: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def shell_lines(page: Path) -> list[tuple[int, str]]:
    """(line number, command) of each command in the page's ```sh and ```console blocks, continuations joined."""
    found: list[tuple[int, str]] = []
    fence: str | None = None
    pending: tuple[int, str] | None = None
    for number, text in enumerate(page.read_text().splitlines(), 1):
        opened = FENCE.match(text)
        if opened:
            fence = None if fence is not None else opened.group(1)
            continue
        if fence not in SHELL_FENCES:
            continue
        if fence == "console" and pending is None:
            if not text.startswith("$ "):
                continue  # output
            text = text[2:]
        start, so_far = pending if pending else (number, "")
        if text.rstrip().endswith("\\"):
            pending = (start, so_far + text.rstrip()[:-1] + " ")
            continue
        pending = None
        found.append((start, so_far + text))
    return found


def page_commands(page: Path) -> list[tuple[int, str]]:
    """shell_lines of PAGE without blank ones."""
    return [(n, t) for n, t in shell_lines(page) if t.strip()]
