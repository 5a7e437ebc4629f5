"""Gradient scheme reading and shell clustering against MRtrix3's ``mrinfo``."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from gpu.fod.gradient_scheme import normalise_scheme
from gpu.fod.phantom import shell_scheme
from gpu.fod.shells import dw_shells
from worker.io.mif import write_mif

pytestmark = pytest.mark.requires_mrtrix


def _mrinfo(tmp_path, bvals, bvecs, *options) -> subprocess.CompletedProcess:
    """``mrinfo OPTIONS`` of a one-voxel image with the scheme given by ``-grad`` (scanner space)."""
    grad = tmp_path / "grad.txt"
    np.savetxt(grad, np.column_stack([bvecs, bvals]), fmt="%.17g")
    image = write_mif(tmp_path / "dwi.mif", np.ones((1, 1, 1, len(bvals)), np.float32), np.eye(4))
    return subprocess.run(["mrinfo", "-quiet", str(image), "-grad", str(grad), *options], capture_output=True,
                          text=True)


def _schemes() -> dict:
    rng = np.random.default_rng(5)
    b, g = shell_scheme(3, ((1000, 20), (2000, 30), (3000, 40)), seed=1)
    jittered = b + np.where(b > 0, rng.uniform(-30, 30, b.size), rng.uniform(0, 9, b.size))
    return {
        "three shells": (b, g),
        "jittered": (jittered, g),
        "an unassigned volume": (np.append(jittered, 1500.0), np.vstack([g, [[0.0, 0.6, 0.8]]])),
        "no b=0": shell_scheme(0, ((700, 20), (2500, 25)), seed=2),
        # one nominal b, shells encoded in the vector norms (b-value scaling)
        "scaled by norms": (np.where(b > 0, 3000.0, 0.0), g * np.sqrt(b / 3000.0)[:, None]),
    }


@pytest.mark.parametrize("name", list(_schemes()))
def test_shells_match_mrinfo(name, tmp_path):
    bvals, bvecs = _schemes()[name]
    result = _mrinfo(tmp_path, bvals, bvecs, "-shell_bvalues", "-shell_indices")
    assert result.returncode == 0, result.stderr
    means, indices = result.stdout.strip().splitlines()
    shells = dw_shells(normalise_scheme(bvals, bvecs)[0])
    assert [s.volumes.tolist() for s in shells] == [[int(i) for i in s.split(",")] for s in indices.split()]
    np.testing.assert_allclose([s.mean_b for s in shells], [float(m) for m in means.split()], rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("name", ["scaled by norms", "jittered"])
def test_normalised_scheme_matches_mrinfo(name, tmp_path):
    bvals, bvecs = _schemes()[name]
    result = _mrinfo(tmp_path, bvals, bvecs, "-dwgrad")
    assert result.returncode == 0, result.stderr
    theirs = np.loadtxt(result.stdout.splitlines())
    ours_b, ours_g = normalise_scheme(bvals, bvecs)
    np.testing.assert_allclose(ours_b, theirs[:, 3], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(ours_g, theirs[:, :3], atol=1e-12)


def test_dsi_grid_is_not_shells(tmp_path):
    """DIPY's small_101D samples q-space on a grid: MRtrix3 finds no shells there, nor do we."""
    from dipy.data import get_fnames

    _, bval, bvec = get_fnames(name="small_101D")
    bvals, bvecs = np.loadtxt(bval), np.loadtxt(bvec).T
    assert _mrinfo(tmp_path, bvals, bvecs, "-shell_bvalues").returncode != 0
    with pytest.raises(ValueError, match="could not be grouped into shells"):
        dw_shells(normalise_scheme(bvals, bvecs)[0])


def test_nan_directions_are_no_direction():
    bvals, bvecs = normalise_scheme(np.array([0.0, 1000.0, 1000.0]), np.array([[np.nan] * 3, [2.0, 0, 0], [0, 0, 1.0]]))
    np.testing.assert_array_equal(bvecs, [[0, 0, 0], [1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(bvals, [0.0, 4000.0, 1000.0])
