"""SS-HOPM CUDA kernels for symmetric tensors of order 2–12 in R^3 — GENERATED, do not edit.

Written by gpu/peaks/sshopm_codegen.py (``python -m gpu.peaks.sshopm_codegen``); the polynomial
code and the climb they call are in gpu/peaks/sshopm_generated.py.
"""

# numba's on-disk cache is keyed on this file alone, so it records the code it inlines:
# sshopm_generated.py sha256 294ac8f7126946017539e8d001b585b31c401c552ecdbbc704375c0c6102ea89
# sshopm_math.py sha256 6961578a724483193e3119a60fc3cad3f46ecb18319c756e8d6d6a503d073fef
# sshopm_layout.py sha256 47381b90bbe135b1554b677d2744f7c21b951c5f74a839f602b5bf1f8e64c711
# sshopm_block.py sha256 7af0fb47df3ffee76049693f9f87adfc44d4317058387e16125f78bd13a91c0f

from numba import config, cuda, float32, int32, uint32, uint64

from gpu.peaks import sshopm_math as sm
from gpu.peaks.sshopm_block import MAX_WARPS, block_max, seed_slot
from gpu.peaks.sshopm_generated import (
    axm_m2, axm1_m2, climb_m2,
    axm_m4, axm1_m4, climb_m4,
    axm_m6, axm1_m6, climb_m6,
    axm_m8, axm1_m8, climb_m8,
    axm_m10, axm1_m10, climb_m10,
    axm_m12, axm1_m12, climb_m12,
)
from gpu.peaks.sshopm_layout import (
    P_MAX_ITER, P_MAX_STEP, P_REL_THRESHOLD, P_SEED_FRACTION, P_SEED_LOCAL, P_STEP_TOL, P_THRESHOLD, P_TOL_LAMBDA,
    SEED_VOXELS,
)

MAX_STARTS = 256
N_NEIGHBORS = 6

# Fully unrolled code keeps every monomial live: uncapped, many registers a thread. Register caps:
# 64 for the block-per-voxel kernels, where the cap lets 4x more blocks share an SM; 168 for
# the thread-per-climb kernel, the most that fits three 128-thread blocks an SM (65,536 / 384,
# in steps of 8). Each was the fastest cap measured (docs/benchmarks.md, "Measured design
# choices"). The simulator takes no register limit.
SEED_OPTIONS = {"cache": True} if config.ENABLE_CUDASIM else {"cache": True, "max_registers": 64}
CLIMB_OPTIONS = {"cache": True} if config.ENABLE_CUDASIM else {"cache": True, "max_registers": 168}



# ---- order 2: 6 unique entries ----


