"""The ahead-of-time build of the CSD and MSMT-CSD CPU loops (:mod:`gpu.ahead_of_time`).
``fibertensor warmup --backend cpu --family fod`` builds the loops the warm-up ran
(:func:`gpu.fod.warmup.warm_up_fod`): a later CPU fit of any size (on the host's threads),
response estimation's included, runs without loading numba.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUILD_NAME", "build_fod_ahead_of_time"]

#: The build's name in :func:`gpu.ahead_of_time.build_folder`.
BUILD_NAME = "fod"


def build_fod_ahead_of_time() -> Path:
    """Build every CSD and MSMT-CSD CPU loop signature this process has loaded or compiled
    into one extension module, :data:`BUILD_NAME`; returns its path."""
    from gpu.ahead_of_time import build
    from gpu.fod import cpu_loops

    return build(BUILD_NAME, [loop for loop in (cpu_loops.msmt_loop, cpu_loops.csd_loop) if loop.overloads])
