"""What every benchmark shares: the run's header, host and GPU timings, the side-by-side
table, and a JSON line for every row.

A benchmark builds its parser with :func:`bench_parser` (which adds ``--json PATH``), opens
a :class:`Report` (which prints the header first: device, date, commit, command), times its
calls with :func:`time_host` or :func:`gpu_time`, and prints its rows with
:meth:`Report.table`, which writes each row as a JSON line too. The figures of a run go in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter, process_time
from typing import Any, Callable, Iterable, Sequence

__all__ = ["REPO", "Timing", "time_host", "gpu_time", "ratio", "Column", "table_lines", "run_header", "Report",
           "bench_parser", "add_json_option", "run_benchmark", "run_sections", "child_environment"]

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Timing:
    """Wall and process-CPU seconds (all threads of the process) of each timed call."""

    wall: tuple[float, ...]
    cpu: tuple[float, ...]

    @property
    def best_wall(self) -> float:
        return min(self.wall)

    @property
    def best_cpu(self) -> float:
        return min(self.cpu)

    @property
    def median_wall(self) -> float:
        return statistics.median(self.wall)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu)


def time_host(function: Callable[[], object], repeats: int = 3, warmup: int = 1) -> Timing:
    """Times ``repeats`` calls of ``function`` after ``warmup`` untimed ones (a first call
    compiles kernels or loads them from the cache, and fills caches of the OS)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    for _ in range(warmup):
        function()
    wall, cpu = [], []
    for _ in range(repeats):
        started, started_cpu = perf_counter(), process_time()
        function()
        wall.append(perf_counter() - started)
        cpu.append(process_time() - started_cpu)
    return Timing(tuple(wall), tuple(cpu))


def gpu_time(launch: Callable[[], object], repeats: int = 20, warmup: int = 1) -> tuple[float, float]:
    """Mean GPU seconds per ``launch()`` between CUDA events around ``repeats`` back-to-back
    calls after ``warmup`` ones, and mean host seconds per call. ``launch`` must queue its work
    on the default stream. Where a call costs the host longer than its GPU work, the GPU
    waits for the host between launches and the figure is the host's: kernels launched
    through numba's Python path are timed behind a held stream instead
    (``gpu.conv.timing.device_time``)."""
    from gpu.cuda import device_arrays

    for _ in range(warmup):
        launch()
    device_arrays.synchronize()
    start, stop = device_arrays.event(), device_arrays.event()
    start.record()
    started = perf_counter()
    for _ in range(repeats):
        launch()
    host = perf_counter() - started
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / 1e3 / repeats, host / repeats


def ratio(peer: float | None, ours: float | None) -> float:
    """``peer / ours`` (how many times faster ours is, for times), NaN where either is
    missing, not finite or ours is zero."""
    if peer is None or ours is None:
        return math.nan
    peer, ours = float(peer), float(ours)
    if not (math.isfinite(peer) and math.isfinite(ours)) or ours == 0:
        return math.nan
    return peer / ours


def child_environment(**variables: str) -> dict[str, str]:
    """This process's environment for a child process (``fibertensor``, a worker) that runs
    this checkout's code: the repository first on ``PYTHONPATH``, ``variables`` set."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *paths]), **variables}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


@dataclass(frozen=True)
class Column:
    """A table column: the row's ``key``, its title, and how a value is written (a format
    spec such as ``".3f"``, or a function of the value). Missing values (absent, None,
    NaN) read "-"; True and False read "yes" and "NO", for correctness columns."""

    key: str
    title: str
    format: str | Callable[[Any], str] = ".4g"

    def cell(self, row: dict) -> str:
        value = row.get(self.key)
        if _missing(value):
            return "-"
        if isinstance(value, bool):
            return "yes" if value else "NO"
        if callable(self.format):
            return self.format(value)
        if isinstance(value, str):
            return value
        return format(value, self.format)


def table_lines(rows: Sequence[dict], columns: Sequence[Column]) -> list[str]:
    """The table as text lines: titles, then one line per row; the first column
    left-aligned, the others right-aligned, each as wide as its widest cell."""
    cells = [[column.cell(row) for column in columns] for row in rows]
    widths = [max([len(column.title)] + [len(line[i]) for line in cells]) for i, column in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        first = values[0].ljust(widths[0])
        return "  ".join([first] + [value.rjust(width) for value, width in zip(values[1:], widths[1:])]).rstrip()

    return [line([column.title for column in columns])] + [line(values) for values in cells]


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU"


def _gpus() -> str:
    """The GPUs nvidia-smi lists, as "2 x NAME"; "no GPU" without nvidia-smi or GPUs (asked
    of nvidia-smi rather than CUDA, so that the header creates no CUDA context in a process
    that forks workers)."""
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return "no GPU"
    try:
        names = subprocess.run([executable, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True, check=True, timeout=60).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return "no GPU"
    counts: dict[str, int] = {}
    for name in filter(None, (name.strip() for name in names)):
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{count} x {name}" for name, count in counts.items()) or "no GPU"


def _command(argv: Sequence[str]) -> list[str]:
    """``argv`` with the interpreter named as typed in the docs (``python3``), not by the
    path a version manager resolved it to."""
    argv = list(argv)
    if argv and Path(argv[0]).name.startswith("python"):
        argv[0] = Path(argv[0]).name
    return argv


def run_header(argv: Sequence[str] | None = None) -> dict[str, str]:
    """The run's device (GPUs, CPU model and cores), UTC date, commit (``-dirty`` with
    uncommitted changes to tracked files) and command (``argv``, default this process's)."""
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    if commit != "unknown" and _git("status", "--porcelain", "--untracked-files=no"):
        commit += "-dirty"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "device": f"{_gpus()}; {_cpu_model()}, {cores} cores",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "command": shlex.join(_command(sys.orig_argv if argv is None else argv)),
    }


