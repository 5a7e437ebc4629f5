"""The generated, unrolled SS-HOPM code: current, readable, and exact in float64.

``pytest -s`` prints the generated A x^m, A x^(m−1), A x^(m−2) (plain and from per-voxel
weights) source of every order.
"""

from __future__ import annotations

import inspect
import itertools
import re

import numba
import numpy as np
import pytest

from gpu.cuda.simulator import simulator_active
from gpu.peaks import sshopm_generated
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import PeaksOptions, sshopm_peaks
from gpu.peaks.peak_matching import exact_peak_offsets
from gpu.sh_basis import n_coeffs
from gpu.peaks.sshopm_block import MAX_WARPS
from gpu.peaks.sshopm_codegen import (MAX_STARTS, ORDERS, generate_cpu_module, generate_cuda_module, generate_module,
                                      generated_cpu_path, generated_cuda_path, generated_path)
from gpu.peaks.symmetric_tensor import index_classes, sh_to_tensor, sphere_points, tensor_value


def unit_vectors(count: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(count, 3))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


_compiled: dict[tuple[str, int], numba.core.registry.CPUDispatcher] = {}


def compiled(name: str, order: int):
    """``{name}_m{order}`` from the generated module under ``numba.njit``, compiled once per
    process and kept in numba's on-disk cache (order 12 takes seconds to compile)."""
    key = (name, order)
    if key not in _compiled:
        _compiled[key] = numba.njit(cache=True)(getattr(sshopm_generated, f"{name}_m{order}"))
    return _compiled[key]


def evaluate(order: int, entries: np.ndarray, directions: np.ndarray):
    """(A x^m, A x^(m−1), A x^(m−2) as 3×3) from the njit-compiled generated code, float64."""
    axm, axm1, axm2 = (compiled(n, order) for n in ("axm", "axm1", "axm2"))
    values, vectors, matrices = [], [], []
    for x, y, z in directions:
        values.append(axm(entries, x, y, z))
        vectors.append(axm1(entries, x, y, z))
        mxx, mxy, mxz, myy, myz, mzz = axm2(entries, x, y, z)
        matrices.append([[mxx, mxy, mxz], [mxy, myy, myz], [mxz, myz, mzz]])
    return np.array(values), np.array(vectors), np.array(matrices)


