"""sshopm_peaks: CUDA kernel (simulator) vs CPU backend, accuracy vs ground truth and vs the
exact float64 maxima, masks and bad voxels, options, seeding variants, the iteration cap."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from gpu.peaks.peak_matching import exact_peak_offsets, match_peaks
from gpu.peaks.search import _FINITE_GROUP, PeaksOptions, _finite_by_sums, finite_voxels, sshopm_peaks
from gpu.peaks.symmetric_tensor import sh_to_tensor, tensor_value


@functools.cache
def phantom(shape: tuple[int, ...], lmax: int, seed: int = 0) -> dict[str, np.ndarray]:
    return fod_phantom(shape, lmax, seed=seed)


@functools.cache
def default_peaks(shape: tuple[int, ...], lmax: int):
    return sshopm_peaks(phantom(shape, lmax)["sh"], backend="cpu")


def angles_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angles (degrees) between axes a and b (..., 3), antipodes identified."""
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    return np.degrees(np.arccos(np.clip(np.abs((a * b).sum(-1)), 0.0, 1.0)))


def assert_same_peaks(got, expected, direction_atol: float, amplitude_rtol: float) -> None:
    np.testing.assert_array_equal(got.count, expected.count)
    np.testing.assert_array_equal(np.isnan(got.amplitudes), np.isnan(expected.amplitudes))
    np.testing.assert_array_equal(np.isnan(got.directions), np.isnan(expected.directions))
    present = np.isfinite(expected.amplitudes)
    np.testing.assert_allclose(got.directions[present], expected.directions[present], rtol=0, atol=direction_atol)
    np.testing.assert_allclose(got.amplitudes[present], expected.amplitudes[present], rtol=amplitude_rtol)


# 50 starts: a block whose last warp is partial; 6 voxels: a select block with idle warps.
# 32 starts (whole warps) at lmax 4 and 50 starts at lmax 8 cover both block shapes.
@pytest.mark.parametrize("lmax, starts", [(4, 32), pytest.param(8, 32, marks=pytest.mark.slow), (8, 50)])
def test_cuda_kernel_in_simulator_equals_cpu_backend(lmax, starts):
    truth = phantom((4, 4, 4), lmax, seed=3)
    flat = truth["sh"].reshape(-1, truth["sh"].shape[-1])
    counts = truth["count"].reshape(-1)
    # Two voxels each of one, two and three fibers.
    pick = np.concatenate([np.flatnonzero(counts == k)[:2] for k in (1, 2, 3)])
    sh = flat[pick]
    options = PeaksOptions(starts=starts)
    gpu = sshopm_peaks(sh, options=options, backend="cuda")
    cpu = sshopm_peaks(sh, options=options, backend="cpu")
    assert gpu.stats["backend"] == "cuda" and cpu.stats["backend"] == "cpu"
    assert gpu.count.sum() >= len(pick)
    assert_same_peaks(gpu, cpu, direction_atol=1e-5, amplitude_rtol=1e-5)
    # Same climbs from the same seeds; iteration counts may differ by float32 rounding.
    assert gpu.stats["starts_climbed_per_voxel"] == cpu.stats["starts_climbed_per_voxel"]
    assert gpu.stats["starts_hit_cap"] == cpu.stats["starts_hit_cap"] == 0
    # the iteration histogram (iteration_histogram) counts every climb once, with its iterations
    climbs = gpu.stats["starts_climbed_per_voxel"] * gpu.stats["voxels_processed"]
    assert gpu.stats["iterations_per_climb"]["mean"] * climbs == pytest.approx(gpu.stats["iterations_total"], rel=1e-12)
    print(f"\nlmax {lmax}, {starts} starts: CUDA (simulator) vs CPU on {len(pick)} voxels, counts {gpu.count.tolist()}, "
          f"max |Δdirection| {np.nanmax(np.abs(gpu.directions - cpu.directions)):.1e}, "
          f"max relative |Δamplitude| {np.nanmax(np.abs(gpu.amplitudes / cpu.amplitudes - 1)):.1e}")


