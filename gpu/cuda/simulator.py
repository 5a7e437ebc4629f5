"""Whether numba's CUDA simulator stands in for a GPU, learnt without importing numba."""

from __future__ import annotations

import os
import sys

__all__ = ["simulator_active"]


def simulator_active() -> bool:
    """True when numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) stands in for a GPU.
    Read from the environment as numba reads it, unless numba is loaded already: importing
    numba to learn this would cost the driver path what it saves by not needing numba
    (docs/decisions/cubin-driver-path.md). A config module that another thread is still
    importing has no setting yet: the environment, which it reads, says the same."""
    enabled = getattr(sys.modules.get("numba.core.config"), "ENABLE_CUDASIM", None)
    if enabled is not None:
        return bool(enabled)
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0")
