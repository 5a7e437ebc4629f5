"""The simulator's block manager of the tests (tests/cuda_simulator_blocks.py) keeps the
simulator's semantics while it runs the GPU threads on reused Python threads, in turns:
each GPU thread sees its own indices and local arrays, every live thread waits at
``syncthreads``, threads that returned take no part, a thread that waits on another
without a barrier gets past, and a thread's exception ends the launch with that
exception."""

import multiprocessing
import threading

import numpy as np
import pytest
from numba import cuda, float64, int64

from gpu.cuda.simulator import simulator_active
from tests.cuda_simulator_blocks import install

# the simulator's own machinery: on a GPU (NUMBA_ENABLE_CUDASIM=0) there is none to test
pytestmark = pytest.mark.skipif(not simulator_active(), reason="tests the CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")

BLOCK = 16
GRID = 5


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
def _indices_across_barriers(out):
    """Each thread's indices, read again after barriers at which the other threads of the
    block ran: ``out[block y, block x, thread z, thread y, thread x]`` = (blockIdx.x,
    blockIdx.y, threadIdx.x, threadIdx.y, threadIdx.z, laneid, grid x)."""
    tx, ty, tz = cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
    bx, by = cuda.blockIdx.x, cuda.blockIdx.y
    cuda.syncthreads()
    cuda.syncthreads()
    o = out[cuda.blockIdx.y, cuda.blockIdx.x, cuda.threadIdx.z, cuda.threadIdx.y, cuda.threadIdx.x]
    o[0], o[1], o[2], o[3], o[4] = bx, by, tx, ty, tz
    cuda.syncthreads()
    o[5], o[6] = cuda.laneid, cuda.grid(1)


@cuda.jit
def _sum_of_own_local_array(out):
    """Each thread fills a local array with its global index, lets the block's other
    threads fill theirs, then sums its own."""
    own = cuda.local.array(4, int64)
    i = cuda.grid(1)
    for k in range(4):
        own[k] = i
    cuda.syncthreads()
    out[i] = own[0] + own[1] + own[2] + own[3]


@cuda.jit
def _block_votes(count, all_, any_):
    """``syncthreads_count/and/or`` of ``threadIdx.x < blockIdx.x`` for each block; the
    threads past ``BLOCK - 4`` have returned (they count as false)."""
    t, b = cuda.threadIdx.x, cuda.blockIdx.x
    if t >= BLOCK - 4:
        return
    vote = t < b
    c = cuda.syncthreads_count(vote)
    a = cuda.syncthreads_and(vote)
    o = cuda.syncthreads_or(vote)
    if t == 0:
        count[b], all_[b], any_[b] = c, a, o


@cuda.jit
def _raise_in_one_thread(out):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    if t == 3:
        raise ValueError("thread three failed")
    cuda.syncthreads()
    out[t] = 1.0


@cuda.jit
def _raise_in_one_block(out, failing_block):
    b, t = cuda.blockIdx.x, cuda.threadIdx.x
    cuda.syncthreads()
    if b == failing_block and t == 5:
        raise ValueError("block failed")
    cuda.syncthreads()
    out[b, t] = 1.0


@cuda.jit
def _wait_for_the_last_thread(flag, out):
    """Thread 0 spins, with no barrier, until the block's last thread has set ``flag``."""
    t = cuda.threadIdx.x
    if t == 0:
        while flag[0] == 0:
            pass
        out[0] = flag[0]
    elif t == BLOCK - 1:
        flag[0] = 7


def _divide(x, out):
    out[cuda.threadIdx.x] = x[0] / x[1]


_divide_raising, _divide_quietly = cuda.jit(debug=True)(_divide), cuda.jit(_divide)


def _workers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "cuda-simulator-worker"}


def test_the_block_manager_is_the_one_installed():
    from numba.cuda.simulator import kernel

    installed = kernel.BlockManager
    assert installed.reuses_threads
    install()  # a second install keeps the first
    assert kernel.BlockManager is installed


@pytest.mark.parametrize("early", [BLOCK, 8])
def test_threads_see_each_others_writes_and_returned_threads_do_not_block(early):
    x = np.random.default_rng(early).standard_normal(BLOCK)
    rotated, total = np.zeros(BLOCK), np.zeros(1)
    _rotate_then_reduce[1, BLOCK](x, rotated, total, early)
    np.testing.assert_array_equal(rotated, np.roll(x, -1))
    assert total[0] == pytest.approx(x[:early].sum(), rel=1e-14)


