"""6-connected erosion and dilation against scipy.ndimage's (border_value=0), the largest component and
hole filling against its labelling, and the 3×3×3 median against MRtrix3's rule: equal voxel for voxel."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from gpu.fod.masks import dilate_6_connected, erode_6_connected, fill_holes, largest_6_connected, median_3x3x3

FACES = ndimage.generate_binary_structure(3, 1)


def _masks():
    """Random masks of several densities and shapes (thin ones too), most voxels on a border."""
    rng = np.random.default_rng(7)
    for shape in [(1, 1, 1), (1, 5, 4), (2, 3, 9), (6, 7, 5), (12, 10, 8)]:
        for density in (0.2, 0.6, 0.95):
            yield rng.random(shape) < density
    yield np.ones((5, 6, 4), bool)  # the border alone erodes
    yield np.zeros((4, 4, 4), bool)


MASKS = list(_masks())


@pytest.mark.parametrize("iterations", [1, 2, 3])
def test_erosion_equals_scipy(iterations):
    for mask in MASKS:
        theirs = ndimage.binary_erosion(mask, structure=FACES, iterations=iterations)
        ours = erode_6_connected(mask, iterations)
        assert ours.dtype == bool and ours.shape == mask.shape
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("iterations", [1, 2, 3])
def test_dilation_equals_scipy(iterations):
    for mask in MASKS:
        sparse = mask & (np.random.default_rng(8).random(mask.shape) < 0.1)
        for seeds in (mask, sparse):
            theirs = ndimage.binary_dilation(seeds, FACES, iterations=iterations)
            np.testing.assert_array_equal(dilate_6_connected(seeds, iterations), theirs)


def test_one_voxel_grows_into_an_octahedron_and_erodes_back():
    mask = np.zeros((7, 7, 7), bool)
    mask[3, 3, 3] = True
    grown = dilate_6_connected(mask, 2)
    x, y, z = np.indices(mask.shape)
    np.testing.assert_array_equal(grown, np.abs(x - 3) + np.abs(y - 3) + np.abs(z - 3) <= 2)
    np.testing.assert_array_equal(erode_6_connected(grown, 2), mask)


def test_bad_masks_are_refused():
    with pytest.raises(ValueError, match="3D"):
        erode_6_connected(np.ones((3, 3), bool))
    with pytest.raises(ValueError, match="at least 1"):
        dilate_6_connected(np.ones((3, 3, 3), bool), 0)


def _median_reference(mask):
    """MRtrix3's 3×3×3 median of a binary image voxel by voxel: the neighbourhood truncated at
    the border, the median of an even count the mean of its middle two (true when it is ½)."""
    out = np.zeros(mask.shape, bool)
    for index in np.ndindex(mask.shape):
        window = mask[tuple(slice(max(0, i - 1), i + 2) for i in index)].ravel()
        ordered = np.sort(window)
        middle = ordered.size // 2
        value = float(ordered[middle]) if ordered.size % 2 else (float(ordered[middle]) + ordered[middle - 1]) / 2
        out[index] = value != 0
    return out


def test_median_is_mrtrix_median_voxel_by_voxel():
    for mask in MASKS:
        np.testing.assert_array_equal(median_3x3x3(mask), _median_reference(mask))


def test_largest_component_and_holes_equal_scipy_labelling():
    for mask in MASKS:
        labels, count = ndimage.label(mask, structure=FACES)
        if count == 0:
            assert not largest_6_connected(mask).any()
            continue
        sizes = np.bincount(labels.ravel())[1:]
        # of equal sizes, the component met first in memory order
        firsts = [np.flatnonzero(labels.ravel() == k + 1)[0] for k in range(count)]
        best = min(range(count), key=lambda k: (-sizes[k], firsts[k]))
        np.testing.assert_array_equal(largest_6_connected(mask), labels == best + 1)
        background, holes = ndimage.label(~mask, structure=FACES)
        if holes:
            kept = np.argmax(np.bincount(background.ravel())[1:]) + 1
            np.testing.assert_array_equal(fill_holes(mask), background != kept)


def test_components_of_a_long_spiral_are_one():
    """A path that doubles back on itself many times (the labels must travel its whole length)."""
    mask = np.zeros((21, 21, 3), bool)
    mask[::2, :, 1] = True
    mask[1::4, -1, 1] = True
    mask[3::4, 0, 1] = True
    np.testing.assert_array_equal(largest_6_connected(mask), mask)
    assert ndimage.label(mask, structure=FACES)[1] == 1
