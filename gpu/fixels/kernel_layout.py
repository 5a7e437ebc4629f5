"""How the FMLS kernels of :mod:`gpu.fixels.kernels_cuda` are launched and pass lobes to one
another: lobes a voxel has room for, voxels a block, threads a block. Apart from the kernels,
so that a launch from cached cubins (:mod:`gpu.fixels.backend_cuda`) needs no numba."""

from __future__ import annotations

__all__ = ["MAX_LOBES", "SAMPLE_VOXELS", "VOXELS", "WARP", "N_DIRS", "SPLIT_BLOCK", "FIRST_NEWTON_STEPS"]

#: Lobes a voxel has room for in the lobe scratch; a voxel seeding more is redone on the CPU
#: (≤ 64: the sweep numbers its provisional lobes from 64, and a lane sums two lobes).
MAX_LOBES = 64
#: Voxels of a block of the grow kernel, a warp each: two take 13,384 B of shared memory, room
#: for 16 blocks (32 warps) an SM of sm_90, as its 64 registers a thread; the fewer a block,
#: the less its warps wait for one another at its barriers.
VOXELS = 2
#: Voxels a block of the sampling kernel, four a warp.
SAMPLE_VOXELS = 16
#: Threads of a warp: a voxel's in the lobe-growing kernel.
WARP = 32
#: The directions FMLS samples each FOD on (gpu.fixels.directions_1281).
N_DIRS = 1281
#: Threads a block of the lobe and voxel kernels.
SPLIT_BLOCK = 128
#: Newton steps a lobe takes in the first refinement pass; the lobes still climbing go on in a
#: second pass, packed, so that a warp no longer waits the full step cap for its slowest lane.
FIRST_NEWTON_STEPS = 15