def test_each_gpu_thread_sees_its_own_indices_in_every_block():
    grid, block = (3, 2), (4, 3, 2)
    out = np.full((2, 3, 2, 3, 4, 7), -1, np.int64)
    _indices_across_barriers[grid, block](out)
    by, bx, tz, ty, tx = np.indices(out.shape[:5])
    lane = (tx + 4 * (ty + 3 * tz)) % 32
    expected = np.stack([bx, by, tx, ty, tz, lane, bx * 4 + tx], axis=-1)
    np.testing.assert_array_equal(out, expected)


def test_local_arrays_are_each_gpu_threads_own_in_every_block():
    out = np.zeros(GRID * BLOCK, np.int64)
    _sum_of_own_local_array[GRID, BLOCK](out)
    np.testing.assert_array_equal(out, 4 * np.arange(GRID * BLOCK))


def test_block_votes_count_each_blocks_live_threads():
    count, all_, any_ = (np.full(GRID, -1, np.int64) for _ in range(3))
    _block_votes[GRID, BLOCK](count, all_, any_)
    live = BLOCK - 4
    np.testing.assert_array_equal(count, np.minimum(np.arange(GRID), live))
    np.testing.assert_array_equal(all_, np.zeros(GRID))  # the returned threads vote false
    np.testing.assert_array_equal(any_, np.arange(GRID) > 0)


def test_blocks_reuse_the_threads_of_earlier_blocks():
    out = np.zeros(GRID * BLOCK, np.int64)
    _sum_of_own_local_array[GRID, BLOCK](out)
    before = _workers()
    assert len(before) >= BLOCK
    _sum_of_own_local_array[GRID, BLOCK](out)
    assert _workers() == before
    np.testing.assert_array_equal(out, 4 * np.arange(GRID * BLOCK))


def test_a_thread_spinning_on_a_later_threads_write_gets_past():
    out = np.zeros(1, np.int64)
    _wait_for_the_last_thread[1, BLOCK](np.zeros(1, np.int64), out)
    assert out[0] == 7


def test_a_thread_that_raises_ends_the_launch_with_its_exception():
    out = np.zeros(BLOCK)
    with pytest.raises(ValueError, match=r"tid=\[3, 0, 0\] ctaid=\[0, 0, 0\]: thread three failed"):
        _raise_in_one_thread[1, BLOCK](out)
    assert not out.any()  # the others stopped at their next barrier


def test_a_failed_block_ends_the_launch_and_the_next_launch_runs():
    out = cuda.to_device(np.zeros((GRID, BLOCK)))  # a device array: what the blocks wrote stays
    with pytest.raises(ValueError, match=r"tid=\[5, 0, 0\] ctaid=\[2, 0, 0\]: block failed"):
        _raise_in_one_block[GRID, BLOCK](out, 2)
    # the blocks before the failed one ran, no thread of it passed the barrier, none after it ran
    np.testing.assert_array_equal(out.copy_to_host(), np.broadcast_to(np.arange(GRID)[:, None] < 2, (GRID, BLOCK)))
    out = np.zeros((GRID, BLOCK))
    _raise_in_one_block[GRID, BLOCK](out, GRID)
    np.testing.assert_array_equal(out, np.ones((GRID, BLOCK)))


def test_debug_mode_error_state_stays_with_its_gpu_thread():
    x, out = np.array([1.0, 0.0]), np.zeros(BLOCK)
    with pytest.raises(FloatingPointError, match=r"tid=\[\d+, 0, 0\] ctaid=\[0, 0, 0\]: divide by zero"):
        _divide_raising[1, BLOCK](x, out)
    with pytest.warns(RuntimeWarning, match="divide by zero"):  # NumPy's default, not the debug launch's
        _divide_quietly[1, BLOCK](x, out)
    np.testing.assert_array_equal(out, np.full(BLOCK, np.inf))


def _launch_in_child(connection):
    out = np.zeros(GRID * BLOCK, np.int64)
    _sum_of_own_local_array[GRID, BLOCK](out)
    connection.send(out)


def test_a_forked_child_runs_kernels_on_its_own_threads():
    _sum_of_own_local_array[GRID, BLOCK](np.zeros(GRID * BLOCK, np.int64))  # the parent has idle workers
    ours, theirs = multiprocessing.Pipe()
    child = multiprocessing.get_context("fork").Process(target=_launch_in_child, args=(theirs,))
    child.start()
    assert ours.poll(60), "the forked child's launch did not finish"
    np.testing.assert_array_equal(ours.recv(), 4 * np.arange(GRID * BLOCK))
    child.join()
