"""The phantom's exact tissue responses reproduce its signals."""

from __future__ import annotations

import numpy as np

from gpu.fod.phantom import dwi_phantom, shell_scheme, tissue_responses


def test_tissue_responses_reproduce_the_tensor_signal():
    """A pure single-fibre voxel's signal is Σ_l r_l Y_l0(g·u) (Tournier et al. 2004, Eq. 6
    for a delta FOD): to 1e-6 at lmax 20, where the series has converged."""
    bvals, bvecs = shell_scheme(0, ((1000, 20), (3000, 20)), seed=0)
    phantom = dwi_phantom((3, 1, 1), bvals, bvecs, snr=None, seed=0)
    wm, gm, csf = tissue_responses([1000, 3000], lmax=20)
    assert gm.shape == csf.shape == (2, 1) and wm.shape == (2, 11)
    # voxel 0: mostly WM, one fibre; its GM and CSF parts are isotropic
    f_wm, f_gm, f_csf = phantom["fractions"][0, 0, 0]
    u = phantom["fibres"][0, 0, 0, 0]
    assert phantom["weights"][0, 0, 0, 0] == 1.0
    degrees = np.arange(0, 21, 2)
    cos = bvecs @ u
    y_l0 = np.stack([np.sqrt((2 * l + 1) / (4 * np.pi)) * np.polynomial.legendre.Legendre.basis(l)(cos)
                     for l in degrees], axis=1)
    shell = (bvals > 2000).astype(int)
    expected = (f_wm * np.einsum("vl,vl->v", wm[shell], y_l0)
                + (f_gm * gm[shell, 0] + f_csf * csf[shell, 0]) / np.sqrt(4 * np.pi))
    np.testing.assert_allclose(phantom["dwi"][0, 0, 0], expected, rtol=1e-6)
