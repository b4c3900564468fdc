"""A remote job's input set: what lld listed, cross-checked against what the decoded index says it imports."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from goma_ext.bitcode.index import parse_index
from goma_ext.bitcode.rename import rename_modules
from goma_ext.dtlto.jobfile import DistJob, JobFile
from goma_ext.errors import GomaExtError
from goma_ext.inputs.backend import backend_inputs
from thinlto_base.fsutil import file_sha256

# A module lld 22 extracted from an archive for DTLTO: `<archive>(<member> at <offset>).<task>.<pid, hex>.o`.
EXTRACTED_MEMBER = re.compile(r"\(.* at \d+\)\.\d+\.[0-9A-Fa-f]+\.o$")


class InputMismatch(GomaExtError):
    """lld's job file and the ThinLTO index disagree on what a backend reads."""


def _norm(paths: tuple[str, ...] | list[str], cwd: Path) -> set[str]:
    """Normalized, and relative to CWD when inside it (lld writes what the link line said, maybe absolute)."""
    base = os.path.abspath(cwd)
    out = set()
    for p in paths:
        norm = os.path.normpath(p)
        if os.path.isabs(norm) and (norm + os.sep).startswith(base + os.sep):
            norm = os.path.relpath(norm, base)
        out.add(norm)
    return out


def remote_inputs(jobs: JobFile, job: DistJob, cwd: Path) -> tuple[str, ...]:
    """The files to upload for JOB: its module, its index, the modules the index imports from (all of which lld
    must have listed, and nothing else), the link's common inputs and any file a flag names (response files,
    profiles). A disagreement between the job file and the index is an error naming both."""
    decoded = backend_inputs(job.argv, cwd)
    from_index = _norm([decoded.bitcode, *([decoded.index] if decoded.index else []), *decoded.imports], cwd)
    listed = _norm(list(job.inputs), cwd)
    if from_index != listed:
        only_lld = sorted(listed - from_index)
        only_index = sorted(from_index - listed)
        raise InputMismatch(
            f"{jobs.path}: the inputs of the job for {job.module} disagree with its index {job.index}: "
            f"only in {jobs.path.name}: {only_lld or 'none'}; only in the index: {only_index or 'none'}"
        )
    return tuple(dict.fromkeys([*job.inputs, *jobs.common_inputs, *decoded.other_inputs]))


def stage_members(cwd: Path, index: str, staged_index: str, stage: str) -> dict[str, str]:
    """Write INDEX to STAGED_INDEX, with every module lld extracted from an archive renamed to a file in STAGE
    named by its content (a hard link, else a copy, made here). Returns old path -> new path (all relative to
    CWD); empty when the index names no such module (then the copy is the index as it is)."""
    data = (cwd / index).read_bytes()
    modules = parse_index(data, name=index, summaries=False).modules if data else []
    renames, digests = {}, {}
    for module in modules:
        if EXTRACTED_MEMBER.search(module.path):
            digest = file_sha256(cwd / module.path)
            renames[module.path] = os.path.join(stage, "m", f"{digest[:32]}.o")
            digests[module.path] = digest
    for old, new in renames.items():
        target = cwd / new
        target.parent.mkdir(parents=True, exist_ok=True)
        try:  # one already there (an earlier link's) is kept only if it holds these bytes: never a leftover's
            if not target.is_symlink() and file_sha256(target) == digests[old]:
                continue
        except OSError:
            pass
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        try:
            os.link(cwd / old, tmp)
        except OSError:
            shutil.copyfile(cwd / old, tmp)
        os.replace(tmp, target)
    (cwd / staged_index).write_bytes(rename_modules(data, renames, name=index) if renames else data)
    return renames
