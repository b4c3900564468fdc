"""JSON text of plan records, byte for byte what json.dumps(asdict(record), indent=N, sort_keys=True) writes.

The hook writes one thin-link manifest per link, with several strings per bitcode object; asdict's deep copy
and json's pure-Python indenting encoder (the C encoder only writes unindented JSON) took about half of the
hook's time on a 100-link x 1,000-object grid. Same bytes, so existing build directories see no change.
"""

from __future__ import annotations

import dataclasses
import json
from json.encoder import encode_basestring_ascii
from typing import Any


def dumps(record: Any, indent: int) -> str:
    """RECORD (dataclasses, lists, tuples, str-keyed dicts, JSON scalars) as indented JSON with sorted keys."""
    out: list[str] = []
    _Writer(out, " " * indent).value(record, "\n")
    return "".join(out)


class _Writer:
    """One dumps() call: the output parts and each record class's field names, sorted (as sort_keys does)."""

    def __init__(self, out: list[str], step: str) -> None:
        self._out = out
        self._step = step
        self._fields: dict[type, list[str]] = {}

    def value(self, value: Any, newline: str) -> None:
        """Append VALUE; NEWLINE is a newline and the indentation of VALUE's own line."""
        if isinstance(value, str):
            self._out.append(encode_basestring_ascii(value))
        elif isinstance(value, (list, tuple)):
            self._array(value, newline)
        elif isinstance(value, dict):
            self._object(sorted(value.items()), newline)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            names = self._fields.get(type(value))
            if names is None:
                names = self._fields[type(value)] = sorted(f.name for f in dataclasses.fields(value))
            self._object([(n, getattr(value, n)) for n in names], newline)
        else:  # numbers, booleans, None: json's own spelling (and its TypeError for anything else)
            self._out.append(json.dumps(value))

    def _array(self, items: list[Any] | tuple[Any, ...], newline: str) -> None:
        if not items:
            self._out.append("[]")
            return
        inner = newline + self._step
        try:  # lists of strings are most of a manifest: encode them without a Python call per item
            self._out.append("[" + inner + ("," + inner).join(map(encode_basestring_ascii, items)) + newline + "]")
            return
        except TypeError:
            pass
        self._out.append("[")
        for n, item in enumerate(items):
            self._out.append(inner if n == 0 else "," + inner)
            self.value(item, inner)
        self._out.append(newline + "]")

    def _object(self, items: list[tuple[Any, Any]], newline: str) -> None:
        if not items:
            self._out.append("{}")
            return
        inner = newline + self._step
        try:  # a record of strings (IndexFiles), in one join
            self._out.append("{" + inner + ("," + inner).join(
                encode_basestring_ascii(k) + ": " + encode_basestring_ascii(v) for k, v in items) + newline + "}")
            return
        except TypeError:
            pass
        self._out.append("{")
        for n, (key, item) in enumerate(items):
            if not isinstance(key, str):
                raise TypeError(f"records_json: object keys must be str, not {type(key).__name__}")
            self._out.append((inner if n == 0 else "," + inner) + encode_basestring_ascii(key) + ": ")
            self.value(item, inner)
        self._out.append(newline + "}")
