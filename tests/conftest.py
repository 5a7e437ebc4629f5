"""Test-session set-up.

The CUDA kernels are tested with numba's CUDA simulator, which must be switched on before
numba is first imported; it changes only ``numba.cuda``, so the CPU backends still compile
with ``@njit``. ``gpu.cuda.device.cuda_available()`` reports False under the simulator, so
``--backend auto`` picks the CPU in tests.

Compiled ``@njit(cache=True)`` functions go to one on-disk cache, ``.numba-cache/`` in the
checkout, which xdist workers, the worker processes the integration tests start and later
runs all load instead of compiling again (seconds per SS-HOPM order); the kernel cache
folder (``FIBERTENSOR_KERNEL_CACHE``) is ``.kernel-cache/`` beside it, so that no build made
outside the tests (``fibertensor warmup`` in one's home) changes what they run. The session's first
process (xdist's controller, or the only one) compiles the SS-HOPM CPU loops into it before
any test runs, as the worker image does at build (``fibertensor warmup``): three CI-mode
runs from a fresh clone out of five segfaulted in numba's parallel runtime while the loops
compiled or loaded inside a test's job threads (not understood; never seen with a warm
cache).

``-n auto`` starts two xdist workers per core: about a third of the suite's wall time is
tests waiting on the processes they start (services, workers, browsers, MRtrix3), which a
second worker per core fills. The suite also starts a few hundred Python processes, so it
lets Python cache the bytecode of what they import (``PYTHONDONTWRITEBYTECODE``, set in some
images, would have every process compile our modules again).

Tests marked ``slow`` (full variant sweeps of the simulator tests, which a representative
test of each kernel shape covers in the default run) are left out unless ``-m`` selects
them or ``FIBERTENSOR_REQUIRE_ALL_TESTS`` is set.

Tests marked ``requires_redis``, ``requires_mrtrix`` or ``requires_chromium`` need a system
package: without it they skip, saying what to install. Tests that take
:func:`small_filesystem` need to mount a tmpfs (root, or CAP_SYS_ADMIN): without it they skip,
saying so. ``FIBERTENSOR_REQUIRE_ALL_TESTS=1`` (``.ci/run`` sets it, and CI runs as root)
turns those skips into failures, so CI cannot pass without its peers.
"""

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".numba-cache"))
KERNEL_CACHE = Path(__file__).resolve().parents[1] / ".kernel-cache"
os.environ.setdefault("FIBERTENSOR_KERNEL_CACHE", str(KERNEL_CACHE))

import pytest  # noqa: E402

from tests.cuda_simulator_blocks import install as install_simulator_blocks  # noqa: E402
from tests.integration.processes import start_redis, stop  # noqa: E402

# the CUDA kernels' tests run a block's threads in turns on reused threads that wait at
# barriers without polling (tests/cuda_simulator_blocks.py)
install_simulator_blocks()

REQUIRE_ALL_TESTS = os.environ.get("FIBERTENSOR_REQUIRE_ALL_TESTS", "") not in ("", "0")

# marker: (commands it needs on PATH, how to install them)
SYSTEM_PACKAGES = {
    "requires_redis": (("redis-server",), "apt-get install redis-server"),
    "requires_mrtrix": (("sh2peaks", "sh2amp", "mrconvert", "mrinfo"), "apt-get install mrtrix3"),
    "requires_chromium": (("chromium", "chromedriver"), "apt-get install chromium chromium-driver"),
}


def require_system_package(marker: str) -> None:
    """Skip the running test (fail it under FIBERTENSOR_REQUIRE_ALL_TESTS) when a command
    that ``marker`` stands for is not on PATH."""
    commands, install = SYSTEM_PACKAGES[marker]
    missing = [command for command in commands if shutil.which(command) is None]
    if missing:
        skip_or_fail(f"{', '.join(missing)} not found on PATH: install it with `{install}`")


def skip_or_fail(message: str) -> None:
    """Skip the running test for want of what ``message`` names; fail it instead under
    FIBERTENSOR_REQUIRE_ALL_TESTS."""
    if REQUIRE_ALL_TESTS:
        pytest.fail(f"{message} (FIBERTENSOR_REQUIRE_ALL_TESTS is set: every test must run)", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def small_filesystem(tmp_path_factory) -> Callable[[int], Path]:
    """``mount(mib)``: a new folder holding a tmpfs of ``mib`` MiB, a real file system that
    runs out of space (ENOSPC); unmounted when the test ends. Mounting needs root (or
    CAP_SYS_ADMIN): without it the test skips, or fails under FIBERTENSOR_REQUIRE_ALL_TESTS."""
    mounted: list[Path] = []

    def mount(mib: int) -> Path:
        folder = tmp_path_factory.mktemp("tmpfs")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            skip_or_fail(f"cannot mount a {mib} MiB tmpfs for a full-disk test ({done.stderr.strip()}); "
                         "run the tests as root")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in SYSTEM_PACKAGES:
        if item.get_closest_marker(marker) is not None:
            require_system_package(marker)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: no error where it is not installed
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return 2 * (os.cpu_count() or 1)


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller warmed the cache
        return
    # no ahead-of-time build or glyph store left by an earlier run: the tests' jobs run numba's
    # code and Pillow's text, as the warm-up below leaves them
    for made in ("cpu", "qc"):
        shutil.rmtree(KERNEL_CACHE / made, ignore_errors=True)
    # `fibertensor warmup` of every CPU kernel the tests load, in one process per core (its
    # default; numba compiles on one thread): on a cold cache the workers would otherwise
    # compile them inside tests, one at a time, the other workers waiting on the cache's lock.
    # The tests run the SS-HOPM CPU loops of lmax 2 to 8 only: those of 10 and 12 would cost a
    # cold run half a minute of CPU for nothing. No ahead-of-time build: the jobs of the tests
    # run numba's code (tests/gpu/test_ahead_of_time.py builds its own and compares the two).
    done = subprocess.run([sys.executable, "-m", "service", "warmup", "--backend", "cpu", "--quiet",
                           "--no-ahead-of-time", "--family", "fixels", "fod", "conv", "peaks", "--lmax", "2", "4", "6",
                           "8"], cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        raise pytest.UsageError(f"`fibertensor warmup` failed before any test ran:\n{done.stdout}")


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    # A test ends with the engine preparations it started (a peaks job's prepare thread runs
    # a CPU loop): one left running beside the next test was there when a CI-mode run
    # segfaulted in an OpenMP thread.
    for thread in threading.enumerate():
        if thread.name.startswith("prepare-peaks"):
            thread.join(timeout=120)


# The longest tests, most of them waiting on the processes they start, in the order they
# are handed out: xdist hands tests out in collection order, and these, left where they
# fall, ran on for half a minute after the other workers had finished.
LONG_FIRST = ("tests/worker/test_worker_kill.py", "tests/integration/", "tests/service/test_page_browser.py",
              "tests/service/test_startup.py", "tests/gpu/test_cpu_parallel.py")


def _handed_out(item: pytest.Item) -> int:
    return next((i for i, prefix in enumerate(LONG_FIRST) if item.nodeid.startswith(prefix)), len(LONG_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_handed_out)  # stable: each module keeps its order
    if REQUIRE_ALL_TESTS or config.option.markexpr:
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A private redis-server for the module (per xdist worker): its ``redis://`` URL."""
    require_system_package("requires_redis")
    proc, url = start_redis(tmp_path_factory.mktemp("redis"))
    yield url
    stop(proc)