def test_accuracy_against_ground_truth_on_a_phantom():
    shape = (12, 12, 12)
    truth = phantom(shape, 8)
    result = default_peaks(shape, 8)
    matched = match_peaks(result.directions, result.count, truth["directions"], truth["count"])
    print(f"\n12³ lmax-8 phantom: fiber count right in {matched['count_agreement']:.4f} of voxels, angular error "
          f"mean {matched['mean_error']:.3f}°, p95 {matched['p95_error']:.3f}°, max {matched['errors'].max():.3f}°")
    assert matched["count_agreement"] >= 0.99
    assert matched["mean_error"] < 1.0
    assert matched["p95_error"] < 2.5
    assert result.stats["starts_hit_cap"] == 0
    assert result.stats["voxels_processed"] == 12**3 and result.stats["nonfinite_voxels"] == 0
    assert result.directions.shape == (*shape, 3, 3) and result.amplitudes.shape == (*shape, 3)
    assert result.count.shape == shape and result.count.dtype == np.uint8


def test_every_peak_is_an_exact_local_maximum():
    shape = (12, 12, 12)
    truth = phantom(shape, 8)
    result = default_peaks(shape, 8)
    flat = truth["sh"].reshape(-1, 45)
    entries = sh_to_tensor(flat)
    directions = result.directions.reshape(-1, 3, 3)
    amplitudes = result.amplitudes.reshape(-1, 3)
    count = result.count.reshape(-1)
    offsets = exact_peak_offsets(entries, directions, count, 8)
    assert offsets.size == int(count.sum())
    print(f"\nlargest offset of {offsets.size} peaks from the exact maximum: {offsets.max():.2e}°")
    assert offsets.max() < 0.01
    # Amplitudes are the FOD values at the directions, sorted, above the relative threshold,
    # and peaks within a voxel are distinct axes; NaN past the count.
    for v in range(flat.shape[0]):
        k = int(count[v])
        assert np.isnan(amplitudes[v, k:]).all() and np.isnan(directions[v, k:]).all()
        d = directions[v, :k].astype(np.float64)
        np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-12)
        assert (d[:, 2] >= 0).all()
        np.testing.assert_allclose(amplitudes[v, :k], tensor_value(entries[v], d), rtol=1e-6)
        assert (np.diff(amplitudes[v, :k]) <= 0).all()
        assert (amplitudes[v, :k] >= 0.1 * amplitudes[v, 0]).all()
        for i in range(k):
            for j in range(i):
                assert angles_between(d[i], d[j]) > 2.0


def test_mask_leaves_masked_voxels_empty_and_others_unchanged():
    shape = (6, 6, 6)
    sh = phantom(shape, 8, seed=5)["sh"]
    mask = np.random.default_rng(0).random(shape) < 0.5
    full = sshopm_peaks(sh, backend="cpu")
    masked = sshopm_peaks(sh, mask=mask, backend="cpu")
    assert masked.stats["voxels_processed"] == int(mask.sum()) and masked.stats["voxels"] == 216
    assert (masked.count[~mask] == 0).all()
    assert np.isnan(masked.directions[~mask]).all() and np.isnan(masked.amplitudes[~mask]).all()
    np.testing.assert_array_equal(masked.count[mask], full.count[mask])
    np.testing.assert_array_equal(masked.directions[mask], full.directions[mask])
    np.testing.assert_array_equal(masked.amplitudes[mask], full.amplitudes[mask])
    # A non-boolean mask counts non-zero as inside.
    numeric = sshopm_peaks(sh, mask=mask.astype(np.float32) * 3.0, backend="cpu")
    np.testing.assert_array_equal(numeric.count, masked.count)


