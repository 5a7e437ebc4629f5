"""Kernel timing on the GPU without the host's launch cost in the figure.

numba spends tens of microseconds in Python per launch, more than many conv kernels run.
Timing back-to-back launches with CUDA events alone would then measure the host. So the
stream is first held by a sleeping kernel long enough for the host to queue all timed
launches; the start event sits behind the sleeper, and the interval between the events is
GPU time only. The host's own time per call is measured on the side.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from numba import cuda

__all__ = ["device_time", "device_times"]


@cuda.jit
def _hold_stream(milliseconds):
    for _ in range(milliseconds):
        cuda.nanosleep(1000000)


def device_time(launch: Callable[[], object], repeats: int = 20, hold_ms: int = 2) -> tuple[float, float]:
    """Mean GPU seconds per ``launch()`` over ``repeats`` back-to-back calls, and mean host
    seconds per call. ``launch`` must only enqueue work on the default stream. The hold is
    lengthened and the measurement repeated if the host took longer than the hold."""
    launch()
    cuda.synchronize()
    while True:
        before, start, stop = cuda.event(), cuda.event(), cuda.event()
        before.record()
        _hold_stream[1, 1](hold_ms)
        start.record()
        t0 = time.perf_counter()
        for _ in range(repeats):
            launch()
        host = time.perf_counter() - t0
        stop.record()
        stop.synchronize()
        # nanosleep only approximates its delay: compare with the hold that really happened
        held = cuda.event_elapsed_time(before, start) / 1e3
        if host < 0.9 * held or hold_ms >= 2000:
            return cuda.event_elapsed_time(start, stop) / 1e3 / repeats, host / repeats
        hold_ms *= 4


def device_times(launches: Sequence[Callable[[], object]], repeats: int = 5, chunk: int = 32) -> list[float]:
    """Mean GPU seconds per call of each of many ``launches`` (e.g. every tiling candidate):
    as :func:`device_time`, but a chunk of launches shares one hold, with an event between
    consecutive launches' ``repeats`` calls, so each costs the host little more than its
    own launches."""
    for launch in launches:
        launch()
    cuda.synchronize()
    times: list[float] = []
    for first in range(0, len(launches), chunk):
        part = launches[first:first + chunk]
        # numba's host time per launch, with margin; lengthened below if the host took longer
        hold_ms = max(2, int(0.2 * repeats * len(part)) + 1)
        while True:
            before = cuda.event()
            marks = [cuda.event() for _ in range(len(part) + 1)]
            before.record()
            _hold_stream[1, 1](hold_ms)
            marks[0].record()
            t0 = time.perf_counter()
            for launch, mark in zip(part, marks[1:]):
                for _ in range(repeats):
                    launch()
                mark.record()
            host = time.perf_counter() - t0
            marks[-1].synchronize()
            held = cuda.event_elapsed_time(before, marks[0]) / 1e3
            if host < 0.9 * held or hold_ms >= 2000:
                break
            hold_ms *= 4
        times += [cuda.event_elapsed_time(a, b) / 1e3 / repeats for a, b in zip(marks, marks[1:])]
    return times
