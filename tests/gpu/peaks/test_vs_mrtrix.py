"""sshopm_peaks against MRtrix3 ``sh2peaks`` on a phantom and on real data (DIPY's small_64D
fitted with DIPY's CSD), and the SH basis handling (DIPY's basis vs MRtrix3's)."""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from gpu.peaks import sshopm_generated
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.peak_matching import exact_peak_offsets
from gpu.peaks.search import PeaksOptions, sshopm_peaks
from gpu.sh_basis import convert_sh_basis, real_sh_matrix
from gpu.peaks.symmetric_tensor import sh_to_tensor, tensor_value

# The module's expensive fixtures (DIPY's CSD fit, sh2peaks runs) are computed once: with
# --dist loadgroup its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("vs_mrtrix")

WELL_ABOVE = 0.3  # compare peaks with amplitude ≥ this × the voxel's largest, in both tools
MAX_ANGLE = 1.0  # degrees


def run_sh2peaks(sh: np.ndarray, folder: Path, npeaks: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """sh2peaks on ``sh`` (..., 45) written with an identity affine (image axes = scanner axes).
    Returns unit directions (n, npeaks, 3) and amplitudes (n, npeaks), 0 where absent."""
    folder.mkdir(parents=True, exist_ok=True)
    src, dst = folder / "fod.nii", folder / "sh2peaks.nii"
    nib.save(nib.Nifti1Image(np.asarray(sh, np.float32), np.eye(4)), src)
    subprocess.run(["sh2peaks", "-quiet", "-force", "-num", str(npeaks), str(src), str(dst)], check=True, capture_output=True)
    peaks = np.asarray(nib.load(dst).dataobj, np.float64).reshape(-1, npeaks, 3)
    amplitudes = np.linalg.norm(peaks, axis=-1)
    amplitudes[~np.isfinite(amplitudes)] = 0.0
    directions = np.nan_to_num(peaks) / np.maximum(amplitudes, 1e-30)[..., None]
    return directions, amplitudes


def is_exact_maximum(entries: np.ndarray, direction: np.ndarray, order: int) -> bool:
    """Float64 check that ``direction`` is a strict local maximum of A x^m on the sphere:
    tangent gradient ≈ 0 and tangent Hessian negative definite (Kolda & Mayo 2011, Thm. 3.5)."""
    axm1 = getattr(sshopm_generated, f"axm1_m{order}")
    axm2 = getattr(sshopm_generated, f"axm2_m{order}")
    x = direction / np.linalg.norm(direction)
    g = np.array(axm1(entries, *x))
    mxx, mxy, mxz, myy, myz, mzz = axm2(entries, *x)
    m = np.array([[mxx, mxy, mxz], [mxy, myy, myz], [mxz, myz, mzz]])
    lam = x @ g
    basis = np.linalg.svd(x[None])[2][1:]  # orthonormal (u, v) ⟂ x
    tangent_gradient = basis @ g
    hessian = (order - 1) * basis @ m @ basis.T - lam * np.eye(2)
    return bool(np.linalg.norm(tangent_gradient) < 1e-3 * abs(lam) and np.linalg.eigvalsh(hessian).max() < 0)


def compare_with_sh2peaks(ours, directions: np.ndarray, amplitudes: np.ndarray) -> dict:
    """Per voxel, the peaks of each tool with amplitude ≥ WELL_ABOVE × that tool's largest:
    the voxel agrees when both sets have the same size and each of ours has one of theirs
    within MAX_ANGLE (axes, |cos|)."""
    n = directions.shape[0]
    our_dirs = ours.directions.reshape(n, -1, 3).astype(np.float64)
    our_amps = np.nan_to_num(ours.amplitudes.reshape(n, -1).astype(np.float64))
    agree, compared, angles, amplitude_ratios, disagreeing = 0, 0, [], [], []
    for v in range(n):
        if our_amps[v].max() <= 0 and amplitudes[v].max() <= 0:
            continue
        compared += 1
        mine = our_amps[v] >= WELL_ABOVE * our_amps[v].max()
        theirs = amplitudes[v] >= WELL_ABOVE * amplitudes[v].max()
        ok = mine.sum() == theirs.sum()
        if ok:
            for i in np.flatnonzero(mine):
                cos = np.abs(directions[v, theirs] @ our_dirs[v, i])
                j = int(np.argmax(cos))
                angle = float(np.degrees(np.arccos(min(1.0, cos[j]))))
                angles.append(angle)
                amplitude_ratios.append(amplitudes[v, theirs][j] / our_amps[v, i])
                ok &= angle < MAX_ANGLE
        agree += bool(ok)
        if not ok:
            disagreeing.append(v)
    return {"share": agree / compared, "compared": compared, "disagreeing": disagreeing,
            "angles": np.array(angles), "amplitude_ratios": np.array(amplitude_ratios)}


def missed_maxima(ours, sh: np.ndarray, directions: np.ndarray, amplitudes: np.ndarray) -> list[tuple[int, float, float]]:
    """sh2peaks peaks that are exact local maxima with amplitude ≥ WELL_ABOVE × the voxel's
    largest but that we do not report within MAX_ANGLE: (voxel, amplitude, share of max)."""
    n = directions.shape[0]
    entries = sh_to_tensor(sh.reshape(n, -1))
    our_dirs = ours.directions.reshape(n, -1, 3).astype(np.float64)
    count = ours.count.reshape(n)
    missed = []
    for v in range(n):
        top = amplitudes[v].max()
        for k in np.flatnonzero(amplitudes[v] >= WELL_ABOVE * max(top, 1e-30)):
            if top <= 0 or not is_exact_maximum(entries[v], directions[v, k], 8):
                continue
            cos = np.abs(our_dirs[v, : count[v]] @ directions[v, k])
            if cos.size == 0 or np.degrees(np.arccos(min(1.0, cos.max()))) >= MAX_ANGLE:
                missed.append((v, round(float(amplitudes[v, k]), 4), round(float(amplitudes[v, k] / top), 3)))
    return missed


# ---- phantom -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def phantom_run(tmp_path_factory):
    truth = fod_phantom((10, 10, 10), 8, seed=11)
    ours = sshopm_peaks(truth["sh"], backend="cpu")
    directions, amplitudes = run_sh2peaks(truth["sh"], tmp_path_factory.mktemp("phantom"))
    return truth, ours, directions, amplitudes


@pytest.mark.requires_mrtrix
def test_phantom_same_peaks_as_sh2peaks(phantom_run):
    truth, ours, directions, amplitudes = phantom_run
    result = compare_with_sh2peaks(ours, directions, amplitudes)
    print(f"\nphantom 10³ lmax 8 vs sh2peaks: same well-above-threshold peaks in {result['share']:.4f} of "
          f"{result['compared']} voxels; angle max {result['angles'].max():.4f}°, mean {result['angles'].mean():.4f}°; "
          f"amplitude ratio {result['amplitude_ratios'].min():.6f}..{result['amplitude_ratios'].max():.6f}")
    assert result["compared"] == 1000
    assert result["share"] == 1.0, f"voxels that differ from sh2peaks: {result['disagreeing']}"
    assert result["angles"].max() < 0.1
    np.testing.assert_allclose(result["amplitude_ratios"], 1.0, rtol=1e-4)


@pytest.mark.requires_mrtrix
def test_phantom_reports_no_fewer_exact_maxima_than_sh2peaks(phantom_run):
    truth, ours, directions, amplitudes = phantom_run
    assert missed_maxima(ours, truth["sh"], directions, amplitudes) == []


# ---- real data: DIPY's small_64D, CSD by DIPY ----------------------------------------------


def small_64d_paths() -> tuple[Path, Path, Path]:
    import dipy
    from dipy.data import get_fnames

    package = Path(dipy.__file__).resolve().parent
    paths = tuple(Path(p).resolve() for p in get_fnames("small_64D"))
    for path in paths:
        assert path.is_file() and package in path.parents, (
            f"DIPY's small_64D file {path} is not a local file inside the dipy package ({package}); "
            "these tests need the data files DIPY ships in dipy/data/files (reinstall dipy)"
        )
    return paths


@pytest.fixture(scope="module")
def csd(tmp_path_factory):
    """CSD (DIPY, lmax 8) of the real DWI in small_64D: SH in DIPY's basis, converted to MRtrix3's."""
    from dipy.core.gradients import gradient_table
    from dipy.data import default_sphere
    from dipy.reconst.csdeconv import ConstrainedSphericalDeconvModel, auto_response_ssst

    dwi, bvals, bvecs = small_64d_paths()
    data = np.asarray(nib.load(dwi).dataobj, np.float64)
    gtab = gradient_table(np.loadtxt(bvals), bvecs=np.loadtxt(bvecs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        response, ratio = auto_response_ssst(gtab, data, roi_radii=10, fa_thr=0.7)
        fit = ConstrainedSphericalDeconvModel(gtab, response, sh_order_max=8).fit(data)
        odf = fit.odf(default_sphere)
    assert fit.shm_coeff.shape == (10, 10, 10, 45)
    # Both tools get the same float32 coefficients (sh2peaks reads them from a float32 NIfTI).
    sh_dipy = np.ascontiguousarray(fit.shm_coeff, np.float32)
    sh_mrtrix = convert_sh_basis(sh_dipy, "dipy", "mrtrix")
    ours = sshopm_peaks(sh_mrtrix, backend="cpu")
    return {"dipy": sh_dipy, "mrtrix": sh_mrtrix, "dipy64": np.asarray(fit.shm_coeff, np.float64), "odf": odf,
            "sphere": default_sphere.vertices, "ratio": ratio, "ours": ours}


@pytest.fixture(scope="module")
def csd_sh2peaks(csd, tmp_path_factory):
    """sh2peaks of the CSD: unit directions (1000, 3, 3) and amplitudes (1000, 3)."""
    return run_sh2peaks(csd["mrtrix"], tmp_path_factory.mktemp("small_64D"))


def test_dipy_csd_uses_the_dipy_basis(csd):
    # DIPY's own FOD values on its sphere equal our "dipy" basis applied to its coefficients,
    # and the MRtrix3 basis applied to the converted ones.
    flat = csd["dipy64"].reshape(-1, 45)
    scale = np.abs(csd["odf"]).max()
    for basis, coeffs in (("dipy", flat), ("mrtrix", convert_sh_basis(flat, "dipy", "mrtrix"))):
        values = coeffs @ real_sh_matrix(8, csd["sphere"], basis).T
        np.testing.assert_allclose(values, csd["odf"].reshape(-1, len(csd["sphere"])), rtol=0, atol=1e-10 * scale)


@pytest.mark.requires_mrtrix
def test_real_data_same_peaks_as_sh2peaks(csd, csd_sh2peaks):
    ours = csd["ours"]
    result = compare_with_sh2peaks(ours, *csd_sh2peaks)
    print(f"\nsmall_64D CSD (lmax 8) vs sh2peaks: same well-above-threshold peaks in {result['share']:.4f} of "
          f"{result['compared']} voxels; matched angle max {result['angles'].max():.4f}°, "
          f"mean {result['angles'].mean():.4f}°; voxels that differ: {result['disagreeing']}")
    assert result["compared"] >= 900
    assert result["share"] >= 0.98
    agreeing = result["angles"][result["angles"] < MAX_ANGLE]
    assert np.median(agreeing) < 0.05
    # Every peak we report is an exact local maximum.
    n = 1000
    offsets = exact_peak_offsets(sh_to_tensor(csd["mrtrix"].reshape(n, 45)), ours.directions.reshape(n, 3, 3),
                                 ours.count.reshape(n), 8)
    assert offsets.max() < 0.01


@pytest.mark.requires_mrtrix
def test_real_data_finds_every_well_above_threshold_maximum_sh2peaks_finds(csd, csd_sh2peaks):
    """A true local maximum (checked in float64) at ≥ 30 % of the voxel's largest that
    sh2peaks finds must be among our peaks, with the default seeding and with all starts."""
    missed = missed_maxima(csd["ours"], csd["mrtrix"], *csd_sh2peaks)
    exhaustive = sshopm_peaks(csd["mrtrix"], options=PeaksOptions(seeding="all"), backend="cpu")
    missed_all = missed_maxima(exhaustive, csd["mrtrix"], *csd_sh2peaks)
    for name, found in (("default seeding", missed), ("seeding='all'", missed_all)):
        assert found == [], (
            f"{name}: {len(found)} exact local maxima found by sh2peaks are missing from our peaks "
            f"(voxel, amplitude, share of the voxel's largest): {found}"
        )


# ---- basis handling --------------------------------------------------------------------------


def assert_same_peaks(a, b) -> None:
    np.testing.assert_array_equal(a.count, b.count)
    present = np.isfinite(b.amplitudes)
    np.testing.assert_array_equal(np.isfinite(a.amplitudes), present)
    np.testing.assert_allclose(a.directions[present], b.directions[present], rtol=0, atol=1e-6)
    np.testing.assert_allclose(a.amplitudes[present], b.amplitudes[present], rtol=1e-6)


def test_dipy_basis_real_data_gives_the_same_peaks_as_converted(csd):
    in_dipy = sshopm_peaks(csd["dipy"], basis="dipy", backend="cpu")
    assert in_dipy.stats["basis"] == "dipy"
    assert_same_peaks(in_dipy, csd["ours"])
    # Reading DIPY's coefficients as if they were MRtrix3's is wrong, and visibly so.
    misread = sshopm_peaks(csd["dipy"], basis="mrtrix", backend="cpu")
    present = (misread.count > 0) & (csd["ours"].count > 0)
    cos = np.abs((misread.directions[..., 0, :] * csd["ours"].directions[..., 0, :]).sum(-1))[present]
    assert np.median(np.degrees(np.arccos(np.clip(cos, 0, 1)))) > 10.0


def test_dipy_basis_phantom_gives_the_same_peaks_as_converted():
    truth = fod_phantom((6, 6, 6), 8, basis="dipy", seed=4)
    in_dipy = sshopm_peaks(truth["sh"], basis="dipy", backend="cpu")
    converted = sshopm_peaks(convert_sh_basis(truth["sh"], "dipy", "mrtrix"), basis="mrtrix", backend="cpu")
    assert_same_peaks(in_dipy, converted)
    # The phantom's fibers were drawn in DIPY's basis: the single-fiber voxels' peaks are the fibers.
    single = truth["count"] == 1
    cos = np.abs((in_dipy.directions[single][:, 0] * truth["directions"][single][:, 0]).sum(-1))
    assert np.degrees(np.arccos(np.clip(cos, 0, 1))).max() < 2.0
    values = tensor_value(sh_to_tensor(truth["sh"][single][0], "dipy"), in_dipy.directions[single][:1, 0])
    assert values[0] == pytest.approx(float(in_dipy.amplitudes[single][0, 0]), rel=1e-6)
