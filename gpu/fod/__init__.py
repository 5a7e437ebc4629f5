"""FODs from diffusion-weighted images by constrained spherical deconvolution: single-shell
CSD (Tournier et al. 2007) and multi-shell multi-tissue CSD (Jeurissen et al. 2014), as
MRtrix3's ``dwi2fod`` computes them, on the CPU or a CUDA GPU."""

from gpu.lazy_exports import lazy_exports

_EXPORTS = {"msmt_csd": "deconvolution", "csd": "deconvolution", "msmt_predicted_signal": "deconvolution",
            "csd_predicted_signal": "deconvolution", "dwi_phantom": "phantom",
            "shell_scheme": "phantom", "tissue_responses": "phantom"}
__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