def test_nonfinite_voxels_give_nan_peaks_and_are_counted():
    shape = (5, 5, 5)
    sh = phantom(shape, 8, seed=6)["sh"].copy()
    clean = sshopm_peaks(sh, backend="cpu")
    bad = np.zeros(shape, bool)
    sh[0, 0, 0, 0] = np.nan
    sh[1, 2, 3, 17] = np.inf
    sh[4, 4, 4, :] = -np.inf
    sh[2, 2, 2, 44] = np.nan
    bad[0, 0, 0] = bad[1, 2, 3] = bad[4, 4, 4] = bad[2, 2, 2] = True
    result = sshopm_peaks(sh, backend="cpu")
    assert result.stats["nonfinite_voxels"] == 4
    assert result.stats["voxels_processed"] == 125 - 4
    assert (result.count[bad] == 0).all()
    assert np.isnan(result.directions[bad]).all() and np.isnan(result.amplitudes[bad]).all()
    np.testing.assert_array_equal(result.count[~bad], clean.count[~bad])
    np.testing.assert_array_equal(result.directions[~bad], clean.directions[~bad])
    # A non-finite voxel outside the mask is masked, not counted.
    mask = np.ones(shape, bool)
    mask[0, 0, 0] = False
    masked = sshopm_peaks(sh, mask=mask, backend="cpu")
    assert masked.stats["nonfinite_voxels"] == 3
    # All voxels bad: an empty run, not a crash.
    nothing = sshopm_peaks(np.full((2, 2, 45), np.nan, np.float32), backend="cpu")
    assert nothing.stats["nonfinite_voxels"] == 4 and (nothing.count == 0).all()
    assert nothing.stats["starts_climbed_per_voxel"] == 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_finite_voxels_match_a_coefficient_by_coefficient_check(dtype, order):
    """finite_voxels against np.isfinite of every coefficient, including voxels of finite
    values whose sum overflows the dtype (finite, whatever the sum says)."""
    big = np.finfo(dtype).max
    sh = np.asarray(phantom((4, 3, 5), 4, seed=2)["sh"], dtype=dtype, order=order)
    sh[0, 0, 0, :] = big  # sums to inf, all finite
    sh[0, 1, 0, :2] = (big, -big)
    sh[1, 1, 1, 3] = np.nan
    sh[2, 0, 4, 0] = np.inf
    sh[3, 2, 2, :2] = (np.inf, -np.inf)  # sums to NaN
    sh[3, 0, 1, 14] = -np.inf
    sh[2, 2, 2, :] = np.nan
    expected = np.isfinite(sh).all(axis=-1)
    assert expected.sum() == 60 - 5
    np.testing.assert_array_equal(finite_voxels(sh), expected)
    np.testing.assert_array_equal(finite_voxels(sh[1, 1, 1]), False)  # one voxel: (n_coeffs,)
    np.testing.assert_array_equal(finite_voxels(sh[0, 0, 0]), True)


def in_layout(values: np.ndarray, layout: str) -> np.ndarray:
    """``values`` (..., n_coeffs) laid out in memory as ``layout`` says: C order, NIfTI's
    (F), MRtrix's as dwi2fod writes it (each voxel's coefficients together, x fastest), or
    a strided view (every other voxel of a larger array)."""
    if layout == "MRtrix":
        return np.moveaxis(np.asfortranarray(np.moveaxis(values, -1, 0)), 0, -1)
    if layout == "strided":
        larger = np.zeros((*(2 * n for n in values.shape[:-1]), values.shape[-1]), values.dtype)
        larger[::2, ::2, ::2] = values
        return larger[::2, ::2, ::2]
    return np.asarray(values, order=layout)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["C", "F", "MRtrix", "strided"])
def test_finite_voxels_in_every_layout_are_those_of_one_sum_a_voxel(layout, dtype):
    """finite_voxels, which sums groups of voxels where each voxel's coefficients lie
    together, against the one-sum-a-voxel formula it replaced there and np.isfinite of every
    coefficient, with non-finite values in whole groups and past the last one, and finite
    voxels whose group's sum (or their own) overflows."""
    big = np.finfo(dtype).max
    shape = (9, 7, 5)  # 315 voxels: whole groups and a partial one, in either voxel order
    assert 315 % _FINITE_GROUP and 315 > 4 * _FINITE_GROUP
    values = np.array(phantom(shape, 4, seed=5)["sh"], dtype=dtype)
    rng = np.random.default_rng(3)
    flat = values.reshape(-1, values.shape[-1])
    for voxel, bad in zip(rng.choice(flat.shape[0], 24, replace=False), [np.nan, np.inf, -np.inf] * 8):
        flat[voxel, rng.integers(flat.shape[1])] = bad
    values[0, 0, 0, :2] = (np.inf, -np.inf)  # sums to NaN
    values[8, 6, 4] = np.nan  # the last voxel in either order
    values[4, 3, 2, :] = big  # finite, its sum overflows
    values[1, 5, 3, 0] = big  # finite, its group's sum overflows
    values[7, 1, 1, 0] = -big
    sh = in_layout(values, layout)
    expected = np.isfinite(values).all(axis=-1)
    assert 20 < (~expected).sum() < 27 and expected[4, 3, 2] and expected[1, 5, 3]
    np.testing.assert_array_equal(finite_voxels(sh), expected)
    np.testing.assert_array_equal(_finite_by_sums(sh), expected)
    everywhere = np.full_like(sh, np.nan)
    np.testing.assert_array_equal(finite_voxels(everywhere), np.zeros(shape, bool))


