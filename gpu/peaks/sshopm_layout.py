"""Positions in the small parameter and statistics arrays the SS-HOPM kernels share, and the
values host and device code must agree on.

Kernels take their scalar settings as two arrays (floats in the working precision, ints) so
one compiled kernel serves every setting; these names keep host and device code in step.
Plain constants, no numba: the host side imports them without loading the kernels.
"""

__all__ = [
    "P_TOL_LAMBDA", "P_STEP_TOL", "P_MAX_STEP", "P_COS_MERGE", "P_THRESHOLD", "P_REL_THRESHOLD", "P_SEED_FRACTION",
    "N_FPARAMS", "P_MAX_ITER", "P_SEED_LOCAL", "P_NPEAKS", "N_IPARAMS",
    "S_ITERATIONS", "S_MAX_ITERATIONS", "S_SEEDS", "S_CAPPED", "N_STATS", "HIST_BINS",
    "CLIMB_CAPPED", "CLIMB_PEAK", "SEED_VOXELS", "CONVERT_VOXELS", "CONVERT_WARPS",
]

# float parameters
P_TOL_LAMBDA = 0
P_STEP_TOL = 1
P_MAX_STEP = 2
P_COS_MERGE = 3
P_THRESHOLD = 4
P_REL_THRESHOLD = 5
P_SEED_FRACTION = 6
N_FPARAMS = 7

# integer parameters
P_MAX_ITER = 0
P_SEED_LOCAL = 1
P_NPEAKS = 2
N_IPARAMS = 3

# per-voxel statistics (int32)
S_ITERATIONS = 0
S_MAX_ITERATIONS = 1
S_SEEDS = 2
S_CAPPED = 3
N_STATS = 4

# iterations-per-start histogram; the last bin collects everything beyond
HIST_BINS = 128

# voxels one block of the CUDA seed kernels takes, one after the other (its grid: voxels / this)
SEED_VOXELS = 16

# voxels one block of the CUDA SH→tensor kernel converts (a warp's lanes), and its warps
CONVERT_VOXELS = 32
CONVERT_WARPS = 8

# per-climb flags (CUDA climb kernel → select kernel)
CLIMB_CAPPED = 1
CLIMB_PEAK = 2