def _plain(value: Any) -> Any:
    """``value`` as JSON takes it: numpy scalars and arrays as numbers and lists, NaN and
    infinities as null, paths and other objects as text."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return _plain(value.tolist())
    return str(value)


class Report:
    """One run's output. Prints the header at once; :meth:`table` prints a table and,
    with ``json_path``, appends each of its rows as a JSON line (``{"table": title, ...}``)
    after the header's line (``{"header": {...}}``)."""

    def __init__(self, json_path: Path | None = None, argv: Sequence[str] | None = None,
                 header: dict[str, str] | None = None):
        self.header = header or run_header(argv)
        self.json_path = json_path
        for key, value in self.header.items():
            print(f"{key}: {value}", flush=True)
        if json_path is not None:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps({"header": self.header}) + "\n")

    def record(self, table: str, row: dict) -> None:
        """``row`` of ``table`` as a JSON line, without printing it (per-candidate data
        behind a printed summary)."""
        if self.json_path is not None:
            with open(self.json_path, "a") as sink:
                sink.write(json.dumps(_plain({"table": table, **row})) + "\n")

    def table(self, title: str, rows: Iterable[dict], columns: Sequence[Column], note: str | None = None) -> None:
        """Prints ``title``, the table of ``rows`` and ``note`` (what the columns mean), and
        records every row."""
        rows = list(rows)
        print(f"\n{title}", flush=True)
        for line in table_lines(rows, columns):
            print(line)
        if note:
            print(note)
        for row in rows:
            self.record(title, row)
        sys.stdout.flush()

    @staticmethod
    def progress(text: str) -> None:
        """A line while the run goes on (what was made, what finished)."""
        print(text, flush=True)


def bench_parser(description: str, **kwargs) -> argparse.ArgumentParser:
    """An argument parser with the shared ``--json PATH``, named as the benchmark is run
    (``python3 -m bench.NAME``)."""
    script = Path(sys.argv[0]).resolve()
    if "prog" not in kwargs and script.suffix == ".py" and script.parent == REPO / "bench":
        kwargs["prog"] = f"python3 -m bench.{script.stem}"
    parser = argparse.ArgumentParser(description=description, **kwargs)
    add_json_option(parser)
    return parser


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="also write the run's header and every table row to PATH as JSON lines")


def run_benchmark(doc: str, add_arguments: Callable[[argparse.ArgumentParser], None],
                  run: Callable[[argparse.Namespace, Report], None], argv: Sequence[str] | None = None) -> None:
    """A benchmark of one section: its options (``add_arguments``), described by the first
    paragraph of its docstring ``doc``, then ``run(args, report)``."""
    parser = bench_parser(doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args = parser.parse_args(argv)
    run(args, Report(args.json))


def run_sections(prog: str, description: str, package: str, sections: dict[str, tuple[str, str]],
                 argv: Sequence[str] | None = None) -> None:
    """A command of several benchmarks, one sub-command each: ``sections`` maps a section's
    name to (its module in ``package``, one line on what it measures against what). Each
    module has ``add_arguments(parser)`` and ``run(args, report)``; its docstring is the
    section's help."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    subparsers = parser.add_subparsers(dest="section", required=True, metavar="SECTION")
    modules = {}
    for section, (module_name, summary) in sections.items():
        module = modules[section] = importlib.import_module(f"{package}.{module_name}")
        sub = subparsers.add_parser(section, help=summary, description=module.__doc__,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
        add_json_option(sub)
    args = parser.parse_args(argv)
    modules[args.section].run(args, Report(args.json))