@cuda.jit(**SEED_OPTIONS)
def seed_cuda_m2(tensors, starts, neighbors, hops, fparams, iparams, seed_slots, n_seeds):
    """Phase 1, one thread per start and SEED_VOXELS voxels a block, one after the other, the
    tensor's unique entries in shared memory (Ballard et al., Sec. III-D): A x^1 and
    A x^2 at every start, then the voxel's seeds in start order (block maximum and seed
    slots: gpu.peaks.sshopm_block). The starts and their neighbour lists are read once a
    block, the lists into shared memory: the seed test reads a neighbour's index, then its
    value, then its step (``hops``, gpu.peaks.sshopm_starts.neighbor_steps), one load
    waiting on the other."""
    # uint64 indices: numba makes a signed index a wraparound test and a range loop a signed
    # count; unsigned, far less integer work (ncu, docs/benchmarks.md)
    t = uint64(cuda.threadIdx.x)
    count = uint64(cuda.blockDim.x)
    a = cuda.shared.array(6, float32)
    near = cuda.shared.array((MAX_STARTS, N_NEIGHBORS), uint32)
    f = cuda.shared.array(MAX_STARTS, float32)
    flag = cuda.shared.array(MAX_STARTS, int32)
    warp_max = cuda.shared.array(MAX_WARPS, float32)
    warp_seeds = cuda.shared.array(MAX_WARPS, uint32)
    x = starts[t, 0]
    y = starts[t, 1]
    z = starts[t, 2]
    for q in range(N_NEIGHBORS):
        # a start with fewer neighbours lists itself in the spare places, which never block it
        near[t, q] = t
        if q < neighbors.shape[1]:
            near[t, q] = neighbors[t, q]
    v = uint64(cuda.blockIdx.x) * uint64(SEED_VOXELS)
    last = min(v + uint64(SEED_VOXELS), uint64(tensors.shape[1]))
    # No barrier is needed between voxels: a thread writes the next voxel's entries only
    # after the previous voxel's last read of them (the barrier after A x^1), and
    # everything else only after the next barrier, which waits for every thread to finish.
    while v < last:
        k = t
        while k < uint64(6):
            a[k] = tensors[k, v]
            k += count
        cuda.syncthreads()
        gx, gy, gz = axm1_m2(a, x, y, z)
        f[t] = gx * x + gy * y + gz * z
        cuda.syncthreads()
        floor = sm.seed_floor(block_max(f, t, count, warp_max), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
        mine = 1 if sm.is_seed(t, x, y, z, f, gx, gy, gz, near, hops, iparams[P_SEED_LOCAL] != 0, floor) else 0
        slot, total = seed_slot(mine, t, count, flag, warp_seeds)
        if mine != 0:
            seed_slots[v, slot] = t
        if t == 0:
            n_seeds[v] = total
        v += uint64(1)


@cuda.jit(**CLIMB_OPTIONS)
def climb_cuda_m2(tensors, starts, seed_slots, first_climb, owners, n_climbs, fparams, iparams, climb_dirs, climb_lams, climb_its, climb_flags):
    """Phase 2, one thread per climb, the climbs of all voxels packed end to end so every
    warp lane climbs (a block per voxel would leave most of a warp's lanes idle here).
    Climb i is voxel v's seed i − first_climb[v], where v = owners[i]
    (gpu.peaks.kernels_cuda.climb_owners); its result goes to slot i. Iterations are
    counted afterwards (gpu.peaks.kernels_cuda.iteration_histogram)."""
    i = cuda.grid(1)
    if i >= n_climbs:
        return
    v = owners[i]
    s = seed_slots[v, i - first_climb[v]]
    a = tensors[:, v]
    x = starts[s, 0]
    y = starts[s, 1]
    z = starts[s, 2]
    x, y, z, lam, its, capped, negdef = climb_m2(
        a, x, y, z, axm_m2(a, x, y, z), fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
        iparams[P_MAX_ITER],
    )
    if z < 0:
        x, y, z = -x, -y, -z
    climb_dirs[i, 0] = x
    climb_dirs[i, 1] = y
    climb_dirs[i, 2] = z
    climb_lams[i] = lam
    climb_its[i] = its
    climb_flags[i] = sm.climb_flags(capped, negdef, lam)


# ---- order 4: 15 unique entries ----


@cuda.jit(**SEED_OPTIONS)
def seed_cuda_m4(tensors, starts, neighbors, hops, fparams, iparams, seed_slots, n_seeds):
    """Phase 1, one thread per start and SEED_VOXELS voxels a block, one after the other, the
    tensor's unique entries in shared memory (Ballard et al., Sec. III-D): A x^3 and
    A x^4 at every start, then the voxel's seeds in start order (block maximum and seed
    slots: gpu.peaks.sshopm_block). The starts and their neighbour lists are read once a
    block, the lists into shared memory: the seed test reads a neighbour's index, then its
    value, then its step (``hops``, gpu.peaks.sshopm_starts.neighbor_steps), one load
    waiting on the other."""
    # uint64 indices: numba makes a signed index a wraparound test and a range loop a signed
    # count; unsigned, far less integer work (ncu, docs/benchmarks.md)
    t = uint64(cuda.threadIdx.x)
    count = uint64(cuda.blockDim.x)
    a = cuda.shared.array(15, float32)
    near = cuda.shared.array((MAX_STARTS, N_NEIGHBORS), uint32)
    f = cuda.shared.array(MAX_STARTS, float32)
    flag = cuda.shared.array(MAX_STARTS, int32)
    warp_max = cuda.shared.array(MAX_WARPS, float32)
    warp_seeds = cuda.shared.array(MAX_WARPS, uint32)
    x = starts[t, 0]
    y = starts[t, 1]
    z = starts[t, 2]
    for q in range(N_NEIGHBORS):
        # a start with fewer neighbours lists itself in the spare places, which never block it
        near[t, q] = t
        if q < neighbors.shape[1]:
            near[t, q] = neighbors[t, q]
    v = uint64(cuda.blockIdx.x) * uint64(SEED_VOXELS)
    last = min(v + uint64(SEED_VOXELS), uint64(tensors.shape[1]))
    # No barrier is needed between voxels: a thread writes the next voxel's entries only
    # after the previous voxel's last read of them (the barrier after A x^3), and
    # everything else only after the next barrier, which waits for every thread to finish.
    while v < last:
        k = t
        while k < uint64(15):
            a[k] = tensors[k, v]
            k += count
        cuda.syncthreads()
        gx, gy, gz = axm1_m4(a, x, y, z)
        f[t] = gx * x + gy * y + gz * z
        cuda.syncthreads()
        floor = sm.seed_floor(block_max(f, t, count, warp_max), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
        mine = 1 if sm.is_seed(t, x, y, z, f, gx, gy, gz, near, hops, iparams[P_SEED_LOCAL] != 0, floor) else 0
        slot, total = seed_slot(mine, t, count, flag, warp_seeds)
        if mine != 0:
            seed_slots[v, slot] = t
        if t == 0:
            n_seeds[v] = total
        v += uint64(1)


@cuda.jit(**CLIMB_OPTIONS)
def climb_cuda_m4(tensors, starts, seed_slots, first_climb, owners, n_climbs, fparams, iparams, climb_dirs, climb_lams, climb_its, climb_flags):
    """Phase 2, one thread per climb, the climbs of all voxels packed end to end so every
    warp lane climbs (a block per voxel would leave most of a warp's lanes idle here).
    Climb i is voxel v's seed i − first_climb[v], where v = owners[i]
    (gpu.peaks.kernels_cuda.climb_owners); its result goes to slot i. Iterations are
    counted afterwards (gpu.peaks.kernels_cuda.iteration_histogram)."""
    i = cuda.grid(1)
    if i >= n_climbs:
        return
    v = owners[i]
    s = seed_slots[v, i - first_climb[v]]
    a = tensors[:, v]
    x = starts[s, 0]
    y = starts[s, 1]
    z = starts[s, 2]
    x, y, z, lam, its, capped, negdef = climb_m4(
        a, x, y, z, axm_m4(a, x, y, z), fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
        iparams[P_MAX_ITER],
    )
    if z < 0:
        x, y, z = -x, -y, -z
    climb_dirs[i, 0] = x
    climb_dirs[i, 1] = y
    climb_dirs[i, 2] = z
    climb_lams[i] = lam
    climb_its[i] = its
    climb_flags[i] = sm.climb_flags(capped, negdef, lam)


# ---- order 6: 28 unique entries ----


@cuda.jit(**SEED_OPTIONS)
def seed_cuda_m6(tensors, starts, neighbors, hops, fparams, iparams, seed_slots, n_seeds):
    """Phase 1, one thread per start and SEED_VOXELS voxels a block, one after the other, the
    tensor's unique entries in shared memory (Ballard et al., Sec. III-D): A x^5 and
    A x^6 at every start, then the voxel's seeds in start order (block maximum and seed
    slots: gpu.peaks.sshopm_block). The starts and their neighbour lists are read once a
    block, the lists into shared memory: the seed test reads a neighbour's index, then its
    value, then its step (``hops``, gpu.peaks.sshopm_starts.neighbor_steps), one load
    waiting on the other."""
    # uint64 indices: numba makes a signed index a wraparound test and a range loop a signed
    # count; unsigned, far less integer work (ncu, docs/benchmarks.md)
    t = uint64(cuda.threadIdx.x)
    count = uint64(cuda.blockDim.x)
    a = cuda.shared.array(28, float32)
    near = cuda.shared.array((MAX_STARTS, N_NEIGHBORS), uint32)
    f = cuda.shared.array(MAX_STARTS, float32)
    flag = cuda.shared.array(MAX_STARTS, int32)
    warp_max = cuda.shared.array(MAX_WARPS, float32)
    warp_seeds = cuda.shared.array(MAX_WARPS, uint32)
    x = starts[t, 0]
    y = starts[t, 1]
    z = starts[t, 2]
    for q in range(N_NEIGHBORS):
        # a start with fewer neighbours lists itself in the spare places, which never block it
        near[t, q] = t
        if q < neighbors.shape[1]:
            near[t, q] = neighbors[t, q]
    v = uint64(cuda.blockIdx.x) * uint64(SEED_VOXELS)
    last = min(v + uint64(SEED_VOXELS), uint64(tensors.shape[1]))
    # No barrier is needed between voxels: a thread writes the next voxel's entries only
    # after the previous voxel's last read of them (the barrier after A x^5), and
    # everything else only after the next barrier, which waits for every thread to finish.
    while v < last:
        k = t
        while k < uint64(28):
            a[k] = tensors[k, v]
            k += count
        cuda.syncthreads()
        gx, gy, gz = axm1_m6(a, x, y, z)
        f[t] = gx * x + gy * y + gz * z
        cuda.syncthreads()
        floor = sm.seed_floor(block_max(f, t, count, warp_max), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
        mine = 1 if sm.is_seed(t, x, y, z, f, gx, gy, gz, near, hops, iparams[P_SEED_LOCAL] != 0, floor) else 0
        slot, total = seed_slot(mine, t, count, flag, warp_seeds)
        if mine != 0:
            seed_slots[v, slot] = t
        if t == 0:
            n_seeds[v] = total
        v += uint64(1)


@cuda.jit(**CLIMB_OPTIONS)
def climb_cuda_m6(tensors, starts, seed_slots, first_climb, owners, n_climbs, fparams, iparams, climb_dirs, climb_lams, climb_its, climb_flags):
    """Phase 2, one thread per climb, the climbs of all voxels packed end to end so every
    warp lane climbs (a block per voxel would leave most of a warp's lanes idle here).
    Climb i is voxel v's seed i − first_climb[v], where v = owners[i]
    (gpu.peaks.kernels_cuda.climb_owners); its result goes to slot i. Iterations are
    counted afterwards (gpu.peaks.kernels_cuda.iteration_histogram)."""
    i = cuda.grid(1)
    if i >= n_climbs:
        return
    v = owners[i]
    s = seed_slots[v, i - first_climb[v]]
    a = tensors[:, v]
    x = starts[s, 0]
    y = starts[s, 1]
    z = starts[s, 2]
    x, y, z, lam, its, capped, negdef = climb_m6(
        a, x, y, z, axm_m6(a, x, y, z), fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
        iparams[P_MAX_ITER],
    )
    if z < 0:
        x, y, z = -x, -y, -z
    climb_dirs[i, 0] = x
    climb_dirs[i, 1] = y
    climb_dirs[i, 2] = z
    climb_lams[i] = lam
    climb_its[i] = its
    climb_flags[i] = sm.climb_flags(capped, negdef, lam)


# ---- order 8: 45 unique entries ----


@cuda.jit(**SEED_OPTIONS)
def seed_cuda_m8(tensors, starts, neighbors, hops, fparams, iparams, seed_slots, n_seeds):
    """Phase 1, one thread per start and SEED_VOXELS voxels a block, one after the other, the
    tensor's unique entries in shared memory (Ballard et al., Sec. III-D): A x^7 and
    A x^8 at every start, then the voxel's seeds in start order (block maximum and seed
    slots: gpu.peaks.sshopm_block). The starts and their neighbour lists are read once a
    block, the lists into shared memory: the seed test reads a neighbour's index, then its
    value, then its step (``hops``, gpu.peaks.sshopm_starts.neighbor_steps), one load
    waiting on the other."""
    # uint64 indices: numba makes a signed index a wraparound test and a range loop a signed
    # count; unsigned, far less integer work (ncu, docs/benchmarks.md)
    t = uint64(cuda.threadIdx.x)
    count = uint64(cuda.blockDim.x)
    a = cuda.shared.array(45, float32)
    near = cuda.shared.array((MAX_STARTS, N_NEIGHBORS), uint32)
    f = cuda.shared.array(MAX_STARTS, float32)
    flag = cuda.shared.array(MAX_STARTS, int32)
    warp_max = cuda.shared.array(MAX_WARPS, float32)
    warp_seeds = cuda.shared.array(MAX_WARPS, uint32)
    x = starts[t, 0]
    y = starts[t, 1]
    z = starts[t, 2]
    for q in range(N_NEIGHBORS):
        # a start with fewer neighbours lists itself in the spare places, which never block it
        near[t, q] = t
        if q < neighbors.shape[1]:
            near[t, q] = neighbors[t, q]
    v = uint64(cuda.blockIdx.x) * uint64(SEED_VOXELS)
    last = min(v + uint64(SEED_VOXELS), uint64(tensors.shape[1]))
    # No barrier is needed between voxels: a thread writes the next voxel's entries only
    # after the previous voxel's last read of them (the barrier after A x^7), and
    # everything else only after the next barrier, which waits for every thread to finish.
    while v < last:
        k = t
        while k < uint64(45):
            a[k] = tensors[k, v]
            k += count
        cuda.syncthreads()
        gx, gy, gz = axm1_m8(a, x, y, z)
        f[t] = gx * x + gy * y + gz * z
        cuda.syncthreads()
        floor = sm.seed_floor(block_max(f, t, count, warp_max), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
        mine = 1 if sm.is_seed(t, x, y, z, f, gx, gy, gz, near, hops, iparams[P_SEED_LOCAL] != 0, floor) else 0
        slot, total = seed_slot(mine, t, count, flag, warp_seeds)
        if mine != 0:
            seed_slots[v, slot] = t
        if t == 0:
            n_seeds[v] = total
        v += uint64(1)


@cuda.jit(**CLIMB_OPTIONS)
def climb_cuda_m8(tensors, starts, seed_slots, first_climb, owners, n_climbs, fparams, iparams, climb_dirs, climb_lams, climb_its, climb_flags):
    """Phase 2, one thread per climb, the climbs of all voxels packed end to end so every
    warp lane climbs (a block per voxel would leave most of a warp's lanes idle here).
    Climb i is voxel v's seed i − first_climb[v], where v = owners[i]
    (gpu.peaks.kernels_cuda.climb_owners); its result goes to slot i. Iterations are
    counted afterwards (gpu.peaks.kernels_cuda.iteration_histogram)."""
    i = cuda.grid(1)
    if i >= n_climbs:
        return
    v = owners[i]
    s = seed_slots[v, i - first_climb[v]]
    a = tensors[:, v]
    x = starts[s, 0]
    y = starts[s, 1]
    z = starts[s, 2]
    x, y, z, lam, its, capped, negdef = climb_m8(
        a, x, y, z, axm_m8(a, x, y, z), fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
        iparams[P_MAX_ITER],
    )
    if z < 0:
        x, y, z = -x, -y, -z
    climb_dirs[i, 0] = x
    climb_dirs[i, 1] = y
    climb_dirs[i, 2] = z
    climb_lams[i] = lam
    climb_its[i] = its
    climb_flags[i] = sm.climb_flags(capped, negdef, lam)


# ---- order 10: 66 unique entries ----


@cuda.jit(**SEED_OPTIONS)
def seed_cuda_m10(tensors, starts, neighbors, hops, fparams, iparams, seed_slots, n_seeds):
    """Phase 1, one thread per start and SEED_VOXELS voxels a block, one after the other, the
    tensor's unique entries in shared memory (Ballard et al., Sec. III-D): A x^9 and
    A x^10 at every start, then the voxel's seeds in start order (block maximum and seed
    slots: gpu.peaks.sshopm_block). The starts and their neighbour lists are read once a
    block, the lists into shared memory: the seed test reads a neighbour's index, then its
    value, then its step (``hops``, gpu.peaks.sshopm_starts.neighbor_steps), one load
    waiting on the other."""
    # uint64 indices: numba makes a signed index a wraparound test and a range loop a signed
    # count; unsigned, far less integer work (ncu, docs/benchmarks.md)
    t = uint64(cuda.threadIdx.x)
    count = uint64(cuda.blockDim.x)
    a = cuda.shared.array(66, float32)
    near = cuda.shared.array((MAX_STARTS, N_NEIGHBORS), uint32)
    f = cuda.shared.array(MAX_STARTS, float32)
    flag = cuda.shared.array(MAX_STARTS, int32)
    warp_max = cuda.shared.array(MAX_WARPS, float32)
    warp_seeds = cuda.shared.array(MAX_WARPS, uint32)
    x = starts[t, 0]
    y = starts[t, 1]
    z = starts[t, 2]
    for q in range(N_NEIGHBORS):
        # a start with fewer neighbours lists itself in the spare places, which never block it
        near[t, q] = t
        if q < neighbors.shape[1]:
            near[t, q] = neighbors[t, q]
    v = uint64(cuda.blockIdx.x) * uint64(SEED_VOXELS)
    last = min(v + uint64(SEED_VOXELS), uint64(tensors.shape[1]))
    # No barrier is needed between voxels: a thread writes the next voxel's entries only
    # after the previous voxel's last read of them (the barrier after A x^9), and
    # everything else only after the next barrier, which waits for every thread to finish.
    while v < last:
        k = t
        while k < uint64(66):
            a[k] = tensors[k, v]
            k += count
        cuda.syncthreads()
        gx, gy, gz = axm1_m10(a, x, y, z)
        f[t] = gx * x + gy * y + gz * z
        cuda.syncthreads()
        floor = sm.seed_floor(block_max(f, t, count, warp_max), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
        mine = 1 if sm.is_seed(t, x, y, z, f, gx, gy, gz, near, hops, iparams[P_SEED_LOCAL] != 0, floor) else 0
        slot, total = seed_slot(mine, t, count, flag, warp_seeds)
        if mine != 0:
            seed_slots[v, slot] = t
        if t == 0:
            n_seeds[v] = total
        v += uint64(1)


@cuda.jit(**CLIMB_OPTIONS)
def climb_cuda_m10(tensors, starts, seed_slots, first_climb, owners, n_climbs, fparams, iparams, climb_dirs, climb_lams, climb_its, climb_flags):
    """Phase 2, one thread per climb, the climbs of all voxels packed end to end so every
    warp lane climbs (a block per voxel would leave most of a warp's lanes idle here).
    Climb i is voxel v's seed i − first_climb[v], where v = owners[i]
    (gpu.peaks.kernels_cuda.climb_owners); its result goes to slot i. Iterations are
    counted afterwards (gpu.peaks.kernels_cuda.iteration_histogram)."""
    i = cuda.grid(1)
    if i >= n_climbs:
        return
    v = owners[i]
    s = seed_slots[v, i - first_climb[v]]
    a = tensors[:, v]
    x = starts[s, 0]
    y = starts[s, 1]
    z = starts[s, 2]
    x, y, z, lam, its, capped, negdef = climb_m10(
        a, x, y, z, axm_m10(a, x, y, z), fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
        iparams[P_MAX_ITER],
    )
    if z < 0:
        x, y, z = -x, -y, -z
    climb_dirs[i, 0] = x
    climb_dirs[i, 1] = y
    climb_dirs[i, 2] = z
    climb_lams[i] = lam
    climb_its[i] = its
    climb_flags[i] = sm.climb_flags(capped, negdef, lam)


# ---- order 12: 91 unique entries ----


@cuda.jit(**SEED_OPTIONS)
def seed_cuda_m12(tensors, starts, neighbors, hops, fparams, iparams, seed_slots, n_seeds):
    """Phase 1, one thread per start and SEED_VOXELS voxels a block, one after the other, the
    tensor's unique entries in shared memory (Ballard et al., Sec. III-D): A x^11 and
    A x^12 at every start, then the voxel's seeds in start order (block maximum and seed
    slots: gpu.peaks.sshopm_block). The starts and their neighbour lists are read once a
    block, the lists into shared memory: the seed test reads a neighbour's index, then its
    value, then its step (``hops``, gpu.peaks.sshopm_starts.neighbor_steps), one load
    waiting on the other."""
    # uint64 indices: numba makes a signed index a wraparound test and a range loop a signed
    # count; unsigned, far less integer work (ncu, docs/benchmarks.md)
    t = uint64(cuda.threadIdx.x)
    count = uint64(cuda.blockDim.x)
    a = cuda.shared.array(91, float32)
    near = cuda.shared.array((MAX_STARTS, N_NEIGHBORS), uint32)
    f = cuda.shared.array(MAX_STARTS, float32)
    flag = cuda.shared.array(MAX_STARTS, int32)
    warp_max = cuda.shared.array(MAX_WARPS, float32)
    warp_seeds = cuda.shared.array(MAX_WARPS, uint32)
    x = starts[t, 0]
    y = starts[t, 1]
    z = starts[t, 2]
    for q in range(N_NEIGHBORS):
        # a start with fewer neighbours lists itself in the spare places, which never block it
        near[t, q] = t
        if q < neighbors.shape[1]:
            near[t, q] = neighbors[t, q]
    v = uint64(cuda.blockIdx.x) * uint64(SEED_VOXELS)
    last = min(v + uint64(SEED_VOXELS), uint64(tensors.shape[1]))
    # No barrier is needed between voxels: a thread writes the next voxel's entries only
    # after the previous voxel's last read of them (the barrier after A x^11), and
    # everything else only after the next barrier, which waits for every thread to finish.
    while v < last:
        k = t
        while k < uint64(91):
            a[k] = tensors[k, v]
            k += count
        cuda.syncthreads()
        gx, gy, gz = axm1_m12(a, x, y, z)
        f[t] = gx * x + gy * y + gz * z
        cuda.syncthreads()
        floor = sm.seed_floor(block_max(f, t, count, warp_max), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
        mine = 1 if sm.is_seed(t, x, y, z, f, gx, gy, gz, near, hops, iparams[P_SEED_LOCAL] != 0, floor) else 0
        slot, total = seed_slot(mine, t, count, flag, warp_seeds)
        if mine != 0:
            seed_slots[v, slot] = t
        if t == 0:
            n_seeds[v] = total
        v += uint64(1)


@cuda.jit(**CLIMB_OPTIONS)
def climb_cuda_m12(tensors, starts, seed_slots, first_climb, owners, n_climbs, fparams, iparams, climb_dirs, climb_lams, climb_its, climb_flags):
    """Phase 2, one thread per climb, the climbs of all voxels packed end to end so every
    warp lane climbs (a block per voxel would leave most of a warp's lanes idle here).
    Climb i is voxel v's seed i − first_climb[v], where v = owners[i]
    (gpu.peaks.kernels_cuda.climb_owners); its result goes to slot i. Iterations are
    counted afterwards (gpu.peaks.kernels_cuda.iteration_histogram)."""
    i = cuda.grid(1)
    if i >= n_climbs:
        return
    v = owners[i]
    s = seed_slots[v, i - first_climb[v]]
    a = tensors[:, v]
    x = starts[s, 0]
    y = starts[s, 1]
    z = starts[s, 2]
    x, y, z, lam, its, capped, negdef = climb_m12(
        a, x, y, z, axm_m12(a, x, y, z), fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
        iparams[P_MAX_ITER],
    )
    if z < 0:
        x, y, z = -x, -y, -z
    climb_dirs[i, 0] = x
    climb_dirs[i, 1] = y
    climb_dirs[i, 2] = z
    climb_lams[i] = lam
    climb_its[i] = its
    climb_flags[i] = sm.climb_flags(capped, negdef, lam)
