"""Fiber peaks: SH fODF → symmetric tensor → local maxima by SS-HOPM (Kolda & Mayo 2011),
on the GPU as in Ballard, Kolda & Plantenga 2011, or on the CPU with the same math."""

from gpu.lazy_exports import lazy_exports

_EXPORTS = {"PeaksOptions": "search", "PeaksResult": "search", "sshopm_peaks": "search",
            "fod_phantom": "phantom",
            "FodfMetrics": "fodf_metrics", "fodf_metrics": "fodf_metrics"}
__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
