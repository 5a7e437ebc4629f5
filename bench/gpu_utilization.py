"""The GPU's own busy share while a benchmark runs, as the driver counts it.

``nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits
-lms 200`` runs beside the benchmark and prints one line per GPU every 200 ms;
``utilization.gpu`` is the percent of the driver's last sample period (its length depends
on the product) during which one or more kernels ran (``nvidia-smi --help-query-gpu``). Unlike
kernel seconds ÷ wall, it counts a moment once however many processes' kernels share it.
Where ``nvidia-smi`` is missing or fails, no samples come and the figure reads "n/a".
"""

from __future__ import annotations

import math
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable

__all__ = ["QUERY", "GpuSample", "parse_sample", "GpuSampler", "mean_utilization", "describe_utilization"]

QUERY = ("--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits", "-lms", "200")


@dataclass(frozen=True)
class GpuSample:
    """One GPU's line: when it was read (``time.time()``), the GPU's index as nvidia-smi
    numbers it, its utilization in percent and its memory in use in MiB (NaN where the
    driver reports ``[N/A]`` or ``[Not Supported]``)."""

    time: float
    index: int
    utilization: float
    memory_mib: float


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def parse_sample(line: str, at: float) -> GpuSample | None:
    """The sample of one output line read at ``at``; None for a line that is not one (a
    driver message, an empty line)."""
    fields = [field.strip() for field in line.split(",")]
    if len(fields) != 3 or not fields[0].isdigit():
        return None
    return GpuSample(at, int(fields[0]), _number(fields[1]), _number(fields[2]))


def mean_utilization(samples: Iterable[GpuSample], start: float, end: float) -> dict[int, float]:
    """Mean utilization in percent of each GPU over the samples read from ``start`` to
    ``end`` (``time.time()``), reported values only; GPUs with none are left out."""
    values: dict[int, list[float]] = {}
    for sample in samples:
        if start <= sample.time <= end and not math.isnan(sample.utilization):
            values.setdefault(sample.index, []).append(sample.utilization)
    return {index: sum(v) / len(v) for index, v in sorted(values.items())}


def describe_utilization(means: dict[int, float], gpus: list[str] | None) -> tuple[str, str]:
    """The table's figure, the mean of the GPUs a run used (``gpus``: ``CUDA_VISIBLE_DEVICES``
    values; every GPU sampled when not given as indices), and a per-GPU line; "n/a" without
    samples."""
    if not means:
        return "n/a", "n/a (no nvidia-smi samples)"
    wanted = [int(g) for g in gpus] if gpus and all(g.strip().isdigit() for g in gpus) else list(means)
    used = [means[i] for i in wanted if i in means]
    figure = f"{sum(used) / len(used):.0f}%" if used else "n/a"
    return figure, ", ".join(f"GPU {i} {u:.0f}%" for i, u in means.items())


class GpuSampler:
    """``with GpuSampler(log) as sampler:`` samples every GPU's utilization while the block
    runs (``sampler.samples``), each raw line also written to ``log`` with the time it was
    read; does nothing where ``executable`` (default: ``nvidia-smi`` on PATH) is absent."""

    def __init__(self, log: Path | None = None, executable: str | None = None):
        self.executable = executable or shutil.which("nvidia-smi")
        self.log = log
        self.samples: list[GpuSample] = []
        self._process: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> "GpuSampler":
        if self.executable is None:
            return self
        try:
            self._process = subprocess.Popen([self.executable, *QUERY], stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL, text=True, bufsize=1)
        except OSError:
            return self
        self._reader = threading.Thread(target=self._read, args=(self._process.stdout,), daemon=True)
        self._reader.start()
        return self

    def _read(self, stream: IO[str]) -> None:
        sink = open(self.log, "w") if self.log else None
        try:
            for line in stream:
                at = time.time()
                if sink:
                    sink.write(f"{at:.3f}, {line}")
                sample = parse_sample(line, at)
                if sample is not None:
                    self.samples.append(sample)
        finally:
            if sink:
                sink.close()

    def __exit__(self, *exc) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join()
