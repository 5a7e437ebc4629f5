"""The service's processes for the benchmarks that run it: start (Redis, the API, workers)
on 127.0.0.1, wait until ready, stop; and the CPU seconds and memory of process trees,
read from ``/proc``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from bench.harness import REPO, child_environment

__all__ = ["free_port", "service_environment", "spawn", "stop", "wait_ready", "process_tree", "cpu_seconds",
           "rss_bytes", "TreeMonitor"]

_CLOCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def service_environment(data_dir: Path, broker_url: str = "") -> dict[str, str]:
    """The service processes' environment: this one's (a device's PYTHONPATH included) with
    the repository first, no simulator, the data folder and broker (empty: embedded)."""
    env = child_environment(FIBERTENSOR_DATA_DIR=str(data_dir), FIBERTENSOR_BROKER_URL=broker_url)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    return env


def spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """``argv`` in a session of its own, its output appended to ``log``."""
    with open(log, "ab") as handle:
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop(*procs: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
    """``sig`` to each leader only (serve stops its worker; Celery's warm shutdown its pool),
    then, once each has exited or had ``timeout`` seconds, SIGKILL whatever is left of its
    process group (each started in a session of its own, as :func:`spawn` starts them)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(sig)
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def wait_ready(base: str, workers: int, procs: list[subprocess.Popen], timeout: float = 120) -> None:
    """Until ``base``'s ``/readyz`` lists ``workers`` workers; an error if one of ``procs``
    exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise SystemExit("a service process exited early; see the logs in the work folder")
        try:
            response = httpx.get(f"{base}/readyz", timeout=5)
            if response.status_code == 200 and len(response.json()["workers"]) >= workers:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{base} not ready after {timeout} s")


def process_tree(roots: list[int]) -> list[int]:
    """``roots`` and all their living descendants."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = set(), [r for r in roots if r in parents]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(child for child, parent in parents.items() if parent == pid and child not in found)
    return sorted(found)


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of ``pids`` and of their children already reaped (utime+stime+cutime+cstime)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15])
        except (OSError, IndexError, ValueError):
            pass
    return total / _CLOCK


def rss_bytes(pids: list[int]) -> int:
    """Resident memory of ``pids``, summed."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as handle:
                total += int(handle.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            pass
    return total


class TreeMonitor:
    """Samples the summed RSS of each root's process tree every ``interval`` seconds
    (``samples``: time and bytes per root), and the CPU seconds of each process (for trees
    whose processes outlive the measurement)."""

    def __init__(self, roots: list[int], interval: float = 0.2):
        self.roots, self.interval = roots, interval
        self.samples: list[tuple[float, dict[int, int]]] = []
        self._cpu_seen: dict[int, float] = {}
        self._root_of: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "TreeMonitor":
        self.started = time.perf_counter()
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        self.wall = time.perf_counter() - self.started

    def _sample(self) -> None:
        by_root = {}
        for root in self.roots:
            pids = process_tree([root])
            for pid in pids:
                self._root_of[pid] = root
                self._cpu_seen[pid] = cpu_seconds([pid])
            by_root[root] = rss_bytes(pids)
        self.samples.append((time.perf_counter(), by_root))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def rss(self, roots: list[int] | None = None) -> np.ndarray:
        """Summed RSS in bytes of the trees of ``roots`` (default: all) at each sample."""
        return np.array([sum(v for root, v in by_root.items() if roots is None or root in roots)
                         for _, by_root in self.samples])

    def cpu_seconds(self, before: dict[int, float], roots: list[int] | None = None) -> float:
        """CPU seconds since ``before`` of the processes under ``roots`` (default: all)."""
        return sum(seconds - before.get(pid, 0.0) for pid, seconds in self._cpu_seen.items()
                   if roots is None or self._root_of.get(pid) in roots)

    def curve(self, points: int = 10) -> str:
        """Peak RSS in GB over each tenth of the run."""
        times = np.array([t for t, _ in self.samples])
        rss = self.rss()
        edges = np.linspace(times[0], times[-1], points + 1)
        tenths = [rss[(times >= a) & (times <= b)] for a, b in zip(edges, edges[1:])]
        return " ".join(f"{t.max() / 1e9:.2f}" if t.size else "-" for t in tenths)