def test_given_finite_flags_stand_in_for_the_search_own_pass():
    """``finite`` is what the search leaves out, as its own pass would (a job passes the
    flags it warned about); flags of the wrong shape are refused."""
    shape = (4, 4, 3)
    sh = np.asfortranarray(phantom(shape, 6, seed=4)["sh"].astype(np.float32))
    sh[1, 2, 0, 5] = np.nan
    sh[3, 3, 2, :] = np.inf
    alone = sshopm_peaks(sh, backend="cpu")
    given = sshopm_peaks(sh, backend="cpu", finite=np.isfinite(sh).all(axis=-1))
    assert given.stats["nonfinite_voxels"] == alone.stats["nonfinite_voxels"] == 2
    for name in ("directions", "amplitudes", "count"):
        np.testing.assert_array_equal(getattr(given, name), getattr(alone, name))
    # the flags are taken as given: a voxel flagged non-finite is left out
    flags = finite_voxels(sh)
    flags[0, 0, 0] = False
    left_out = sshopm_peaks(sh, backend="cpu", finite=flags)
    assert left_out.stats["nonfinite_voxels"] == 3 and left_out.count[0, 0, 0] == 0 < alone.count[0, 0, 0]
    with pytest.raises(ValueError, match=r"finite has shape \(4, 4\), not the SH volume's spatial shape"):
        sshopm_peaks(sh, backend="cpu", finite=flags[..., 0])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"npeaks": 0}, "npeaks must be between 1 and 255, not 0"),
        ({"npeaks": 256}, "npeaks must be between 1 and 255"),
        ({"starts": 0}, "starts must be between 1 and 256, not 0"),
        ({"starts": 257}, "starts must be between 1 and 256, not 257"),
        ({"starts": 2, "npeaks": 3}, r"npeaks \(3\) cannot exceed the number of starts \(2\)"),
        ({"relative_threshold": 1.5}, r"relative_threshold must be in \[0, 1\], not 1.5"),
        ({"relative_threshold": -0.1}, r"relative_threshold must be in \[0, 1\]"),
        ({"threshold": math.nan}, "threshold must be a finite number"),
        ({"threshold": math.inf}, "threshold must be a finite number"),
        ({"seeding": "random"}, "seeding must be 'local-max' or 'all', not 'random'"),
        ({"seed_fraction": 1.5}, r"seed_fraction must be in \[0, 1\], not 1.5"),
        ({"max_iter": 0}, "max_iter must be at least 1"),
    ],
)
def test_options_validation(options, message):
    with pytest.raises(ValueError, match=message):
        PeaksOptions(**options)


def test_call_validation():
    sh = np.zeros((2, 2, 45), np.float32)
    with pytest.raises(ValueError, match=r"44 SH coefficients .* has one of 6 \(lmax 2\), 15 \(lmax 4\)"):
        sshopm_peaks(np.zeros((2, 44)), backend="cpu")
    with pytest.raises(ValueError, match=r"mask shape \(3, 2\) does not match the SH volume's spatial shape \(2, 2\)"):
        sshopm_peaks(sh, mask=np.ones((3, 2), bool), backend="cpu")
    with pytest.raises(ValueError, match="backend must be auto, cpu or cuda, not 'gpu'"):
        sshopm_peaks(sh, backend="gpu")
    with pytest.raises(ValueError, match="basis must be one of"):
        sshopm_peaks(sh, basis="fsl", backend="cpu")
    with pytest.raises(ValueError, match="last axis"):
        sshopm_peaks(np.float32(1.0), backend="cpu")


@pytest.mark.parametrize(
    "options",
    [PeaksOptions(seeding="all"), PeaksOptions(seed_fraction=0.0), PeaksOptions(seeding="all", seed_fraction=0.0)],
    ids=["all", "fraction-0", "all-fraction-0"],
)
def test_seeding_variants_find_the_same_peaks(options):
    shape = (12, 12, 12)
    default = default_peaks(shape, 8)
    result = sshopm_peaks(phantom(shape, 8)["sh"], options=options, backend="cpu")
    assert result.stats["starts_climbed_per_voxel"] > default.stats["starts_climbed_per_voxel"]
    assert_same_peaks(result, default, direction_atol=1e-7, amplitude_rtol=1e-9)


