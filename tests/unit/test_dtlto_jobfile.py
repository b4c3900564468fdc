"""The distributor's job file: LLVM 22's layout read strictly, bad files refused with one line naming the key."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from goma_ext.dtlto import jobfile
from goma_ext.dtlto.jobfile import JobFileError

# As lld-22 wrote it for a two-module link (docs/research/dtlto.md).
GOOD: dict[str, Any] = {
    "common": {
        "linker_output": "app",
        "args": ["/usr/lib/llvm-22/bin/clang", "-c", "--target=x86_64-pc-linux-gnu", "-O2"],
        "inputs": [],
    },
    "jobs": [
        {"args": ["a.o", "-fthinlto-index=a.1.7.native.o.thinlto.bc", "-o", "a.1.7.native.o"],
         "inputs": ["a.o", "a.1.7.native.o.thinlto.bc"], "outputs": ["a.1.7.native.o"]},
        {"args": ["m.o", "-fthinlto-index=m.2.7.native.o.thinlto.bc", "-o", "m.2.7.native.o"],
         "inputs": ["m.o", "m.2.7.native.o.thinlto.bc", "a.o"], "outputs": ["m.2.7.native.o"]},
    ],
}


def test_reads_lld_22_layout() -> None:
    jobs = jobfile.parse(Path("app.7.dist-file.json"), json.dumps(GOOD))
    assert jobs.linker_output == "app"
    second = jobs.jobs[1]
    assert second.argv == (*GOOD["common"]["args"], *GOOD["jobs"][1]["args"])
    assert (second.module, second.index, second.output) == ("m.o", "m.2.7.native.o.thinlto.bc", "m.2.7.native.o")
    assert second.inputs == ("m.o", "m.2.7.native.o.thinlto.bc", "a.o")


def _mutated(change: Any) -> str:
    doc = copy.deepcopy(GOOD)
    change(doc)
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (lambda d: d.update(version=2), "top level: unknown key 'version'"),
        (lambda d: d["common"].pop("inputs"), "common: missing key 'inputs'"),
        (lambda d: d["jobs"][1].update(priority=1), "jobs[1]: unknown key 'priority'"),
        (lambda d: d["jobs"][0].update(inputs="a.o"), "jobs[0].inputs: expected a list of strings"),
        (lambda d: d["jobs"][0]["args"].remove("-o"), "jobs[0].args: expected MODULE -fthinlto-index=INDEX"),
        (lambda d: d["common"].update(args=[]), "common.args: empty"),
        (lambda d: d.update(jobs={}), "jobs: expected a list"),
    ],
    ids=["top-key", "missing", "job-key", "type", "job-args", "no-compiler", "jobs-type"],
)
def test_unknown_layout_is_one_line_naming_file_and_key(change: Any, expect: str) -> None:
    with pytest.raises(JobFileError) as e:
        jobfile.parse(Path("app.7.dist-file.json"), _mutated(change))
    message = str(e.value)
    assert message.startswith("app.7.dist-file.json: ") and expect in message, message
    assert "LLVM 22 layout" in message and "\n" not in message


def test_truncated_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "app.json"
    path.write_text(json.dumps(GOOD)[:120])
    with pytest.raises(JobFileError, match=r"app\.json: not JSON .*truncated\?"):
        jobfile.load(path)


def test_missing_job_file(tmp_path: Path) -> None:
    with pytest.raises(JobFileError, match="no such job file"):
        jobfile.load(tmp_path / "gone.json")


def test_inputs_must_exist_before_anything_runs(tmp_path: Path) -> None:
    jobs = jobfile.parse(tmp_path / "app.json", json.dumps(GOOD))
    for name in ("a.o", "a.1.7.native.o.thinlto.bc", "m.o", "m.2.7.native.o.thinlto.bc"):
        (tmp_path / name).write_bytes(b"x")
    jobfile.check_inputs(jobs, tmp_path)
    (tmp_path / "a.o").unlink()
    with pytest.raises(JobFileError, match=r"app\.json: input 'a\.o' does not exist"):
        jobfile.check_inputs(jobs, tmp_path)
