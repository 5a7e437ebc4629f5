"""Fixels: FOD lobes segmented by FMLS (Smith et al. 2013) with their integral (AFD), peak
amplitude and dispersion, as MRtrix3's ``fod2fixel`` makes them, on the CPU or CUDA."""

from gpu.lazy_exports import lazy_exports

_EXPORTS = {"FmlsOptions": "segment", "FixelSet": "segment", "segment_fods": "segment"}
__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
