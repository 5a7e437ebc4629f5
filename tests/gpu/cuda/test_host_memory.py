"""The page-locked pool's bookkeeping (gpu.cuda.host_memory.HostBlockPool) on real host memory:
blocks of ``np.empty`` stand in for ``cuMemHostAlloc``'s, so reuse, lifetimes, the bounds
and thread safety are checked here; tests/gpu/peaks/test_pinned_path.py checks the
page-locked blocks themselves on a GPU."""

import gc
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from gpu.cuda.host_memory import HostBlockPool, host_empty, pinned_empty
from tests.gpu.cuda.host_memory_blocks import pool

PAGE = HostBlockPool.PAGE


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


@pytest.mark.parametrize("shape, dtype, order", [((5, 7, 3), np.float32, "C"), ((5, 7, 3), np.float32, "F"),
                                                 (11, np.int32, "C"), ((0, 4), np.float64, "C"), ((), np.uint8, "C")])
def test_arrays_are_what_np_empty_makes_over_the_block(shape, dtype, order):
    blocks, memory = pool()
    array = blocks.empty(shape, dtype, order)
    expected = np.empty(shape, dtype, order=order)
    assert (array.shape, array.dtype) == (expected.shape, expected.dtype)
    assert array.strides == expected.strides or array.size == 0  # numpy gives an empty array zero strides
    assert (array.flags.c_contiguous, array.flags.f_contiguous) == (expected.flags.c_contiguous,
                                                                    expected.flags.f_contiguous)
    assert array.flags.writeable and array.flags.aligned
    block = memory.live[address(array)]
    assert block.nbytes % PAGE == 0 and block.nbytes >= array.nbytes
    array[...] = np.arange(array.size).reshape(shape, order=order)
    np.testing.assert_array_equal(block[:array.nbytes].view(dtype), np.arange(array.size, dtype=dtype))


def test_a_freed_block_is_reused_and_none_is_freed_within_the_bounds():
    blocks, memory = pool()
    first = blocks.empty((1000, 9), np.float32)
    where = address(first)
    del first
    second = blocks.empty((1000, 9), np.float32)
    assert address(second) == where
    smaller = blocks.empty((600, 9), np.float32)  # no free block: a new one
    assert address(smaller) != where
    assert (blocks.allocated, blocks.reused, memory.freed) == (2, 1, [])


def test_views_keep_the_block_until_the_last_is_gone():
    blocks, memory = pool()
    array = blocks.empty((8, 6), np.float32, "F")
    view = array.reshape(-1, order="F")[2:].view(np.int32)
    where = address(array)
    del array
    gc.collect()
    assert blocks.free_blocks == []
    other = blocks.empty((8, 6), np.float32)
    assert address(other) != where  # the view still holds the first block
    view[:] = 7
    assert (memory.live[where][8:8 + view.nbytes].view(np.int32) == 7).all()
    del view
    assert blocks.free_blocks == [(memory.live[where].nbytes, where)]


def test_the_smallest_block_that_fits_and_at_most_twice_the_size():
    blocks, memory = pool()
    sizes = [10 * PAGE, 4 * PAGE, 6 * PAGE]
    arrays = [blocks.empty(size, np.uint8) for size in sizes]
    where = {size: address(a) for size, a in zip(sizes, arrays)}
    del arrays
    assert address(blocks.empty(5 * PAGE, np.uint8)) == where[6 * PAGE]
    assert address(blocks.empty(4 * PAGE - 100, np.uint8)) == where[4 * PAGE]  # rounded up to pages
    assert address(blocks.empty(PAGE, np.uint8)) not in where.values()  # 10 pages is too large for one
    assert blocks.allocated == 4


def test_free_blocks_beyond_the_bounds_go_back_least_recently_returned_first():
    blocks, memory = pool(keep_bytes=10 * PAGE, keep_blocks=2)
    a, b, c = (blocks.empty(4 * PAGE, np.uint8) for _ in range(3))
    order = [address(a), address(b), address(c)]
    del a, b
    assert memory.freed == []
    del c  # three free blocks: one too many
    assert memory.freed == [order[0]]
    assert sorted(address for _, address in blocks.free_blocks) == sorted(order[1:])
    big = blocks.empty(20 * PAGE, np.uint8)
    where = address(big)
    del big  # more than keep_bytes alone: it goes at once, the others stay
    assert memory.freed[1:] == [where]
    assert sum(size for size, _ in blocks.free_blocks) <= 10 * PAGE
    assert set(memory.live) == {address for _, address in blocks.free_blocks}


def test_many_threads_never_share_a_block_and_memory_stays_bounded():
    blocks, memory = pool(keep_bytes=64 * PAGE, keep_blocks=8)
    errors = []
    held = set()
    held_lock = threading.Lock()

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(300):
                array = blocks.empty(int(rng.integers(1, 6 * PAGE)), np.uint8)
                with held_lock:
                    assert address(array) not in held, "a block handed out twice"
                    held.add(address(array))
                array[:] = seed  # the block is this thread's alone until it gives it back
                assert (array == seed).all()
                with held_lock:
                    held.remove(address(array))
                del array
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    free = blocks.free_blocks
    assert len(free) <= 8 and sum(size for size, _ in free) <= 64 * PAGE
    assert set(memory.live) == {address for _, address in free}  # every other block was freed
    assert blocks.reused > blocks.allocated


def test_a_block_given_back_while_the_pool_is_locked_is_kept():
    """A finaliser that runs inside the pool's locked section (a garbage collection there,
    or another thread's) queues its block; the holder puts it on the free list."""
    blocks, memory = pool()
    array = blocks.empty(PAGE, np.uint8)
    where = address(array)
    with blocks._lock:
        del array
    assert blocks.free_blocks == [(PAGE, where)]


def test_without_a_cuda_context_pinned_empty_is_np_empty():
    """A fresh process has no CUDA context (with or without a GPU): plain pageable memory,
    and asking for it creates none (a parent that forks stays free of CUDA)."""
    code = """if True:
        import numpy as np
        from gpu.cuda.driver import driver
        from gpu.cuda.host_memory import pinned_empty
        array = pinned_empty((4, 3), np.float32, "F")
        print(array.base is None, array.flags.f_contiguous, array.shape == (4, 3), driver.created_context())
    """
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root).stdout
    assert out.split() == ["True", "True", "True", "False"]


def test_arrays_for_the_gpu_are_page_locked_and_the_cpus_are_not():
    """auto runs on the GPU wherever one is usable: page-locked memory for it, as for cuda."""
    assert host_empty("cpu") is np.empty
    assert host_empty("cuda") is host_empty("auto") is pinned_empty
