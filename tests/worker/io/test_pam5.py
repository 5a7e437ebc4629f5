"""``.pam5`` files as DIPY writes and reads them: the layout of ``save_pam``, read back by
``load_pam``; peak indices as DIPY's spheres choose them."""

from __future__ import annotations

import sys

import h5py
import numpy as np
import pytest
from dipy.core.sphere import HemiSphere
from dipy.data import get_sphere
from dipy.direction.peaks import PeaksAndMetrics, peak_directions
from dipy.io.peaks import load_pam, save_pam

from tests.worker.io.grids import oblique_affine
from worker.errors import InputError
from worker.io.pam5 import nearest_vertex, require_dipy, write_pam5

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


def random_directions(n: int, seed: int) -> np.ndarray:
    """``n`` random unit vectors and their antipodes."""
    directions = np.random.default_rng(seed).normal(size=(n, 3))
    directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
    return np.concatenate([directions, -directions])


def h5_contents(path) -> dict:
    """Every attribute and dataset of an HDF5 file: name → (dtype, shape, values)."""
    contents = {}
    with h5py.File(path, "r") as handle:
        contents["attrs"] = dict(handle.attrs)
        handle.visititems(lambda name, item: contents.__setitem__(name, (
            item.dtype, item.shape, item[()]) if isinstance(item, h5py.Dataset) else ("group", None, None)))
    return contents


def test_the_file_is_the_one_dipys_save_pam_writes(tmp_path):
    directions, amplitudes, count = synthetic_peaks()
    rng = np.random.default_rng(1)
    shm = rng.normal(size=(*count.shape, 15)).astype(np.float32)
    gfa = rng.uniform(size=count.shape).astype(np.float32)
    affine = oblique_affine()
    ours = write_pam5(tmp_path / "ours.pam5", directions, amplitudes, affine, shm_coeff=shm, gfa=gfa)

    present = np.arange(directions.shape[3]) < count[..., None]
    pam = PeaksAndMetrics()
    pam.affine = affine
    pam.peak_dirs = np.where(present[..., None], directions, 0).astype(np.float32)
    pam.peak_values = np.where(present, amplitudes, 0).astype(np.float32)
    pam.sphere = get_sphere(name="repulsion724")
    # DIPY's choice of vertex for each stored direction, -1 where there is no peak.
    closest = [pam.sphere.find_closest(d) for d in pam.peak_dirs.reshape(-1, 3).astype(np.float64)]
    pam.peak_indices = np.where(present, np.reshape(closest, present.shape), -1).astype(np.int32)
    pam.shm_coeff, pam.gfa = shm, gfa
    save_pam(str(tmp_path / "dipy.pam5"), pam)

    theirs = h5_contents(tmp_path / "dipy.pam5")
    mine = h5_contents(ours)
    assert list(mine) == list(theirs)
    assert mine.pop("attrs") == theirs.pop("attrs") == {"version": "0.0.1"}
    for name, (dtype, shape, values) in theirs.items():
        assert mine[name][:2] == (dtype, shape), name
        np.testing.assert_array_equal(mine[name][2], values, err_msg=name)

    loaded, expected = load_pam(ours), load_pam(tmp_path / "dipy.pam5")
    for field in ("affine", "peak_dirs", "peak_values", "peak_indices", "shm_coeff", "gfa", "total_weight",
                  "ang_thr", "B", "qa", "odf"):
        np.testing.assert_array_equal(getattr(loaded, field), getattr(expected, field), err_msg=field)
    np.testing.assert_array_equal(loaded.sphere.vertices, expected.sphere.vertices)


def test_nearest_vertex_is_dipys_find_closest_on_full_spheres_and_hemispheres():
    directions = random_directions(5000, seed=3)
    for name in ("repulsion724", "symmetric362", "repulsion100", "repulsion200"):
        sphere = get_sphere(name=name)
        for tested in (directions, sphere.vertices, -sphere.vertices):
            expected = [sphere.find_closest(d) for d in tested]
            np.testing.assert_array_equal(nearest_vertex(tested, sphere.vertices), expected, err_msg=name)
        vertices = sphere.vertices
        hemisphere = HemiSphere(xyz=vertices[vertices[:, 2] > 0])
        for tested in (directions, hemisphere.vertices, -hemisphere.vertices):
            expected = [hemisphere.find_closest(d) for d in tested]
            np.testing.assert_array_equal(nearest_vertex(tested, hemisphere.vertices), expected, err_msg=name)
    # Random points, neither symmetric nor evenly spread: with no antipodes, peak axes
    # meet them as on a hemisphere.
    uneven = random_directions(40, seed=4)[:40]
    np.testing.assert_array_equal(nearest_vertex(directions, uneven), np.abs(directions @ uneven.T).argmax(axis=1))


