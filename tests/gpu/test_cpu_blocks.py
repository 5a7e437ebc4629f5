"""The process's leaf pool: blocks of rows in order, arrays without rows passed whole, and a
forked child with a pool of its own."""

import subprocess
import sys
from pathlib import Path

import numpy as np

from gpu.cpu_blocks import run_in_blocks


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
    # forked from a fresh interpreter: forking the test process, with its numba and OpenMP
    # threads, is not something the suite should do
    code = """if True:
        import os
        from gpu.cpu_blocks import leaf_pool
        parent = leaf_pool()
        assert leaf_pool() is parent and parent.submit(sum, [1, 2]).result() == 3
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            ok = leaf_pool() is not parent and leaf_pool().submit(sum, [1, 2]).result() == 3
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
        os.waitpid(child, 0)
        print(os.read(read, 1).decode())
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == "1"
