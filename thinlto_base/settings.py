"""Descriptors of config keys: the tables each YAML parser reads (known keys, defaults) and the reference renders.

Environment variables that are not config overrides are described by plain `(NAME, DEFAULT, MEANING)` string
triples, an `ENVIRONMENT` tuple next to where each is read: modules the thin client and the build steps load
under `python -S` cannot afford to import a class for them (`gn_thinlto.reference` collects them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

REQUIRED = object()  # a Setting's default when the key must be given (an entry of a list of mappings)


@dataclass(frozen=True)
class Setting:
    """One key of a YAML config section.

    key: its path inside the section, dotted (`targets.include`); `[]` marks the entries of a list of mappings
    (`link_wrappers[].match`). kind: what the value must be, in words. default: the value the parser takes when
    the key is absent, as YAML would give it (REQUIRED: none, the key must be there). default_text: the default in
    words, for one that depends on the machine ("the number of CPUs"). env: the variable that overrides it."""

    key: str
    kind: str
    default: Any
    meaning: str
    default_text: str = ""
    env: str = ""

    @property
    def top(self) -> str:
        """The section's own key this one sits under (`targets` for `targets.include`)."""
        return self.key.split(".", 1)[0].removesuffix("[]")


def top_keys(settings: Iterable[Setting]) -> set[str]:
    """The keys a section itself may have."""
    return {s.top for s in settings}


def sub_keys(settings: Iterable[Setting], parent: str) -> set[str]:
    """The keys a mapping under PARENT (`targets`, `link_wrappers[]`) may have."""
    return {s.key.removeprefix(parent + ".") for s in settings if s.key.startswith(parent + ".")}


def defaults(settings: Iterable[Setting]) -> dict[str, Any]:
    """Key -> default, for the keys that have one."""
    return {s.key: s.default for s in settings if s.default is not REQUIRED}