def test_the_peaks_dipy_finds_on_a_sphere_get_dipys_indices():
    sphere = get_sphere(name="repulsion724")
    rng = np.random.default_rng(5)
    found = 0
    for _ in range(300):
        # Two or three fibres as sharp axial lobes of random weights.
        n = int(rng.integers(2, 4))
        axes = random_directions(n, seed=int(rng.integers(1 << 30)))[:n]
        odf = sum(w * np.exp(-40 * (1 - (sphere.vertices @ a) ** 2)) for w, a in zip(rng.uniform(0.3, 1, n), axes))
        directions, _, indices = peak_directions(odf, sphere, relative_peak_threshold=0.1, min_separation_angle=15)
        found += len(indices)
        np.testing.assert_array_equal(nearest_vertex(directions, sphere.vertices), indices)
    assert found > 500


def test_no_direction_no_vertex():
    vertices = get_sphere(name="repulsion100").vertices
    directions = np.array([[np.nan, 0, 1], [0, 0, 0], [np.inf, 0, 0], [0, 0, 2.0]])
    np.testing.assert_array_equal(nearest_vertex(directions, vertices),
                                  [-1, -1, -1, np.argmax(vertices[:, 2])])
    assert nearest_vertex(np.zeros((2, 0, 3)), vertices).shape == (2, 0)


def test_sphere_given_by_vertices_and_indices_given(tmp_path):
    directions, amplitudes, count = synthetic_peaks(seed=2)
    vertices = get_sphere(name="symmetric362").vertices
    indices = nearest_vertex(directions, vertices)
    path = write_pam5(tmp_path / "p.pam5", directions, amplitudes, np.eye(4), sphere=vertices, indices=indices)
    pam = load_pam(path)
    np.testing.assert_allclose(pam.sphere.vertices, vertices, rtol=0, atol=1e-15)  # load_pam normalises again
    present = np.arange(directions.shape[3]) < count[..., None]
    np.testing.assert_array_equal(pam.peak_indices, np.where(present, indices, -1))
    assert pam.shm_coeff is None and pam.gfa is None


def test_without_dipy_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    directions, amplitudes, _ = synthetic_peaks()
    monkeypatch.setitem(sys.modules, "dipy.data", None)  # makes `import dipy.data` fail
    with pytest.raises(InputError, match=r"pip install 'fibertensor\[dipy\]'"):
        write_pam5(tmp_path / "p.pam5", directions, amplitudes, np.eye(4))
    assert not any(tmp_path.iterdir())


def test_rotated_directions_are_the_float64_product_and_index_dipys_closest_vertex(tmp_path):
    directions, amplitudes, count = synthetic_peaks(seed=4)
    rotation = np.linalg.qr(np.random.default_rng(4).normal(size=(3, 3)))[0]
    pam = load_pam(write_pam5(tmp_path / "r.pam5", directions, amplitudes, np.eye(4), rotation=rotation))
    present = np.arange(directions.shape[3]) < count[..., None]
    expected = np.where(present[..., None], directions.astype(np.float64) @ rotation, 0).astype(np.float32)
    np.testing.assert_allclose(pam.peak_dirs, expected, rtol=0, atol=1e-7)
    sphere = get_sphere(name="repulsion724")
    closest = [sphere.find_closest(d) for d in pam.peak_dirs.reshape(-1, 3).astype(np.float64)]
    np.testing.assert_array_equal(pam.peak_indices, np.where(present, np.reshape(closest, present.shape), -1))


def test_a_dipy_that_cannot_import_names_the_missing_module(monkeypatch):
    """DIPY installed without one of its own dependencies is refused with that module's name,
    not only "not installed"."""
    import importlib

    real_import = importlib.import_module

    def import_module(name, *args):
        if name == "dipy.data":
            raise ModuleNotFoundError("No module named 'tqdm'")
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", import_module)
    with pytest.raises(InputError) as raised:
        require_dipy()
    assert raised.value.title == "DIPY not installed"
    assert "No module named 'tqdm'" in raised.value.detail
    assert "pip install 'fibertensor[dipy]'" in raised.value.detail
