"""Compiles an abbreviation into a straight-line Python decoder function (the reader's hot path).

An abbreviation is a fixed layout once it is defined, so, like construct's compiled parsers, we turn it
into Python source once and reuse the function for every record that uses it: no per-operand dispatch,
the bit position lives in a local variable, and the cursor's general (checked) methods are only called
for the uncommon cases — multi-chunk VBRs, long arrays, blobs, and anything that would run past the
limit, so errors and bounds checks are exactly the cursor's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from goma_ext.bitcode.bitcursor import BitCursor
from goma_ext.bitcode.llvm_codes import CHAR6_ALPHABET, OperandKind

# (cursor, values to append to) -> blob or None
Decoder = Callable[[BitCursor, list[int]], "bytes | None"]
INLINE_ARRAY = 64  # arrays up to this many elements are decoded from one window
CHAR6_TABLE = CHAR6_ALPHABET + bytes(256 - len(CHAR6_ALPHABET))  # bytes.translate table: char6 -> ASCII

_PRELUDE = """\
def decode(cur, values):
    data = cur.data
    limit = cur.limit
    pos = cur.pos
    append = values.append
"""


def _fixed_run(widths: list[int]) -> list[str]:
    total = sum(widths)
    lines = [
        f"new = pos + {total}",
        "if new > limit:",
        f"    cur.pos = pos; cur.read({total})",  # raises the cursor's truncation error
        "w = from_bytes(data[pos >> 3 : (new + 7) >> 3], 'little') >> (pos & 7)",
        "pos = new",
    ]
    for i, width in enumerate(widths):
        lines.append(f"append(w & {(1 << width) - 1})")
        if i + 1 < len(widths):
            lines.append(f"w >>= {width}")
    return lines


def _vbr(width: int, target: str) -> list[str]:
    """One- and two-chunk values inline (module ids, lengths); longer chains go through the cursor."""
    mask, hibit = (1 << width) - 1, 1 << (width - 1)
    return [
        f"w = from_bytes(data[pos >> 3 : (pos + {2 * width + 7}) >> 3], 'little') >> (pos & 7)",
        f"p = w & {mask}",
        f"if p < {hibit} and pos + {width} <= limit:",
        f"    pos += {width}",
        f"elif pos + {2 * width} <= limit and not (w >> {width}) & {hibit}:",
        f"    p = (p & {hibit - 1}) | (((w >> {width}) & {mask}) << {width - 1})",
        f"    pos += {2 * width}",
        "else:",
        f"    cur.pos = pos; p = cur.read_vbr({width}); pos = cur.pos",
        f"{target}",
    ]


def _array(kind: int, width: int) -> list[str]:
    lines = _vbr(6, "count = p")
    if kind == OperandKind.VBR:
        return [*lines, f"cur.pos = pos; values.extend(cur.read_vbr_array({width}, count)); pos = cur.pos"]
    if kind == OperandKind.CHAR6:
        width = 6
    convert = "bytes(e).translate(CHAR6_TABLE)" if kind == OperandKind.CHAR6 else "e"
    return [
        *lines,
        f"new = pos + count * {width}",
        f"if count > {INLINE_ARRAY} or new > limit:",
        f"    cur.pos = pos; e = cur.read_fixed_array({width}, count); pos = cur.pos",
        "else:",
        "    w = from_bytes(data[pos >> 3 : (new + 7) >> 3], 'little') >> (pos & 7)",
        f"    e = [(w >> s) & {(1 << width) - 1} for s in range(0, count * {width}, {width})]",
        "    pos = new",
        f"values.extend({convert})",
    ]


@functools.lru_cache(maxsize=1024)
def compile_abbrev(ops: tuple[tuple[int, int], ...]) -> Decoder:
    """A decoder for an abbreviation given as (kind, value) pairs, already validated by the reader."""
    body: list[str] = []
    run: list[int] = []
    blob = False
    for i, (kind, value) in enumerate(ops):
        if kind == OperandKind.FIXED:
            run.append(value)
            continue
        if run:
            body += _fixed_run(run)
            run = []
        if kind == OperandKind.LITERAL:
            body.append(f"append({value})")
        elif kind == OperandKind.VBR:
            body += _vbr(value, "append(p)")
        elif kind == OperandKind.CHAR6:
            body += [*_fixed_run([6]), "values[-1] = CHAR6[values[-1]]"]
        elif kind == OperandKind.ARRAY:
            body += _array(*ops[i + 1])
            break
        else:  # BLOB, always last
            blob = True
            body += [
                *_vbr(6, "length = p"),
                "cur.pos = pos; cur.align32(); blob = cur.read_bytes(length); cur.align32(); pos = cur.pos",
            ]
    if run:
        body += _fixed_run(run)
    body += ["cur.pos = pos", "return blob" if blob else "return None"]
    source = _PRELUDE + "".join(f"    {line}\n" for line in body)
    namespace = {"from_bytes": int.from_bytes, "CHAR6": CHAR6_ALPHABET, "CHAR6_TABLE": CHAR6_TABLE}
    exec(compile(source, f"<abbrev {ops}>", "exec"), namespace)  # the source is built only from ints above
    return namespace["decode"]  # type: ignore[return-value]
