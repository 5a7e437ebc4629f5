"""Block-wide maximum and seed slots for the SS-HOPM seed kernels (gpu.peaks.sshopm_generated_cuda).

Each voxel's block needs the largest start value (for the seeding floor) and, for every
seed, its position among the block's seeds in start order. Tree reductions through shared
memory took 22 barriers a block; warp shuffles and ballots need 2: each warp reduces or
counts its own lanes, then every thread combines the few per-warp results. Both give exact
results (a maximum, integer counts), so the seeds and their order are unchanged.

The threads pass their index and the block size as uint64 (see the seed kernels): numba
makes every signed index a wraparound test and its loops over ``range`` a signed count,
integer work that outweighed the kernels' arithmetic; the loops over warps run a fixed
MAX_WARPS times, unrolled with constant indices.

The CUDA simulator has no warp shuffles or ballots; there the same values come from plain
loops over the block's shared arrays.
"""

import numpy as np
from numba import config, cuda, uint32, uint64

__all__ = ["block_max", "seed_slot", "MAX_WARPS"]

#: Warps of the largest block (MAX_STARTS threads): the size of the per-warp scratch arrays.
MAX_WARPS = 8

# unsigned, so that index arithmetic stays unsigned (numba types uint64 with int64 as float64)
_WARP = np.uint64(32)
_LANE = np.uint64(31)
_WARP_SHIFT = np.uint64(5)

if config.ENABLE_CUDASIM:
    @cuda.jit(device=True)
    def block_max(values, t, count, warp_max):
        """max(values[0:count]); values complete in shared memory; every thread calls it."""
        best = values[0]
        for k in range(1, count):
            best = max(best, values[k])
        return best

    @cuda.jit(device=True)
    def seed_slot(mine, t, count, flags, warp_counts):
        """(seeds among threads 0…t−1, seeds of the whole block) for the flag ``mine``."""
        flags[t] = mine
        cuda.syncthreads()
        before = 0
        total = 0
        for k in range(count):
            if k < t:
                before += flags[k]
            total += flags[k]
        return before, total
else:
    @cuda.jit(device=True)
    def lanes(width):
        """Mask of a warp's first ``width`` lanes: the threads the warp has (the last warp of
        a block of, say, 50 threads has 18). Not activemask(): lanes that took different
        paths before the call need not have reconverged, and the *_sync call waits for them."""
        return uint32(0xFFFFFFFF) >> uint32(_WARP - width)

    @cuda.jit(device=True)
    def block_max(values, t, count, warp_max):
        """max(values[0:count]); values complete in shared memory; every thread calls it."""
        lane = t & _LANE
        warp = t >> _WARP_SHIFT
        best = values[t]
        width = min(_WARP, count - (warp << _WARP_SHIFT))
        mask = lanes(width)
        for offset in (16, 8, 4, 2, 1):
            other = cuda.shfl_down_sync(mask, best, offset)
            if lane + uint64(offset) < width:
                best = max(best, other)
        if lane == 0:
            warp_max[warp] = best
        cuda.syncthreads()
        n_warps = (count + _LANE) >> _WARP_SHIFT
        best = warp_max[0]
        for k in range(1, MAX_WARPS):
            if k < n_warps:
                best = max(best, warp_max[k])
        return best

    @cuda.jit(device=True)
    def seed_slot(mine, t, count, flags, warp_counts):
        """(seeds among threads 0…t−1, seeds of the whole block) for the flag ``mine``."""
        lane = t & _LANE
        warp = t >> _WARP_SHIFT
        bits = cuda.ballot_sync(lanes(min(_WARP, count - (warp << _WARP_SHIFT))), mine != 0)
        if lane == 0:
            warp_counts[warp] = cuda.popc(bits)
        cuda.syncthreads()
        before = uint64(cuda.popc(bits & cuda.lanemask_lt()))
        total = uint64(0)
        n_warps = (count + _LANE) >> _WARP_SHIFT
        for k in range(MAX_WARPS):
            if k < n_warps:
                # uint32 counts widen to uint64 for free; int32 ones took a sign extension each
                seeds = uint64(warp_counts[k])
                if k < warp:
                    before += seeds
                total += seeds
        return before, total
