"""The process's leaf pool: blocks of rows in order, arrays without rows passed whole, and a
forked child with a pool of its own."""

import os

import numpy as np

from gpu.cpu_blocks import leaf_pool, run_in_blocks


def _sum_rows(rows, out, offset):
    out[:] = rows.sum(axis=1) + offset
    return len(rows)


def test_blocks_cover_the_rows_in_order_and_shared_values_pass_whole():
    rows = np.arange(1003 * 4, dtype=np.int64).reshape(1003, 4)
    out = np.zeros(1003, np.int64)
    lengths = run_in_blocks(_sum_rows, [rows, out], [10], block_rows=100)
    assert lengths == [100] * 10 + [3]
    np.testing.assert_array_equal(out, rows.sum(axis=1) + 10)
    assert run_in_blocks(_sum_rows, [rows[:0], out[:0]], [0]) == []


def test_a_forked_child_makes_its_own_pool():
    parent = leaf_pool()
    assert leaf_pool() is parent
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        ok = leaf_pool() is not parent and leaf_pool().submit(sum, [1, 2]).result() == 3
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.waitpid(child, 0)
    assert os.read(read, 1) == b"1"
