"""Deterministic input mutation for the entry-point fuzzers, and the contract they check (test_fuzz_*.py).

The contract of every user-facing entry point: exit 0, or exit 2 with exactly one line on stderr that starts
with the program's prefix; never a Python traceback. An exception escaping `main` is a crash, named by its
type and the innermost frame inside the project's packages, so that one bug hit by many inputs counts once.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import random
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

PACKAGES = ("gn_thinlto", "goma_ext", "thinlto_base")

LONG_NAME = "n" * 5000  # longer than NAME_MAX and PATH_MAX: ENAMETOOLONG wherever it reaches the file system
# Values swapped in for any JSON value. No absolute path, "." or "..": a step given one as a directory to
# clear (the thin link's stage) must not reach outside the test's directory.
NASTY_VALUES: tuple[Any, ...] = (
    None, True, False, 0, -1, 2**70, 1.5, 1e308, "", "x", LONG_NAME, "a/" * 3000, "\udcff", "\ud800",
    "nul\x00byte", "sp ace$\n", "-o", {}, [], {"k": "v"}, ["x"], [["x"]], [1, 2], {"": None},
)
DEEP = 100_000  # nesting that the json module's recursion limit cannot follow


@dataclass(frozen=True)
class Outcome:
    """What one call of an entry point did: exit code, stderr, and the crash (None if it returned)."""

    code: int | None
    stdout: str
    stderr: str
    crash: str | None = None
    trace: str = ""


def _crash_site(e: BaseException) -> str:
    """TYPE at FILE:LINE of the innermost frame in the project's packages (the frame that let it through)."""
    site = "?"
    for frame in traceback.extract_tb(e.__traceback__):
        parts = Path(frame.filename).parts
        package = next((i for i, part in enumerate(parts) if part in PACKAGES), None)
        if package is not None and "site-packages" not in parts:
            site = f"{'/'.join(parts[package:])}:{frame.lineno}"
    return f"{type(e).__name__} at {site}"


