"""6-connected erosion and dilation against scipy.ndimage's (border_value=0): equal voxel for voxel."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from gpu.fod.masks import dilate_6_connected, erode_6_connected

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