def test_default_seeding_finds_close_crossings():
    """Two fibers 35°–90° apart in every voxel: the default seeding must find every peak
    that climbing from all starts finds. A lobe next to a larger one can have no start that
    beats its 6 neighbours (they lie on the larger lobe's flank), and a weak shoulder
    maximum has a tiny basin; starts are blocked only by a higher neighbour within 30° of
    their gradient, which keeps the start nearest such a maximum climbing."""
    truth = fod_phantom((10, 10, 10), 8, fiber_fractions=(0.0, 1.0, 0.0), min_separation=35.0, seed=1)
    default = sshopm_peaks(truth["sh"], backend="cpu")
    everything = sshopm_peaks(truth["sh"], options=PeaksOptions(seeding="all"), backend="cpu")
    matched = match_peaks(default.directions, default.count, truth["directions"], truth["count"])
    matched_all = match_peaks(everything.directions, everything.count, truth["directions"], truth["count"])
    fewer = np.argwhere(default.count < everything.count)
    print(f"\ncrossings ≥ 35°: fiber count right in {matched['count_agreement']:.3f} (default seeding) vs "
          f"{matched_all['count_agreement']:.3f} (all starts); voxels with peaks missed by the default: {len(fewer)}")
    assert len(fewer) == 0, (
        f"default seeding missed peaks that seeding='all' finds in {len(fewer)} voxels, e.g. {fewer[:5].tolist()} "
        f"with amplitudes {[everything.amplitudes[tuple(v)].tolist() for v in fewer[:3]]}"
    )
    assert_same_peaks(default, everything, direction_atol=1e-7, amplitude_rtol=1e-9)


def test_capped_climbs_are_dropped_and_counted():
    # Climbs need a few Newton steps to converge; two iterations stop most of them short.
    flat = phantom((12, 12, 12), 8)["sh"].reshape(-1, 45)[:8]
    reference = sshopm_peaks(flat, backend="cpu")
    assert reference.stats["starts_hit_cap"] == 0
    capped = sshopm_peaks(flat, options=PeaksOptions(max_iter=2), backend="cpu")
    assert capped.stats["starts_hit_cap"] > 0 and capped.stats["voxels_with_capped_starts"] > 0
    assert capped.count.sum() < reference.count.sum()


def test_progress_is_reported_and_can_cancel():
    sh = phantom((6, 6, 6), 8, seed=5)["sh"]
    fractions = []
    sshopm_peaks(sh, backend="cpu", progress=fractions.append, chunk_voxels=50)
    assert fractions == pytest.approx([50 / 216, 100 / 216, 150 / 216, 200 / 216, 1.0])

    class Stop(Exception):
        pass

    def cancel(fraction):
        raise Stop

    with pytest.raises(Stop):
        sshopm_peaks(sh, backend="cpu", progress=cancel, chunk_voxels=50)


def test_every_layout_of_the_volume_gives_the_same_peaks_from_a_view():
    """A C-ordered array, a NIfTI's layout (x fastest, each coefficient's volume after the
    other) and an MRtrix image's usual one (each voxel's coefficients together, x fastest:
    ``mrconvert -strides 2,3,4,1``): the engine takes each as a view, not a transposed copy,
    and finds the same peaks, with and without a mask, on both backends (the CUDA one in
    the simulator, whose SH→tensor kernel then reads the coefficients with their strides)."""
    from gpu.peaks.search import _coefficients_by_voxel

    sh = phantom((3, 2, 2), 4, seed=5)["sh"].astype(np.float32)
    nifti = np.asfortranarray(sh)
    mrtrix = np.moveaxis(np.asfortranarray(np.moveaxis(sh, -1, 0)), 0, -1)
    assert mrtrix.strides == (4 * 15, 4 * 15 * 3, 4 * 15 * 6, 4)
    mask = np.arange(12).reshape(3, 2, 2) % 3 != 1
    for layout in (sh, nifti, mrtrix):
        assert np.shares_memory(_coefficients_by_voxel(layout)[0], layout)
    options = PeaksOptions(starts=32)
    for backend in ("cpu", "cuda"):
        for selected in (None, mask):
            c, f, m = (sshopm_peaks(a, mask=selected, options=options, backend=backend) for a in (sh, nifti, mrtrix))
            assert c.count.sum() > 0
            for other in (f, m):
                np.testing.assert_array_equal(other.count, c.count)
                np.testing.assert_array_equal(other.directions, c.directions)
                np.testing.assert_array_equal(other.amplitudes, c.amplitudes)
