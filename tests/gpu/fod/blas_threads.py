"""Run a snippet under several numpy BLAS thread counts (batch workers, service workers and
the CLI each start BLAS with its own): what must not depend on the process prints the same."""

from __future__ import annotations

import os
import subprocess
import sys


def outputs_by_blas_threads(code: str, threads: tuple[str, ...] = ("1", "2", "4")) -> set[str]:
    """The distinct stdouts of ``python -c code`` with ``OPENBLAS_NUM_THREADS`` each of ``threads``."""
    return {subprocess.run([sys.executable, "-c", code], env={**os.environ, "OPENBLAS_NUM_THREADS": count},
                           capture_output=True, text=True, check=True).stdout for count in threads}
