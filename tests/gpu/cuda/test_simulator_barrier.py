"""The simulator's block barrier of the tests (tests/cuda_simulator_barrier.py) keeps the
simulator's semantics: every live thread waits at ``syncthreads``, threads that returned
take no part, and a thread's exception ends the launch with that exception."""

import numpy as np
import pytest
from numba import cuda, float64

from tests.cuda_simulator_barrier import install

BLOCK = 16


@cuda.jit
def _rotate_then_reduce(x, rotated, total, early):
    """Each thread reads its neighbour's shared write (wrong without the barrier), then a
    tree sum over the block; threads ≥ ``early`` return before the tree's barriers."""
    buf = cuda.shared.array(BLOCK, float64)
    t = cuda.threadIdx.x
    buf[t] = x[t]
    cuda.syncthreads()
    rotated[t] = buf[(t + 1) % BLOCK]
    cuda.syncthreads()
    if t >= early:
        return
    half = early // 2
    while half > 0:
        if t < half:
            buf[t] += buf[t + half]
        cuda.syncthreads()
        half //= 2
    if t == 0:
        total[0] = buf[0]


@cuda.jit
def _raise_in_one_thread(out):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    if t == 3:
        raise ValueError("thread three failed")
    cuda.syncthreads()
    out[t] = 1.0


def test_the_barrier_is_the_one_installed():
    from numba.cuda.simulator import kernel

    installed = kernel.BlockManager
    assert installed.waits_without_polling
    install()  # a second install keeps the first
    assert kernel.BlockManager is installed


@pytest.mark.parametrize("early", [BLOCK, 8])
def test_threads_see_each_others_writes_and_returned_threads_do_not_block(early):
    x = np.random.default_rng(early).standard_normal(BLOCK)
    rotated, total = np.zeros(BLOCK), np.zeros(1)
    _rotate_then_reduce[1, BLOCK](x, rotated, total, early)
    np.testing.assert_array_equal(rotated, np.roll(x, -1))
    assert total[0] == pytest.approx(x[:early].sum(), rel=1e-14)


def test_a_thread_that_raises_ends_the_launch_with_its_exception():
    out = np.zeros(BLOCK)
    with pytest.raises(ValueError, match=r"tid=\[3, 0, 0\] ctaid=\[0, 0, 0\]: thread three failed"):
        _raise_in_one_thread[1, BLOCK](out)
    assert not out.any()  # the others stopped at their next barrier