def test_seed_scratch_covers_the_largest_block():
    # one per-warp slot for each warp of a MAX_STARTS-thread seed block
    assert MAX_WARPS == -(-MAX_STARTS // 32)


@pytest.mark.parametrize("path, generate", [(generated_path, generate_module),
                                            (generated_cpu_path, generate_cpu_module),
                                            (generated_cuda_path, generate_cuda_module)])
def test_committed_module_is_current(path, generate):
    assert path().read_text() == generate(), (
        f"gpu/peaks/{path().name} is stale: regenerate it with `python -m gpu.peaks.sshopm_codegen` and commit it"
    )


@pytest.mark.parametrize("order", ORDERS)
def test_print_generated_source(order):
    names = ("axm", "axm1", "axm2")
    sources = [inspect.getsource(getattr(sshopm_generated, f"{name}_m{order}")) for name in names]
    print(f"\n# ---- generated code, order {order} ----\n" + "\n\n".join(sources))
    n_unique = len(index_classes(order))
    # One term per unique entry in A x^m, with its multiplicity baked in as a constant.
    body = sources[0].split("return (", 1)[1]
    assert body.count("a[") == n_unique
    assert {int(i) for i in re.findall(r"a\[(\d+)\]", body)} == set(range(n_unique))
    n_lower1 = len(index_classes(order - 1))
    n_lower2 = len(index_classes(order - 2))
    assert sources[1].count("a[") == 3 * n_lower1
    assert sources[2].count("a[") == 6 * n_lower2


@pytest.mark.parametrize("order", [o for o in ORDERS if o <= 6])
def test_generated_code_equals_full_tensor_contraction(order):
    rng = np.random.default_rng(order)
    entries = rng.normal(size=n_coeffs(order))
    lookup = {tuple(c): k for k, c in enumerate(index_classes(order))}
    full = np.empty((3,) * order)
    for index in itertools.product(range(3), repeat=order):
        full[index] = entries[lookup[tuple(sorted(index))]]
    directions = unit_vectors(25, order)
    values, vectors, matrices = evaluate(order, entries, directions)
    for x, value, vector, matrix in zip(directions, values, vectors, matrices):
        contracted = full
        for _ in range(order - 2):
            contracted = contracted @ x
        expected_matrix = contracted
        expected_vector = expected_matrix @ x
        expected_value = expected_vector @ x
        scale = np.abs(entries).max() * 3.0**order
        np.testing.assert_allclose(matrix, expected_matrix, rtol=0, atol=1e-13 * scale)
        np.testing.assert_allclose(vector, expected_vector, rtol=0, atol=1e-13 * scale)
        assert value == pytest.approx(expected_value, rel=0, abs=1e-13 * scale)


def _finite_difference_derivatives(entries: np.ndarray, x: np.ndarray, h: float):
    """Gradient and Hessian of f(x) = A x^m (a homogeneous polynomial on R^3, from
    tensor_value) by central differences with one Richardson step: O(h⁴) error."""

    def f(points):
        return tensor_value(entries, np.atleast_2d(points))

    def estimates(step):
        eye = np.eye(3) * step
        grad = (f(x + eye) - f(x - eye)) / (2 * step)
        hess = np.empty((3, 3))
        for i in range(3):
            for j in range(3):
                corners = np.array([x + eye[i] + eye[j], x + eye[i] - eye[j], x - eye[i] + eye[j], x - eye[i] - eye[j]])
                fpp, fpm, fmp, fmm = f(corners)
                hess[i, j] = (fpp - fpm - fmp + fmm) / (4 * step * step)
        return grad, hess

    g1, h1 = estimates(h)
    g2, h2 = estimates(h / 2)
    return (4 * g2 - g1) / 3, (4 * h2 - h1) / 3


@pytest.mark.parametrize("order", ORDERS)
def test_generated_code_matches_tensor_value_and_its_derivatives(order):
    # A x^m = f(x), A x^(m−1) = ∇f/m, A x^(m−2) = ∇²f/(m(m−1)) (Ballard et al., Def. 2).
    rng = np.random.default_rng(100 + order)
    m = order
    for trial in range(3):
        entries = sh_to_tensor(rng.normal(size=n_coeffs(order)))
        directions = unit_vectors(8, 1000 * order + trial)
        values, vectors, matrices = evaluate(order, entries, directions)
        reference = tensor_value(entries, directions)
        np.testing.assert_allclose(values, reference, rtol=0, atol=1e-12 * np.abs(reference).max())
        for x, vector, matrix in zip(directions, vectors, matrices):
            grad, hess = _finite_difference_derivatives(entries, x, 1e-3)
            np.testing.assert_allclose(m * vector, grad, rtol=0, atol=1e-7 * np.abs(grad).max())
            np.testing.assert_allclose(m * (m - 1) * matrix, hess, rtol=0, atol=1e-6 * np.abs(hess).max())
            # The three outputs are consistent: M x = A x^(m−1), xᵀ M x = A x^m.
            np.testing.assert_allclose(matrix @ x, vector, rtol=0, atol=1e-12 * np.abs(vector).max())


# Orders 2 (a quadratic form: checked against its eigenvectors) and 8 (the default lmax)
# by default; every order's kernel has the same block shape, so the rest are the slow sweep.
@pytest.mark.parametrize("order", [pytest.param(o, marks=() if o in (2, 8) else pytest.mark.slow) for o in ORDERS])
def test_cuda_kernel_peaks_are_exact_local_maxima(order):
    """Each order's CUDA kernel (in the simulator, or on the GPU where the tests run on one) on
    2 voxels of a single-fiber phantom, 16 starts: every peak is an exact local maximum
    (float64 refinement) and the largest is the global maximum."""
    phantom = fod_phantom((2,), order, fiber_fractions=(1.0, 0.0, 0.0), noise=0.0, seed=order)
    options = PeaksOptions(starts=16, npeaks=3)
    result = sshopm_peaks(phantom["sh"], options=options, backend="cuda")
    assert result.stats["backend"] == "cuda"
    assert (result.stats["device"] == "numba CUDA simulator") == simulator_active()
    entries = sh_to_tensor(phantom["sh"])
    assert (result.count >= 1).all(), result.count
    offsets = exact_peak_offsets(entries, result.directions, result.count, order)
    assert offsets.max() < 0.01, offsets
    dense = sphere_points(20000)
    for v in range(2):
        k = int(result.count[v])
        directions = result.directions[v, :k].astype(np.float64)
        np.testing.assert_allclose(np.linalg.norm(directions, axis=1), 1.0, atol=1e-6)
        assert (directions[:, 2] >= 0).all()
        exact = tensor_value(entries[v], directions)
        np.testing.assert_allclose(result.amplitudes[v, :k], exact, rtol=1e-5)
        assert (np.diff(result.amplitudes[v, :k]) <= 0).all()
        assert result.amplitudes[v, 0] >= tensor_value(entries[v], dense).max() * (1 - 1e-5)
        if order == 2:
            # A quadratic form: its maximum on the sphere is the leading eigenvector.
            matrix = np.empty((3, 3))
            for (i, j), a in zip(index_classes(2), entries[v]):
                matrix[i, j] = matrix[j, i] = a
            eigenvalues, eigenvectors = np.linalg.eigh(matrix)
            assert result.amplitudes[v, 0] == pytest.approx(eigenvalues[-1], rel=1e-5)
            leading = directions[0] / np.linalg.norm(directions[0])
            assert abs(leading @ eigenvectors[:, -1]) == pytest.approx(1.0, abs=1e-9)
        # The single fiber of the phantom is found within 1° when it is the largest lobe.
        truth = phantom["directions"][v, 0].astype(np.float64)
        if order >= 4:
            assert np.degrees(np.arccos(min(1.0, abs(directions[0] @ truth)))) < 1.0
