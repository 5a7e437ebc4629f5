"""The ahead-of-time build of the FMLS segmentation CPU loop (:mod:`gpu.ahead_of_time`).
``fibertensor warmup --family fixels`` builds the loop the warm-up ran
(:func:`gpu.fixels.warmup.warm_up_fixels`): a later CPU segmentation of any size (on the
host's threads), response estimation's included, and the few voxels a GPU run hands back
to the CPU, run without loading numba.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUILD_NAME", "build_fixels_ahead_of_time"]

#: The build's name in :func:`gpu.ahead_of_time.build_folder`.
BUILD_NAME = "fixels"


def build_fixels_ahead_of_time() -> Path:
    """Build every FMLS CPU loop signature this process has loaded or compiled into one
    extension module, :data:`BUILD_NAME`; returns its path."""
    from gpu.ahead_of_time import build
    from gpu.fixels import cpu_loops

    return build(BUILD_NAME, [cpu_loops.segment_loop])
