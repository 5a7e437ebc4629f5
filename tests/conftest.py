"""Test-session set-up.

The CUDA kernels are tested with numba's CUDA simulator, which must be switched on before
numba is first imported; it changes only ``numba.cuda``, so the CPU backends still compile
with ``@njit``. ``gpu.cuda_runtime.cuda_available()`` reports False under the simulator, so
``--backend auto`` picks the CPU in tests.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
