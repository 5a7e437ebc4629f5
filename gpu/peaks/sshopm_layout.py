"""Positions in the small parameter and statistics arrays the SS-HOPM kernels share, and the
values host and device code must agree on.

Kernels take their scalar settings as two arrays (floats in the working precision, ints) so
one compiled kernel serves every setting; these names keep host and device code in step.
Plain constants, no numba: the host side imports them without loading the kernels.
"""

__all__ = [
    "P_TOL_LAMBDA", "P_STEP_TOL", "P_MAX_STEP", "P_COS_MERGE", "P_THRESHOLD", "P_REL_THRESHOLD", "P_SEED_FRACTION",
    "P_COS_BASIN", "N_FPARAMS",
    "P_MAX_ITER", "P_SHIFT", "P_NEWTON", "P_SEED_LOCAL", "P_NPEAKS", "P_BOUNDED", "N_IPARAMS",
    "S_ITERATIONS", "S_MAX_ITERATIONS", "S_SEEDS", "S_CAPPED", "S_SKIPPED", "S_MERGED", "N_STATS", "HIST_BINS",
    "CLIMB_CAPPED", "CLIMB_PEAK", "CLIMB_MERGED", "SHIFT_ADAPTIVE", "SHIFT_FIXED", "SEED_VOXELS", "CONVERT_VOXELS",
    "CONVERT_WARPS", "in_two_passes",
]

# float parameters
P_TOL_LAMBDA = 0
P_STEP_TOL = 1
P_MAX_STEP = 2
P_COS_MERGE = 3
P_THRESHOLD = 4
P_REL_THRESHOLD = 5
P_SEED_FRACTION = 6
P_COS_BASIN = 7
N_FPARAMS = 8

# integer parameters
P_MAX_ITER = 0
P_SHIFT = 1  # SHIFT_ADAPTIVE or SHIFT_FIXED
P_NEWTON = 2
P_SEED_LOCAL = 3
P_NPEAKS = 4
P_BOUNDED = 5
N_IPARAMS = 6

# values of iparams[P_SHIFT]
SHIFT_ADAPTIVE = 0
SHIFT_FIXED = 1

# per-voxel statistics (int32)
S_ITERATIONS = 0
S_MAX_ITERATIONS = 1
S_SEEDS = 2
S_CAPPED = 3
S_SKIPPED = 4
S_MERGED = 5
N_STATS = 6

# iterations-per-start histogram; the last bin collects everything beyond
HIST_BINS = 128

# voxels one block of the CUDA seed kernels takes, one after the other (its grid: voxels / this)
SEED_VOXELS = 16

# voxels one block of the CUDA SH→tensor kernel converts (a warp's lanes), and its warps
CONVERT_VOXELS = 32
CONVERT_WARPS = 8

# per-climb flags (CUDA phase 2 → phase 3)
CLIMB_CAPPED = 1
CLIMB_PEAK = 2
# stopped inside a found peak's basin (gpu.peaks.sshopm_math.in_found_basin)
CLIMB_MERGED = 4


def in_two_passes(bounded, cos_basin):
    """Whether seeds climb in two passes, ranked by start value: when the later ones are
    bounded (gpu.peaks.sshopm_math.later_seed_floor) or stop in found basins
    (gpu.peaks.sshopm_math.in_found_basin, cos_basin ≤ 1). Otherwise every seed climbs at
    once, in start order."""
    return bounded != 0 or cos_basin <= 1
