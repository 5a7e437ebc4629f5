"""MRtrix3's own commands, the reference for the MRtrix image and fixel formats."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import require_system_package


@pytest.fixture
def mrtrix():
    """``mrtrix("mrinfo", path, "-strides")`` → the command's stdout; fails on a non-zero exit."""

    require_system_package("requires_mrtrix")

    def run(command: str, *args) -> str:
        exe = shutil.which(command)
        done = subprocess.run([exe, "-quiet", *map(str, args)], capture_output=True, text=True)
        assert done.returncode == 0, f"{command} {' '.join(map(str, args))} failed: {done.stderr}"
        return done.stdout

    return run
