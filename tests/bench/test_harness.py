"""bench.harness on known inputs: timings (best, median, warm-up), the GPU event timing's
arithmetic, ratios, the table's cells and lines, the header and the JSON lines; and every
benchmark command answering ``--help`` from the repository root."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import harness
from bench.harness import Column, Report, Timing, gpu_time, ratio, run_header, table_lines, time_host

REPO = Path(__file__).resolve().parents[2]


class _Clock:
    """A clock that reads the given values in turn."""

    def __init__(self, values):
        self.values = list(values)

    def __call__(self):
        return self.values.pop(0)


def test_time_host_times_each_call_after_the_warm_up(monkeypatch):
    calls = []
    # wall readings: start/end of three timed calls (the warm-up reads no clock)
    monkeypatch.setattr(harness, "perf_counter", _Clock([10.0, 10.5, 20.0, 20.2, 30.0, 30.9]))
    monkeypatch.setattr(harness, "process_time", _Clock([1.0, 1.4, 2.0, 2.1, 3.0, 3.3]))
    timing = time_host(lambda: calls.append(1), repeats=3, warmup=2)
    assert len(calls) == 5
    assert timing.wall == pytest.approx((0.5, 0.2, 0.9))
    assert timing.cpu == pytest.approx((0.4, 0.1, 0.3))
    assert timing.best_wall == pytest.approx(0.2)
    assert timing.median_wall == pytest.approx(0.5)
    assert timing.best_cpu == pytest.approx(0.1)
    assert timing.median_cpu == pytest.approx(0.3)


def test_medians_of_an_even_count_are_the_mean_of_the_middle_two():
    timing = Timing(wall=(4.0, 1.0, 3.0, 2.0), cpu=(1.0, 1.0, 5.0, 7.0))
    assert timing.median_wall == 2.5
    assert timing.median_cpu == 3.0


def test_time_host_refuses_no_repeats():
    with pytest.raises(ValueError, match="repeats must be at least 1"):
        time_host(lambda: None, repeats=0)


class _FakeEvent:
    recorded: list[str] = []

    def __init__(self, name, elapsed_ms=0.0):
        self.name, self.elapsed_ms = name, elapsed_ms

    def record(self):
        _FakeEvent.recorded.append(self.name)

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return end.elapsed_ms


def test_gpu_time_divides_the_events_interval_by_the_launches(monkeypatch):
    from gpu.cuda import device_arrays

    events = iter([_FakeEvent("start"), _FakeEvent("stop", elapsed_ms=12.0)])
    launches, order = [], []
    _FakeEvent.recorded = order
    monkeypatch.setattr(device_arrays, "event", lambda: next(events))
    monkeypatch.setattr(device_arrays, "synchronize", lambda: order.append("synchronize"))
    monkeypatch.setattr(harness, "perf_counter", _Clock([5.0, 5.6]))
    gpu, host = gpu_time(lambda: (launches.append(1), order.append("launch")), repeats=4, warmup=2)
    assert len(launches) == 6
    assert gpu == pytest.approx(12.0 / 1e3 / 4)
    assert host == pytest.approx(0.6 / 4)
    # warm-up launches finish before the start event; the timed ones lie between the events
    assert order == ["launch", "launch", "synchronize", "start", "launch", "launch", "launch", "launch", "stop"]


@pytest.mark.parametrize("peer, ours, expected", [(2.0, 0.5, 4.0), (1.0, 4.0, 0.25), (np.float32(3.0), 1.5, 2.0)])
def test_ratio_is_peer_over_ours(peer, ours, expected):
    assert ratio(peer, ours) == pytest.approx(expected)


@pytest.mark.parametrize("peer, ours", [(None, 1.0), (1.0, None), (1.0, 0.0), (math.inf, 1.0), (1.0, math.nan)])
def test_ratio_without_both_figures_is_nan(peer, ours):
    assert math.isnan(ratio(peer, ours))


def test_cells_format_values_missing_ones_and_correctness():
    assert Column("s", "s", ".3f").cell({"s": 0.12345}) == "0.123"
    assert Column("s", "s", ".3f").cell({}) == "-"
    assert Column("s", "s", ".3f").cell({"s": None}) == "-"
    assert Column("s", "s", ".3f").cell({"s": math.nan}) == "-"
    assert Column("ok", "ok").cell({"ok": True}) == "yes"
    assert Column("ok", "ok").cell({"ok": np.bool_(False).item()}) == "NO"
    assert Column("name", "name", ".3f").cell({"name": "sh2peaks"}) == "sh2peaks"
    assert Column("it", "it", lambda it: f"{it['mean']:.1f}/{it['max']}").cell({"it": {"mean": 4.52, "max": 30}}) \
        == "4.5/30"
    assert Column("share", "share", "+.1%").cell({"share": 0.1234}) == "+12.3%"


def test_table_lines_align_ours_against_the_peer():
    rows = [{"method": "ours-cpu", "seconds": 0.25, "x_peer": 4.0, "ok": True},
            {"method": "MRtrix3 sh2peaks", "seconds": 1.0, "x_peer": 1.0, "ok": True},
            {"method": "DIPY", "seconds": 12.5, "ok": False}]
    lines = table_lines(rows, [Column("method", "method"), Column("seconds", "s", ".2f"),
                               Column("x_peer", "x sh2peaks", ".2f"), Column("ok", "count ok")])
    assert lines == [
        "method                s  x sh2peaks  count ok",
        "ours-cpu           0.25        4.00       yes",
        "MRtrix3 sh2peaks   1.00        1.00       yes",
        "DIPY              12.50           -        NO",
    ]


def test_the_header_names_device_date_commit_and_command():
    header = run_header(["/opt/python/bin/python3.11", "-m", "bench.peaks", "kernels", "--shape", "20 20 20"])
    assert header["command"] == "python3.11 -m bench.peaks kernels --shape '20 20 20'"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", header["date"])
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert header["commit"].removesuffix("-dirty") == head.stdout.strip()
    assert f"{len(os.sched_getaffinity(0))} cores" in header["device"]


def test_children_run_this_checkout_first(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/opt/site", str(REPO), "/opt/more"]))
    env = harness.child_environment(NUMBA_NUM_THREADS="2")
    assert env["PYTHONPATH"] == os.pathsep.join([str(REPO), "/opt/site", "/opt/more"])
    assert env["NUMBA_NUM_THREADS"] == "2"
    assert env["PATH"] == os.environ["PATH"]


def test_report_prints_the_header_first_and_writes_every_row_as_a_json_line(tmp_path, capsys):
    path = tmp_path / "runs" / "peaks.jsonl"
    header = {"device": "no GPU; CPU, 2 cores", "date": "2026-11-28 12:00 UTC", "commit": "abc1234",
              "command": "python3 -m bench.peaks kernels"}
    report = Report(path, header=header)
    rows = [{"method": "ours-cpu", "seconds": np.float64(0.5), "count": np.int64(3), "iterations": np.array([1, 2]),
             "x_peer": ratio(None, 0.5), "ok": True, "path": Path("/tmp/x")},
            {"method": "MRtrix3 sh2peaks", "seconds": 2.0}]
    report.table("peaks", rows, [Column("method", "method"), Column("seconds", "s", ".1f")], note="s: best of 3")
    report.record("tiles", {"tile": "8x8", "us": 1.5})
    printed = capsys.readouterr().out.splitlines()
    assert printed[:4] == ["device: no GPU; CPU, 2 cores", "date: 2026-11-28 12:00 UTC", "commit: abc1234",
                           "command: python3 -m bench.peaks kernels"]
    assert printed[4:] == ["", "peaks", "method              s", "ours-cpu          0.5", "MRtrix3 sh2peaks  2.0",
                           "s: best of 3"]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [
        {"header": header},
        {"table": "peaks", "method": "ours-cpu", "seconds": 0.5, "count": 3, "iterations": [1, 2], "x_peer": None,
         "ok": True, "path": "/tmp/x"},
        {"table": "peaks", "method": "MRtrix3 sh2peaks", "seconds": 2.0},
        {"table": "tiles", "tile": "8x8", "us": 1.5},
    ]


def test_without_json_nothing_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Report(None, header={"device": "d", "date": "t", "commit": "c", "command": "x"}).table(
        "t", [{"a": 1}], [Column("a", "a", "d")])
    assert list(tmp_path.iterdir()) == []
    assert capsys.readouterr().out.splitlines()[-2:] == ["a", "1"]


COMMANDS = [
    ["bench.peaks"], *[["bench.peaks", section] for section in
                       ("kernels", "startup", "noisy", "processes", "outputs", "write-timeline", "host-stages",
                        "transfers", "read")],
    ["bench.service"], *[["bench.service", section] for section in ("deployments", "host-cpu", "load")],
    ["bench.batch"], ["bench.job_store"], ["bench.conv"], ["bench.ttmc"], ["bench.fixels"], ["bench.fod"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_benchmark_answers_help_from_the_repository_root(command):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", *command, "--help"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python3 -m {' '.join(command)}")
    if command not in (["bench.peaks"], ["bench.service"]):  # those list their sections
        assert "--json PATH" in done.stdout


def test_no_benchmark_edits_sys_path():
    edits = [str(path.relative_to(REPO)) for path in (REPO / "bench").rglob("*.py") if "sys.path" in path.read_text()]
    assert edits == []


def test_run_benchmark_parses_the_options_and_writes_the_runs_json(tmp_path, capsys):
    """A one-section benchmark's main: its docstring's first paragraph as the description, its
    options, then its run with a report whose rows go to ``--json``."""
    seen = {}

    def add_arguments(parser):
        parser.add_argument("--voxels", type=int, default=3)

    def run(args, report):
        seen["voxels"] = args.voxels
        report.table("t", [{"a": 1.5}], [Column("a", "a", ".1f")])

    harness.run_benchmark("What it times.\n\n    python3 -m bench.x", add_arguments, run,
                          ["--voxels", "7", "--json", str(tmp_path / "run.jsonl")])
    assert seen == {"voxels": 7}
    lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert "header" in lines[0] and lines[1] == {"table": "t", "a": 1.5}
    assert "1.5" in capsys.readouterr().out
