"""``.pam5`` read back by DIPY's ``load_pam``."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from dipy.data import get_sphere
from dipy.io.peaks import load_pam

from tests.worker.io.grids import oblique_affine
from tests.worker.io.test_fixels import synthetic_peaks
from worker.errors import InputError
from worker.io.pam5 import nearest_vertex, write_pam5


def test_dipy_reads_back_our_peaks(tmp_path):
    directions, amplitudes, count = synthetic_peaks()
    rng = np.random.default_rng(1)
    shm = rng.normal(size=(*count.shape, 15)).astype(np.float32)
    gfa = rng.uniform(size=count.shape).astype(np.float32)
    affine = oblique_affine()
    path = write_pam5(tmp_path / "peaks.pam5", directions, amplitudes, affine, shm_coeff=shm, gfa=gfa)

    pam = load_pam(path)
    present = np.arange(directions.shape[3]) < count[..., None]
    np.testing.assert_allclose(pam.peak_dirs, np.where(present[..., None], directions, 0), atol=1e-7)
    np.testing.assert_allclose(pam.peak_values, np.where(present, amplitudes, 0), atol=1e-7)
    np.testing.assert_array_equal(pam.shm_coeff, shm)
    np.testing.assert_array_equal(pam.gfa, gfa)
    np.testing.assert_array_equal(pam.affine, affine)
    vertices = get_sphere(name="repulsion724").vertices
    np.testing.assert_allclose(pam.sphere.vertices, vertices, atol=1e-12)  # DIPY renormalises them
    # Each index is the vertex nearest to its peak, -1 where there is none.
    cosines = np.nan_to_num(directions) @ vertices.T
    np.testing.assert_array_equal(pam.peak_indices, np.where(present, cosines.argmax(axis=-1), -1))


def test_on_a_hemisphere_the_nearest_axis_counts():
    vertices = get_sphere(name="repulsion100").vertices
    hemisphere = vertices[vertices[:, 2] > 0]
    directions = np.random.default_rng(3).normal(size=(50, 3))
    directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
    cosines = np.abs(directions @ hemisphere.T)
    np.testing.assert_array_equal(nearest_vertex(directions, hemisphere), cosines.argmax(axis=-1))


def test_sphere_given_by_vertices_and_indices_given(tmp_path):
    directions, amplitudes, count = synthetic_peaks(seed=2)
    vertices = get_sphere(name="symmetric362").vertices
    indices = nearest_vertex(directions, vertices)
    path = write_pam5(tmp_path / "p.pam5", directions, amplitudes, np.eye(4), sphere=vertices, indices=indices)
    pam = load_pam(path)
    np.testing.assert_allclose(pam.sphere.vertices, vertices, atol=1e-12)  # DIPY renormalises them
    np.testing.assert_array_equal(pam.peak_indices, indices)
    assert pam.shm_coeff is None and pam.gfa is None


def test_without_dipy_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    directions, amplitudes, _ = synthetic_peaks()
    monkeypatch.setitem(sys.modules, "dipy.io.peaks", None)  # makes `import dipy.io.peaks` fail
    with pytest.raises(InputError, match=r"pip install 'fibertensor\[dipy\]'"):
        write_pam5(tmp_path / "p.pam5", directions, amplitudes, np.eye(4))
    assert not any(tmp_path.iterdir())
