"""The remote action's outputs: a split DWARF backend declares its .dwo file (named with -split-dwarf-output)."""

from __future__ import annotations

import pytest

from goma_ext.reapi.errors import InputError
from goma_ext.remote.action_inputs import split_dwarf_outputs

BACKEND = ["/llvm/clang", "-c", "-x", "ir", "a.o", "-fthinlto-index=i.bc", "-o", "stage/native.o"]


def test_named_dwo_is_an_output() -> None:
    argv = [*BACKEND, "-gsplit-dwarf", "-Xclang", "-split-dwarf-file", "-Xclang", "n/a.dwo", "-Xclang",
            "-split-dwarf-output", "-Xclang", "stage/native.dwo"]
    assert split_dwarf_outputs(argv) == ("stage/native.dwo",)


def test_no_split_dwarf_no_extra_output() -> None:
    assert split_dwarf_outputs(BACKEND) == ()
    assert split_dwarf_outputs([*BACKEND, "-gsplit-dwarf=single"]) == ()


def test_bare_gsplit_dwarf_is_refused_for_remote() -> None:
    with pytest.raises(InputError, match="-split-dwarf-output"):
        split_dwarf_outputs([*BACKEND, "-gsplit-dwarf"])
