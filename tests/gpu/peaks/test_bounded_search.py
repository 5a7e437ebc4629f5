"""The bounded search (PeaksOptions.bounded, .basin_angle): the unbounded search's peaks from
fewer climbs and iterations on noisy FODs, the same rule in the CUDA kernels (simulator) as
in the CPU backend, and the floor it climbs later seeds above
(gpu.peaks.sshopm_math.later_seed_floor)."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import PeaksOptions, sshopm_peaks
from gpu.peaks.sshopm_layout import CLIMB_CAPPED, CLIMB_PEAK
from gpu.peaks.sshopm_math import in_found_basin, later_seed_floor

BOUNDED = PeaksOptions(bounded=True, basin_angle=5.0)
BASIN_ONLY = PeaksOptions(basin_angle=5.0)
UNBOUNDED = PeaksOptions()


@functools.cache
def noisy_sh(relative_noise: float, seed: int, shape: tuple[int, ...] = (20, 20, 10), lmax: int = 8) -> np.ndarray:
    return fod_phantom(shape, lmax, relative_noise=relative_noise, seed=seed)["sh"]


def axis_angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angles (degrees) between unit axes, from the cross product: float32 arccos of a dot
    product near 1 cannot resolve 1e-5°."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return np.degrees(np.arcsin(np.clip(np.linalg.norm(np.cross(a, b), axis=-1), 0.0, 1.0)))


def assert_same_peaks(got, expected, amplitude_rtol: float) -> None:
    np.testing.assert_array_equal(got.count, expected.count)
    np.testing.assert_array_equal(np.isnan(got.amplitudes), np.isnan(expected.amplitudes))
    present = np.isfinite(expected.amplitudes)
    assert axis_angles(got.directions[present], expected.directions[present]).max(initial=0.0) <= 1e-5
    np.testing.assert_allclose(got.amplitudes[present], expected.amplitudes[present], rtol=amplitude_rtol)


# Every voxel of 4,000-voxel lmax-8 phantoms with noise of 10 % and 30 % of each voxel's
# l = 0 coefficient on every coefficient, two noise draws each, and the clean phantom. On
# larger noisy volumes the bound changed the third peak of ~3 in 100,000 voxels (a shoulder
# the unbounded search reached only from far lower seeds; docs/benchmarks.md).
@pytest.mark.parametrize("relative_noise", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("seed", [0, 1])
def test_bounded_search_reports_the_unbounded_peaks_on_noisy_phantoms(relative_noise, seed):
    sh = noisy_sh(relative_noise, seed)
    unbounded = sshopm_peaks(sh, options=UNBOUNDED, backend="cpu")
    bounded = sshopm_peaks(sh, options=BOUNDED, backend="cpu")
    assert_same_peaks(bounded, unbounded, amplitude_rtol=1e-12)
    u, b = unbounded.stats, bounded.stats
    voxels = b["voxels_processed"]
    # Every seed either climbs or is skipped by the bound, and no climb is added.
    assert b["starts_climbed_per_voxel"] * voxels + b["starts_skipped_by_bound"] == pytest.approx(
        u["starts_climbed_per_voxel"] * voxels)
    assert u["starts_skipped_by_bound"] == 0
    assert b["starts_skipped_by_bound"] >= 0.1 * u["starts_climbed_per_voxel"] * voxels
    assert b["starts_hit_cap"] <= u["starts_hit_cap"]
    assert u["climbs_stopped_at_found_peaks"] == 0 < b["climbs_stopped_at_found_peaks"]
    assert b["iterations_total"] < 0.9 * u["iterations_total"]
    print(f"\nrelative noise {relative_noise}, seed {seed}: climbs per voxel {u['starts_climbed_per_voxel']:.2f} -> "
          f"{b['starts_climbed_per_voxel']:.2f}, iterations {u['iterations_total']} -> {b['iterations_total']}, "
          f"capped {u['starts_hit_cap']} -> {b['starts_hit_cap']}")


# The basin stop alone skips no seed, so it holds at 50 % noise too.
def test_basin_stop_reports_the_unbounded_peaks_at_high_noise():
    sh = noisy_sh(0.5, 0)
    unbounded = sshopm_peaks(sh, options=UNBOUNDED, backend="cpu")
    basin = sshopm_peaks(sh, options=BASIN_ONLY, backend="cpu")
    assert_same_peaks(basin, unbounded, amplitude_rtol=1e-12)
    assert basin.stats["starts_climbed_per_voxel"] == unbounded.stats["starts_climbed_per_voxel"]
    assert basin.stats["starts_skipped_by_bound"] == 0
    # Each stopped climb saves its last iterations.
    assert basin.stats["climbs_stopped_at_found_peaks"] > 0
    assert basin.stats["iterations_total"] < unbounded.stats["iterations_total"]


def test_bounded_search_on_noisy_lmax_6_and_10():
    for lmax in (6, 10):
        sh = fod_phantom((12, 12, 8), lmax, relative_noise=0.2, seed=lmax)["sh"]
        bounded = sshopm_peaks(sh, options=BOUNDED, backend="cpu")
        assert_same_peaks(bounded, sshopm_peaks(sh, options=UNBOUNDED, backend="cpu"), amplitude_rtol=1e-12)
        assert bounded.stats["starts_skipped_by_bound"] > 0


# 64 starts, 5 noisy voxels: the simulator runs a Python thread per CUDA thread.
def test_cuda_kernels_in_simulator_bound_as_the_cpu_backend():
    sh = noisy_sh(0.3, 2).reshape(-1, 45)[:5]
    options = PeaksOptions(starts=64, bounded=True, basin_angle=5.0)
    gpu = sshopm_peaks(sh, options=options, backend="cuda")
    cpu = sshopm_peaks(sh, options=options, backend="cpu")
    gpu_unbounded = sshopm_peaks(sh, options=PeaksOptions(starts=64), backend="cuda")
    assert gpu.stats["backend"] == "cuda"
    assert_same_peaks(gpu, cpu, amplitude_rtol=1e-5)
    # float32: a skipped duplicate climb of a peak may have ended a rounding error higher.
    assert_same_peaks(gpu, gpu_unbounded, amplitude_rtol=1e-5)
    # The same seeds climb and the same are skipped in float32 and float64.
    assert gpu.stats["starts_skipped_by_bound"] == cpu.stats["starts_skipped_by_bound"] > 0
    assert gpu.stats["starts_climbed_per_voxel"] == cpu.stats["starts_climbed_per_voxel"]
    assert gpu.stats["climbs_stopped_at_found_peaks"] == cpu.stats["climbs_stopped_at_found_peaks"]
    # both passes' climbs in the iteration histogram, once each, with their iterations
    climbs = gpu.stats["starts_climbed_per_voxel"] * gpu.stats["voxels_processed"]
    assert gpu.stats["iterations_per_climb"]["mean"] * climbs == pytest.approx(gpu.stats["iterations_total"], rel=1e-12)


def unit(theta_deg: float, phi_deg: float = 0.0) -> tuple[float, float, float]:
    t, p = math.radians(theta_deg), math.radians(phi_deg)
    return math.sin(t) * math.cos(p), math.sin(t) * math.sin(p), math.cos(t)


def floor_of(directions, lam, valid, npeaks=3, merge_angle=2.0, seed_fraction=0.5) -> float:
    d = np.array(directions, np.float64)
    n = len(lam)
    return later_seed_floor(n, d[:, 0], d[:, 1], d[:, 2], np.array(lam, np.float64), np.array(valid, np.int32),
                            np.zeros(n, np.int32), math.cos(math.radians(merge_angle)), npeaks, seed_fraction)


def test_later_seed_floor_is_seed_fraction_of_the_kth_distinct_peak():
    # Four distinct peaks, the third largest 0.6: later seeds need 0.5 x 0.6.
    directions = [unit(0), unit(60), unit(90, 90), unit(45, 200)]
    assert floor_of(directions, [1.0, 0.8, 0.6, 0.3], [1, 1, 1, 1]) == pytest.approx(0.3)
    # A duplicate (1° from the first peak) and an invalid climb do not count as peaks.
    directions = [unit(0), unit(1), unit(60), unit(90, 90)]
    assert floor_of(directions, [1.0, 0.9, 0.6, 0.7], [1, 1, 1, 0]) == 0.0
    assert floor_of(directions, [1.0, 0.9, 0.6, 0.7], [1, 1, 1, 1]) == pytest.approx(0.5 * 0.6)
    # Two distinct peaks within twice the merge angle (3° apart): one later peak between
    # them could merge both away, so the K-th peak sets no floor.
    directions = [unit(0), unit(3), unit(60)]
    assert floor_of(directions, [1.0, 0.9, 0.6], [1, 1, 1]) == 0.0
    assert floor_of(directions, [1.0, 0.9, 0.6], [1, 1, 1], merge_angle=1.0) == pytest.approx(0.3)


def test_in_found_basin_needs_a_higher_found_peak_within_the_angle():
    peaks = np.array([unit(0), unit(60)])
    lam = np.array([1.0, 0.5])
    flags = np.array([CLIMB_PEAK, CLIMB_PEAK], np.int32)
    cos5 = math.cos(math.radians(5.0))

    def inside(direction, value, flags=flags):
        return in_found_basin(*direction, value, 2, peaks[:, 0], peaks[:, 1], peaks[:, 2], lam, flags, cos5)

    assert inside(unit(4), 0.9)
    assert inside(unit(180 - 4), 0.9)  # the antipode is the same axis
    assert not inside(unit(6), 0.9)  # outside the angle
    assert not inside(unit(4), 1.1)  # higher than the found peak: it may be a higher maximum
    assert inside(unit(62), 0.4)
    assert not inside(unit(4), 0.9, np.array([CLIMB_CAPPED, CLIMB_PEAK], np.int32))  # the first climb hit the cap
