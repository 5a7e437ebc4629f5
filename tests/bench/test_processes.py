"""bench.processes.stop, which the integration tests share: the leaders get the signal, and
what is left of their process groups is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from bench.processes import stop
from tests.integration.processes import wait_for

# A leader that ignores SIGTERM and leaves a child behind in its process group.
_STUBBORN = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
             "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
             "print(child.pid, flush=True); time.sleep(300)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_stop_kills_each_group_after_the_signal():
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    stubborn = subprocess.Popen([sys.executable, "-c", _STUBBORN], stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
    child = int(stubborn.stdout.readline())
    stop(polite, stubborn, timeout=1)
    assert polite.returncode == -signal.SIGTERM  # the signal was enough
    assert stubborn.returncode == -signal.SIGKILL  # it ignored SIGTERM: killed with its group
    wait_for(lambda: not _alive(child), 10, "the leader's child to die")  # SIGKILL lands asynchronously
    stubborn.stdout.close()


def test_stop_sends_the_signal_asked_for():
    # SIGINT during the interpreter's start-up ends it with status 1: wait until it runs the code
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(300)"],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline() == "ready\n"
    stop(proc, sig=signal.SIGINT)
    assert proc.returncode == -signal.SIGINT
    proc.stdout.close()
