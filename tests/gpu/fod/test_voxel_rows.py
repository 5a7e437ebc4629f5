"""masked_rows: volume[mask], gathered a volume at a time where the volume lies so (NIfTI's
layout), the same rows in the same order as numpy's boolean indexing."""

import numpy as np
import pytest

from gpu.fod.voxel_rows import masked_rows, rows_by_volume


@pytest.mark.parametrize("order", ["F", "C"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_masked_rows_are_boolean_indexings_rows(order, dtype):
    rng = np.random.default_rng(3)
    volume = np.asarray(rng.normal(size=(7, 5, 4, 9)) * 100, dtype=dtype, order=order)
    mask = rng.random((7, 5, 4)) < 0.4
    rows = masked_rows(volume, mask)
    expected = volume[mask]
    assert rows.dtype == dtype and rows.shape == expected.shape == (mask.sum(), 9)
    assert np.array_equal(rows, expected)
    # F-ordered volumes give their rows a column at a time, each gathered along its volume
    assert rows.flags.f_contiguous == (order == "F")


def test_an_empty_mask_gives_no_rows_and_a_wrong_mask_says_so():
    volume = np.asfortranarray(np.ones((3, 3, 2, 4), np.float32))
    assert masked_rows(volume, np.zeros((3, 3, 2), bool)).shape == (0, 4)
    with pytest.raises(ValueError, match=r"the mask has shape \(3, 3\) but the volume's voxels \(3, 3, 2\)"):
        masked_rows(volume, np.ones((3, 3), bool))


def test_rows_by_volume_are_the_rows_of_flat_indices_in_x_fastest_order():
    volume = np.asfortranarray(np.arange(5 * 4 * 3 * 6, dtype=np.float32).reshape(5, 4, 3, 6))
    index = np.array([0, 7, 59, 31])
    expected = volume.reshape(-1, 6, order="F")[index]
    rows = rows_by_volume(volume, index)
    assert rows.flags.f_contiguous and np.array_equal(rows, expected)
