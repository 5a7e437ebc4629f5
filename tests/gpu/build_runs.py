"""Fresh processes for the ahead-of-time build tests: a command run from the checkout with
its own kernel cache folder (where ``fibertensor warmup`` puts the builds)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_with_kernels(code: str, *args: str, kernels: Path) -> subprocess.CompletedProcess:
    """``python -c code args`` in a fresh process whose kernel cache folder is ``kernels``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FIBERTENSOR_KERNEL_CACHE": str(kernels)}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True, timeout=900)
