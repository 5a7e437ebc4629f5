"""The options every peaks section shares (the phantom's shape and order, repeats) and the
phantom made from them."""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.harness import Report
from gpu.peaks import fod_phantom

__all__ = ["add_volume_options", "make_phantom"]


def add_volume_options(parser: argparse.ArgumentParser, shape: tuple[int, int, int] = (96, 96, 60),
                       repeats: int = 3) -> None:
    parser.add_argument("--shape", type=int, nargs=3, default=list(shape), metavar=("X", "Y", "Z"),
                        help="the phantom's grid")
    parser.add_argument("--lmax", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=repeats, help="timed runs of each step (the best or median "
                        "is shown, as the table says)")


def make_phantom(args: argparse.Namespace, **options) -> dict[str, np.ndarray]:
    """``gpu.peaks.fod_phantom`` of ``args.shape`` and ``args.lmax`` (seed 0 unless given)."""
    started = time.perf_counter()
    phantom = fod_phantom(tuple(args.shape), args.lmax, **{"seed": 0, **options})
    Report.progress(f"phantom {tuple(args.shape)} lmax {args.lmax}: {phantom['sh'][..., 0].size} voxels, made in "
                    f"{time.perf_counter() - started:.1f} s")
    return phantom
