"""The tensor metrics' principal eigenvector against LAPACK's (numpy ``eigh``)."""

import numpy as np

from gpu.fod.response_tensor import _principal_eigenvector


def _tensors(rng: np.random.Generator, values: np.ndarray) -> np.ndarray:
    rotations, _ = np.linalg.qr(rng.standard_normal((len(values), 3, 3)))
    return np.einsum("vij,vj,vkj->vik", rotations, values, rotations)


def test_principal_eigenvector_equals_eigh_and_is_an_eigenvector_where_values_repeat():
    rng = np.random.default_rng(7)
    values = np.sort(rng.uniform(-0.3e-3, 2e-3, (4000, 3)), axis=1)
    values[:500, 1] = values[:500, 2]  # the largest repeated (oblate)
    values[500:1000, 0] = values[500:1000, 1]  # the smallest repeated (prolate)
    values[1000:1500, 1] = values[1000:1500, 2] * (1 - 10 ** rng.uniform(-10, -1, 500))  # nearly repeated
    values[1500:1600] *= -1  # the largest in magnitude negative
    tensors = np.concatenate([_tensors(rng, values), np.zeros((1, 3, 3)), 1e-3 * np.eye(3)[None],
                              np.diag([2e-3, 2e-3, 1e-3])[None]])
    ours = _principal_eigenvector(*(tensors[:, i, j] for i, j in ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))))

    eigenvalues, eigenvectors = np.linalg.eigh(tensors)
    pick = np.argmax(np.abs(eigenvalues), axis=1)
    value = eigenvalues[np.arange(len(pick)), pick]
    theirs = eigenvectors[np.arange(len(pick)), :, pick]
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-14)
    # an eigenvector of the largest-magnitude eigenvalue wherever it repeats
    residual = np.linalg.norm(np.einsum("vij,vj->vi", tensors, ours) - value[:, None] * ours, axis=1)
    assert np.all(residual <= 1e-12 * np.maximum(np.abs(value), 1e-300))
    # LAPACK's, up to sign, wherever that eigenvalue is single
    single = np.r_[500:1000, 1000:4000]
    np.testing.assert_allclose(np.abs(np.sum(ours[single] * theirs[single], axis=1)), 1.0, atol=1e-12)
    # a zero tensor and a multiple of I: LAPACK's choice, as before
    np.testing.assert_array_equal(np.abs(ours[-3:-1]), np.abs(theirs[-3:-1]))
