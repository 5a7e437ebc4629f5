"""The CUDA kernels' tests run in numba's simulator with a barrier that waits instead of
polling (tests/cuda_simulator_barrier.py)."""

from tests.cuda_simulator_barrier import install

install()