def call(main: Callable[[list[str]], int], argv: Sequence[str]) -> Outcome:
    """Run MAIN(ARGV) in-process with stdout and stderr captured (both with a byte buffer, as on a console)."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", errors="backslashreplace")
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace")
    code: int | None = None
    crash, trace = None, ""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except (Exception, RecursionError) as e:
            crash, trace = _crash_site(e), "".join(traceback.format_exception(e))
    texts = []
    for stream, raw in ((out, out_bytes), (err, err_bytes)):
        stream.flush()
        texts.append(raw.getvalue().decode("utf-8", "replace"))
    return Outcome(code, texts[0], texts[1], crash, trace)


def contract_breach(outcome: Outcome, prefix: str, ok_codes: Sequence[int] = (0, 2)) -> str | None:
    """Why OUTCOME breaks the contract (a crash, another exit code, stderr not one PREFIX line); None if kept."""
    if outcome.crash:
        return outcome.crash
    if outcome.code not in ok_codes:
        return f"exit {outcome.code}"
    lines = outcome.stderr.splitlines()
    if outcome.code == 2 and (len(lines) != 1 or not lines[0].startswith(prefix)):
        return f"exit 2 with stderr {outcome.stderr[:200]!r}"
    if "Traceback" in outcome.stderr:
        return "a traceback on stderr"
    return None


def assert_one_line_error(outcome: Outcome, prefix: str, says: str = "") -> None:
    """OUTCOME is exit 2 with one line on stderr, starting with PREFIX and holding SAYS."""
    assert outcome.crash is None, outcome.trace
    assert outcome.code == 2, outcome
    assert outcome.stderr.count("\n") == 1 and outcome.stderr.startswith(prefix), outcome.stderr
    assert says in outcome.stderr, outcome.stderr


@dataclass
class Findings:
    """Distinct breaches of the contract seen by one fuzzer, each with the first input that showed it."""

    runs: int = 0
    breaches: dict[str, str] = field(default_factory=dict)

    def check(self, outcome: Outcome, prefix: str, what: str, ok_codes: Sequence[int] = (0, 2)) -> None:
        self.runs += 1
        breach = contract_breach(outcome, prefix, ok_codes)
        if breach is None:
            return
        key = breach.split(" with stderr")[0]
        if key not in self.breaches:
            last = (outcome.trace.strip().splitlines() or [breach])[-1]
            self.breaches[key] = f"{what[:160]} -> {last[:300]}"

    def report(self) -> str:
        """One line per distinct breach with the first input that showed it (the assertion message)."""
        return f"{len(self.breaches)} distinct breaches in {self.runs} inputs:\n" + "\n".join(
            f"  {k}: {v}" for k, v in sorted(self.breaches.items()))

    def assert_none(self) -> None:
        if self.breaches:
            pytest.fail(self.report(), pytrace=False)


# -- mutations of decoded JSON ---------------------------------------------------------------------------------

def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path (keys and indexes) of every value in DOC, DOC itself first."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


DEEP_MARK = "\x01deep\x01"


def mutate_doc(rng: random.Random, doc: Any) -> tuple[Any, str]:
    """DOC (copied) with one value swapped, deleted, wrapped or added; and what was done. A value swapped for
    DEEP_MARK is rendered by dump() as a list nested DEEP times."""
    doc = copy.deepcopy(doc)
    paths = list(_paths(doc))
    path = rng.choice(paths[1:] or paths)
    value = _get(doc, path)
    op = rng.choice(("swap", "swap", "swap", "delete", "wrap", "add", "deep"))
    if op == "delete" and path and isinstance(_get(doc, path[:-1]), dict):
        del _get(doc, path[:-1])[path[-1]]
        return doc, f"delete {path}"
    if op == "wrap":
        wrapped = rng.choice(([value], {"v": value}))
        return _set(doc, path, wrapped), f"wrap {path} in {type(wrapped).__name__}"
    if op == "add" and isinstance(value, dict):
        value[rng.choice(("unknown", "", LONG_NAME))] = rng.choice(NASTY_VALUES)
        return doc, f"add a key to {path}"
    if op == "deep":
        return _set(doc, path, DEEP_MARK), f"nest {path} deep"
    nasty = rng.choice(NASTY_VALUES)
    return _set(doc, path, copy.deepcopy(nasty)), f"set {path} to {str(nasty)[:40]!r}"


def dump(doc: Any, deep: int = DEEP) -> bytes:
    """DOC as JSON bytes (lone surrogates as \\u escapes, as json.dumps writes them), DEEP_MARK as a list nested
    DEEP times."""
    text = json.dumps(doc, indent=1)
    return text.replace(json.dumps(DEEP_MARK), "[" * deep + "]" * deep).encode()


# -- mutations of bytes ----------------------------------------------------------------------------------------

BAD_UTF8 = (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe2\x82", b"\x00", b"\xfe\xff")


def mutate_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """DATA with one byte flipped, a non-UTF-8 sequence put in, cut short, or a stretch repeated or removed."""
    if not data:
        return rng.choice(BAD_UTF8), "non-UTF-8 bytes alone"
    at = rng.randrange(len(data))
    op = rng.choice(("flip", "utf8", "utf8", "truncate", "repeat", "cut"))
    if op == "flip":
        return data[:at] + bytes([data[at] ^ rng.randrange(1, 256)]) + data[at + 1:], f"flip byte {at}"
    if op == "utf8":
        bad = rng.choice(BAD_UTF8)
        return data[:at] + bad + data[at:], f"insert {bad!r} at {at}"
    if op == "truncate":
        return data[:at], f"truncate to {at} bytes"
    end = min(len(data), at + rng.randrange(1, 64))
    if op == "repeat":
        return data[:end] + data[at:end] * rng.randrange(2, 50) + data[end:], f"repeat bytes {at}-{end}"
    return data[:at] + data[end:], f"cut bytes {at}-{end}"


def mutations(seed: int, count: int, doc: Any, byte_share: float = 0.3, deep: int = DEEP
              ) -> Iterator[tuple[bytes, str]]:
    """COUNT mutants of DOC (bytes and a description), from a random.Random(SEED): most by value, BYTE_SHARE by
    bytes of its JSON text; DEEP is the nesting of the "deep" mutation."""
    rng = random.Random(seed)
    text = dump(doc, deep)
    for _ in range(count):
        if rng.random() < byte_share:
            yield mutate_bytes(rng, text)
        else:
            mutant, what = mutate_doc(rng, doc)
            yield dump(mutant, deep), what


def bad_paths(work: Path) -> dict[str, str]:
    """Paths that cannot be read as the files a command wants, by kind; created under WORK/bad. Only what a
    command line can carry: no NUL, and no lone surrogate but those of undecodable bytes (\\udc80-\\udcff)."""
    bad = work / "bad"
    bad.mkdir(exist_ok=True)
    (bad / "binary").write_bytes(bytes(range(256)) * 4)
    (bad / "latin1").write_bytes("jobs: [\u00e9]\n".encode("latin-1"))
    (bad / "empty").write_bytes(b"")
    (bad / "garbage.yaml").write_text("{[: - !!x\n")
    (bad / "list.yaml").write_text("- a\n- b\n")
    (bad / "types.yaml").write_text("dtlto: {jobs: many, cache: [1], slots_dir: {}}\nremote: {1: x}\n")
    (bad / "deep.json").write_text("[" * DEEP + "]" * DEEP)
    (bad / "loop").unlink(missing_ok=True)
    (bad / "loop").symlink_to("loop")
    return {
        "missing": str(bad / "missing"), "directory": str(bad), "binary": str(bad / "binary"),
        "latin1": str(bad / "latin1"), "empty": str(bad / "empty"), "garbage-yaml": str(bad / "garbage.yaml"),
        "list-yaml": str(bad / "list.yaml"), "wrong-types-yaml": str(bad / "types.yaml"),
        "deep": str(bad / "deep.json"), "symlink-loop": str(bad / "loop"), "under-a-file": str(bad / "binary/x"),
        "long-name": str(work / LONG_NAME), "long-component-chain": "a/" * 3000, "undecodable-byte": "\udcff.json",
        "unreadable": "/proc/self/mem", "empty-name": "",
    }
