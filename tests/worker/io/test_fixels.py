"""Fixel directories read back by MRtrix3: ``fixel2peaks`` gives our peaks, ``fixel2voxel``
our fibre counts (NuFO) and per-voxel sums."""

from __future__ import annotations

import nibabel as nib
import numpy as np
import pytest

from tests.worker.io.grids import oblique_affine
from worker.errors import InputError
from worker.io.fixels import FIXEL_FORMATS, write_fixel_directory

GRID, K = (4, 3, 2), 3


def synthetic_peaks(seed: int = 0):
    """Random unit directions, amplitudes sorted high to low, 0…K peaks a voxel, NaN beyond
    the count (as the peaks job returns them)."""
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(*GRID, K, 3))
    directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
    amplitudes = -np.sort(-rng.uniform(0.1, 1.0, size=(*GRID, K)), axis=-1)
    count = rng.integers(0, K + 1, size=GRID)
    count.flat[:2] = K, 0
    absent = np.arange(K) >= count[..., None]
    directions[absent] = np.nan
    amplitudes[absent] = np.nan
    return directions, amplitudes, count


def peaks_image(path) -> tuple[np.ndarray, np.ndarray]:
    image = nib.load(path)
    return image.get_fdata().reshape(*GRID, -1, 3), image.affine


@pytest.mark.parametrize("fmt", FIXEL_FORMATS)
def test_mrtrix_reads_back_our_peaks_and_counts(tmp_path, mrtrix, fmt):
    directions, amplitudes, count = synthetic_peaks()
    fraction = amplitudes / np.nansum(amplitudes, axis=-1, keepdims=True)
    affine = oblique_affine()
    folder = write_fixel_directory(tmp_path / "fixels", directions, amplitudes, count, affine,
                                   peak_fraction=fraction, fmt=fmt)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{name}.{fmt}" for name in ("index", "directions", "peak_amp", "peak_fraction"))

    mrtrix("fixel2peaks", folder, tmp_path / "unit.nii", "-nan")
    mrtrix("fixel2peaks", folder / f"peak_amp.{fmt}", tmp_path / "scaled.nii", "-nan")
    mrtrix("fixel2voxel", folder / f"peak_amp.{fmt}", "count", tmp_path / "nufo.nii")
    mrtrix("fixel2voxel", folder / f"peak_fraction.{fmt}", "sum", tmp_path / "fraction_sum.nii")

    unit, unit_affine = peaks_image(tmp_path / "unit.nii")
    np.testing.assert_allclose(unit, directions, atol=1e-6)  # K peaks in some voxel: all K come back
    np.testing.assert_allclose(unit_affine, affine, atol=1e-5)
    scaled, _ = peaks_image(tmp_path / "scaled.nii")
    np.testing.assert_allclose(scaled, directions * amplitudes[..., None], atol=1e-6)
    np.testing.assert_array_equal(nib.load(tmp_path / "nufo.nii").get_fdata(), count)
    np.testing.assert_allclose(nib.load(tmp_path / "fraction_sum.nii").get_fdata(),
                               (count > 0).astype(float), atol=1e-6)


def test_the_directory_appears_whole_or_not_at_all(tmp_path):
    directions, amplitudes, count = synthetic_peaks()
    existing = tmp_path / "taken"
    existing.mkdir()
    (existing / "index.mif").write_bytes(b"")
    with pytest.raises(FileExistsError, match="remove it or choose another output"):
        write_fixel_directory(existing, directions, amplitudes, count, np.eye(4))
    with pytest.raises(InputError, match="no voxel has a peak"):
        write_fixel_directory(tmp_path / "empty", directions, amplitudes, np.zeros(GRID, int), np.eye(4))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_counts_beyond_the_valid_peaks_are_refused(tmp_path):
    directions, amplitudes, count = synthetic_peaks()
    with pytest.raises(ValueError, match="non-finite direction"):
        write_fixel_directory(tmp_path / "f", directions, amplitudes, np.full(GRID, K), np.eye(4))
    with pytest.raises(ValueError, match="count must lie in 0…3"):
        write_fixel_directory(tmp_path / "f", directions, amplitudes, count + K, np.eye(4))
