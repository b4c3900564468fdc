"""A remote job's input set: what lld listed, cross-checked against what the decoded index says it imports."""

from __future__ import annotations

import os
from pathlib import Path

from goma_ext.dtlto.jobfile import DistJob, JobFile
from goma_ext.errors import GomaExtError
from goma_ext.inputs.backend import backend_inputs


class InputMismatch(GomaExtError):
    """lld's job file and the ThinLTO index disagree on what a backend reads."""


def _norm(paths: tuple[str, ...] | list[str]) -> set[str]:
    return {os.path.normpath(p) for p in paths}


def remote_inputs(jobs: JobFile, job: DistJob, cwd: Path) -> tuple[str, ...]:
    """The files to upload for JOB: its module, its index, the modules the index imports from (all of which lld
    must have listed, and nothing else), the link's common inputs and any file a flag names (response files,
    profiles). A disagreement between the job file and the index is an error naming both."""
    decoded = backend_inputs(job.argv, cwd)
    from_index = _norm([decoded.bitcode, *([decoded.index] if decoded.index else []), *decoded.imports])
    listed = _norm(list(job.inputs))
    if from_index != listed:
        only_lld = sorted(listed - from_index)
        only_index = sorted(from_index - listed)
        raise InputMismatch(
            f"{jobs.path}: the inputs of the job for {job.module} disagree with its index {job.index}: "
            f"only in {jobs.path.name}: {only_lld or 'none'}; only in the index: {only_index or 'none'}"
        )
    return tuple(dict.fromkeys([*job.inputs, *jobs.common_inputs, *decoded.other_inputs]))
